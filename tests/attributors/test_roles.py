"""Step roles in the offline methods: tool results and executor output are evidence about the step that caused them."""

from __future__ import annotations

import pytest

from faultlens import attributors
from faultlens.middleware.model.trace import Outcome, Step, StepKind, StepRole, Task, Trace
from faultlens.middleware.model.roles import candidates, cause_of, executor_name

OFFLINE = ["heuristic", "learned", "baseline:random-step", "baseline:random-agent", "baseline:majority-agent",
           "baseline:first-step", "baseline:last-step"]


def trace_of(steps, query="What is the population of Lyon?", trace_id="roles"):
    return Trace(id=trace_id, task=Task(query=query), steps=[Step(index=i, **s) for i, s in enumerate(steps)],
                 outcome=Outcome(success=False))


def wrong_call_trace(trace_id="wrong-call"):
    return trace_of([
        dict(agent="planner", kind=StepKind.plan, content="Look up Lyon, then answer."),
        dict(agent="searcher", kind=StepKind.tool_call, tool_name="lookup", tool_arguments={"city": "Lyonn"}),
        dict(agent="searcher", kind=StepKind.tool_result, tool_name="lookup", error="city not found: Lyonn"),
        dict(agent="answerer", kind=StepKind.final_answer, content="I could not find it."),
    ], trace_id=trace_id)


def executor_trace():
    return trace_of([
        dict(agent="assistant", kind=StepKind.message, content="I will sum the column.\n```python\nprint(sum(df['price'])\n```"),
        dict(agent="Computer_terminal", kind=StepKind.message, role=StepRole.executor_output,
             content="exitcode: 1 (execution failed)\nCode output: SyntaxError: unexpected EOF while parsing"),
        dict(agent="assistant", kind=StepKind.final_answer, content="The total could not be computed."),
    ], query="What is the total price in the table?", trace_id="executor")


def test_default_role_follows_the_kind_and_is_not_written_when_implied():
    result = Step(index=0, agent="a", kind=StepKind.tool_result)
    assert result.role == StepRole.tool_result
    assert "role" not in result.model_dump_json()
    call = Step(index=0, agent="a", kind=StepKind.tool_call)
    assert call.role == StepRole.decision
    executed = Step(index=0, agent="a", kind=StepKind.tool_call, role="tool_result")
    assert Step.model_validate_json(executed.model_dump_json()).role == StepRole.tool_result
    # Data written before steps had roles reads with the implied role.
    assert Step.model_validate({"index": 0, "agent": "a", "kind": "tool_result"}).role == StepRole.tool_result


def test_cause_of_a_result_is_its_call_and_executor_output_the_code_before_it():
    t = wrong_call_trace()
    assert cause_of(t, 2) == 1 and cause_of(t, 1) == 1
    assert [s.index for s in candidates(t)] == [0, 1, 3]
    e = executor_trace()
    assert cause_of(e, 1) == 0
    assert executor_name("Computer_terminal") and executor_name("ComputerTerminal") and not executor_name("coder")


def test_cause_of_a_tool_span_called_by_an_agent_is_the_agent_step():
    # A traced agent whose own code called the tool: the agent's step (its span) ends after the tool's.
    t = trace_of([
        dict(agent="researcher", kind=StepKind.tool_call, role=StepRole.tool_result, tool_name="lookup",
             span_id="bb", parent_span_id="aa", error="no entry for 'Munich'"),
        dict(agent="researcher", kind=StepKind.message, content="Facts: Rome 2761", span_id="aa"),
    ])
    assert cause_of(t, 0) == 1


def test_cause_of_a_step_span_whose_output_is_the_observation_is_the_model_call_inside_it():
    # smolagents: the plan, then a step span holding the model call that wrote code; the span's own output is the
    # code's execution logs. They are about that code, not about the plan beside the span.
    t = trace_of([
        dict(agent="CodeAgent", kind=StepKind.llm_call, content="1. Look the species up.", span_id="p1", parent_span_id="run"),
        dict(agent="CodeAgent", kind=StepKind.llm_call, content="Thought: I know it. print(331)", span_id="m1", parent_span_id="s1"),
        dict(agent="CodeAgent", kind=StepKind.tool_result, role=StepRole.tool_result,
             content="Execution logs:\n331", span_id="s1", parent_span_id="run"),
    ])
    assert cause_of(t, 2) == 1


