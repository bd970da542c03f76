"""The evidence around a blamed step, in words: what shows the step wrong, and the lesson that names the slip."""

from faultlens.attributors.evidence import built_on, evidence, reason
from faultlens.middleware.model.trace import GoldLabel, Outcome, Step, StepKind, StepRole, Task, Trace


def _run() -> Trace:
    """A lookup fails for one of two cities; the report gives the other only; the answer is built on the report."""
    steps = [
        Step(index=0, agent="planner", kind=StepKind.message, content='["Rome", "Munich"]'),
        Step(index=1, agent="researcher", kind=StepKind.tool_call, tool_name="lookup", tool_arguments={"city": "Rome"},
             tool_result={"city": "Rome", "population": 2761}),
        Step(index=2, agent="researcher", kind=StepKind.tool_call, tool_name="lookup", tool_arguments={"city": "Munich"},
             tool_result={"error": "no entry for 'Munich'"}, error="no entry for 'Munich'"),
        Step(index=3, agent="researcher", kind=StepKind.message, content="Facts: Rome: 2761 thousand people"),
        Step(index=4, agent="analyst", kind=StepKind.final_answer, content="The combined population is 2761 thousand."),
    ]
    return Trace(id="t", task=Task(query="Combined population of Rome and Munich?"), steps=steps,
                 outcome=Outcome(success=False), gold=GoldLabel(step=3, agent="researcher"))


def test_a_report_that_leaves_out_a_failed_item_is_shown_wrong_by_the_failed_call():
    trace = _run()
    [first, *rest] = evidence(trace, 3)
    assert first.kind == "dropped_after_failure" and first.mode == "V.3" and first.steps == [2]
    assert first.items == ["Munich"] and "Rome only" in first.text and "failed at step 2" in first.text
    assert "Munich" in first.advice and "never leave it out" in first.advice
    said = reason(trace, 3, [first, *rest])
    assert said.startswith("The researcher's message (step 3) gives Rome only")
    assert "the analyst's final answer (step 4) is built on it" in said


def test_a_call_whose_own_result_failed_names_its_arguments_and_the_error():
    [found] = [e for e in evidence(_run(), 2) if e.kind == "own_call_failed"]
    assert found.mode == "V.3" and "Munich" in found.text and "no entry" in found.text


def test_a_step_with_nothing_against_it_says_so_and_quotes_itself():
    trace = _run()
    assert evidence(trace, 0) == []
    said = reason(trace, 0, [])
    assert '["Rome", "Munich"]' in said and "no failed call" in said


def test_a_step_that_reports_the_failure_is_not_called_silent():
    trace = _run()
    trace.steps[3] = trace.steps[3].model_copy(update={"content": "Facts: Rome: 2761; the lookup for Munich failed"})
    assert [e.kind for e in evidence(trace, 3)] == []


def test_a_number_no_one_gave_is_unsupported_but_a_computed_one_is_not():
    steps = [Step(index=0, agent="a", kind=StepKind.message, content="The tower is 330 m tall."),
             Step(index=1, agent="b", kind=StepKind.message, content="It was built in 1889 by 300 workers."),
             Step(index=2, agent="b", kind=StepKind.message, content="So 330 - 300 = 30.")]
    trace = Trace(id="u", task=Task(query="How tall is the tower?"), steps=steps)
    [found] = evidence(trace, 1)
    assert found.kind == "unsupported_values" and found.mode == "R.1" and found.items == ["1889", "300"]
    assert evidence(trace, 2) == []


def test_a_repeat_of_the_same_call_is_a_loop():
    call = dict(agent="s", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": "x"}, role=StepRole.decision)
    steps = [Step(index=0, **call), Step(index=1, agent="s", kind=StepKind.tool_result, tool_name="search", content="none"),
             Step(index=2, **call)]
    trace = Trace(id="r", task=Task(query="find x"), steps=steps)
    assert [e.kind for e in evidence(trace, 2)] == ["repeats"] and evidence(trace, 2)[0].mode == "A.6"
    assert built_on(trace, 0) is None and evidence(trace, 99) == []


def test_a_value_the_step_was_given_in_its_own_recorded_input_is_supported():
    # A gateway records each call's input messages: a code executor's output reaches the planner only there.
    given = [{"role": "user", "parts": [{"type": "text", "content": "exitcode: 0\nCode output: 1640"}]}]
    steps = [Step(index=0, agent="coder", kind=StepKind.llm_call, content="print(sum(range(10)))"),
             Step(index=1, agent="planner", kind=StepKind.llm_call, content="The code printed 1640.\nANSWER: 1640",
                  metadata={"input_messages": given}),
             Step(index=2, agent="planner", kind=StepKind.llm_call, content="ANSWER: 1650", metadata={"input_messages": given})]
    trace = Trace(id="g", task=Task(query="What does the code print?"), steps=steps)
    assert evidence(trace, 1) == []
    [found] = evidence(trace, 2)
    assert found.kind == "unsupported_values" and found.items == ["1650"] and "its own input" in found.text