@pytest.mark.parametrize("method", OFFLINE)
def test_no_offline_method_blames_a_tool_result_or_executor_output(method):
    for trace in (wrong_call_trace(), executor_trace()):
        result = attributors.get(method).attribute(trace)
        assert trace.steps[result.step].role == StepRole.decision, (method, trace.id, result.step)
        assert all(trace.steps[c.step].role == StepRole.decision for c in result.ranking)


def test_heuristic_blames_the_call_whose_result_failed():
    result = attributors.get("heuristic").attribute(wrong_call_trace())
    assert (result.step, result.agent, result.mode) == (1, "searcher", "A.2")


def test_heuristic_blames_the_code_the_executor_ran():
    result = attributors.get("heuristic").attribute(executor_trace())
    assert (result.step, result.agent) == (0, "assistant")
    assert "via step 1 (executor_output)" in result.reason


def test_a_tool_failing_on_a_correct_call_is_an_environment_fault():
    t = trace_of([
        dict(agent="searcher", kind=StepKind.tool_call, tool_name="lookup", tool_arguments={"city": "Lyon"}),
        dict(agent="searcher", kind=StepKind.tool_result, tool_name="lookup", error="503 Service Unavailable: upstream timeout"),
        dict(agent="answerer", kind=StepKind.final_answer, content="I could not find it."),
    ])
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.mode) == (1, "V.3")
    assert "environment fault" in result.reason
    learned = attributors.get("learned").attribute(t)
    assert learned.step in (0, 1, 2)  # the failed tool step is a candidate here, unlike a result of a bad call


def test_a_tool_span_that_is_the_only_record_of_its_call_answers_for_it():
    # GenAI execute_tool spans hold call and result in one; with no earlier step of the calling agent,
    # the span is the call, and a bad argument is blamed there (not on another agent's earlier step).
    t = trace_of([
        dict(agent="planner", kind=StepKind.llm_call, content="Use the converter tool on 3 km."),
        dict(agent="worker", kind=StepKind.tool_call, role=StepRole.tool_result, tool_name="converter",
             tool_arguments={"value": 3, "unit": "kg"}, error="ValueError: unknown unit 'kg' for a length"),
        dict(agent="worker", kind=StepKind.final_answer, content="3 km is 3 metres."),
    ])
    assert cause_of(t, 1) == 1 and 1 in [s.index for s in candidates(t)]
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.agent, result.mode) == (1, "worker", "A.2")


# The shipped `learned` model blames the final answer of this four-step trace (`kind.final_answer`), never the
# tool result (test above); holding it to the call would be a hand rule over the model, so the heuristic carries this.
@pytest.mark.parametrize("method", ["heuristic"])
def test_an_offline_method_blames_the_agent_step_whose_call_failed_not_the_result(method):
    # A two-agent run: the searcher's call misspells the city, its tool result fails, the answerer gives up.
    result = attributors.get(method).attribute(wrong_call_trace(trace_id=f"wrong-call-{method}"))
    assert result.step == 1 and result.agent == "searcher", (method, result.step, result.reason)
    assert wrong_call_trace().steps[result.step].kind == StepKind.tool_call


# Likewise `learned` blames the planner's final answer here, never the executor's output (test above).
@pytest.mark.parametrize("method", ["heuristic"])
def test_an_offline_method_blames_the_code_an_executor_ran_not_its_output(method):
    t = trace_of([
        dict(agent="planner", kind=StepKind.message, content="Sum the price column of the table, then report it."),
        dict(agent="coder", kind=StepKind.message, content="```python\nprint(sum(df['price'])\n```"),
        dict(agent="Computer_terminal", kind=StepKind.message, role=StepRole.executor_output,
             content="exitcode: 1 (execution failed)\nCode output: SyntaxError: unexpected EOF while parsing"),
        dict(agent="planner", kind=StepKind.final_answer, content="The total could not be computed."),
    ], query="What is the total price in the table?", trace_id=f"executor-{method}")
    result = attributors.get(method).attribute(t)
    assert (result.step, result.agent) == (1, "coder"), (method, result.step, result.reason)
