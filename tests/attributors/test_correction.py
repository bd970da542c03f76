"""`mode_of_correction`: the failure mode read from what a verified correction changed."""

from __future__ import annotations

import pytest

from faultlens.attributors.methods.correction import KEPT, mode_of_correction
from faultlens.middleware.model.trace import Step, StepKind, Task, Trace

QUESTION = "By how much did the revenue of Brival Corp change from 2018 to 2022?"


def desk(step: Step) -> Trace:
    before = [
        Step(index=0, agent="planner", kind=StepKind.plan, content="- lookup: Brival Corp | revenue | 2018\n- lookup: Brival Corp | revenue | 2022"),
        Step(index=1, agent="researcher", kind=StepKind.tool_result, content="Brival Corp, revenue, 2018: 792", tool_name="lookup"),
        Step(index=2, agent="researcher", kind=StepKind.tool_result, content="Brival Corp, revenue, 2022: 545", tool_name="lookup"),
        Step(index=3, agent="analyst", kind=StepKind.message, content="Calculation: 545 - 792 = -247"),
    ]
    return Trace(task=Task(query=QUESTION), steps=[*before[: step.index], step])


@pytest.mark.parametrize("step, corrected, mode", [
    (Step(index=0, agent="planner", kind=StepKind.plan, content="- lookup: Brival Corp | revenue | 2019"),
     "- lookup: Brival Corp | revenue | 2018", "R.4"),  # brings back the year the task states
    (Step(index=0, agent="planner", kind=StepKind.plan, content="- lookup: Brival Corp | revenue"),
     "- lookup: Brival Corp | revenue\n- compute: difference", "PL.1"),
    (Step(index=1, agent="researcher", kind=StepKind.tool_call, content="Action: lookup\nBrivel Corp | revenue | 2018"),
     "Action: lookup\nBrival Corp | revenue | 2018", "A.2"),
    (Step(index=1, agent="researcher", kind=StepKind.tool_call, content="Action: search\nBrival Corp"),
     "Action: lookup\nBrival Corp | revenue | 2018", "A.1"),
    (Step(index=3, agent="researcher", kind=StepKind.message, content="Findings: 2018: 297, 2022: 545"),
     "Findings: 2018: 792, 2022: 545", "C.2"),  # restores a value its inputs held
    (Step(index=3, agent="analyst", kind=StepKind.message, content="Calculation: 545 - 792 = -248"),
     "Calculation: 545 - 792 = -247", "R.3"),  # a number no input holds
    (Step(index=4, agent="reporter", kind=StepKind.final_answer, content="Answer: about -0.25 thousand"),
     "Answer: -247", "A.4"),  # the value was worked out already
    (Step(index=3, agent="analyst", kind=StepKind.message, content="The figures look odd."),
     "The figures look fine.", None),  # no number, no tool, no plan: the change says nothing
    (Step(index=3, agent="analyst", kind=StepKind.message, content="Calculation: 545 - 792 = -247"),
     "Calculation: 545 - 792 = -247", None),  # nothing changed
])
def test_the_mode_follows_from_the_change(step, corrected, mode):
    assert mode_of_correction(desk(step), step.index, corrected) == mode


def test_a_single_agent_that_loses_a_value_it_had_is_context_loss():
    steps = [Step(index=0, agent="solo", kind=StepKind.tool_result, content="population: 1512"),
             Step(index=1, agent="solo", kind=StepKind.message, content="The population is 1215.")]
    trace = Trace(task=Task(query="What is the population?"), steps=steps)
    assert mode_of_correction(trace, 1, "The population is 1512.") == "V.1"


def test_a_value_the_step_also_states_elsewhere_still_counts_where_the_correction_put_it():
    # "printed 14656 ... ANSWER: 1465": the right value is already in the step, so a set difference sees no value added
    step = Step(index=4, agent="planner", kind=StepKind.llm_call, content="The code printed 14656.\nANSWER: 1465")
    trace = desk(Step(index=3, agent="analyst", kind=StepKind.message, content="Code output: 14656"))
    trace = trace.model_copy(update={"steps": [*trace.steps, step]})
    assert mode_of_correction(trace, 4, "The code printed 14656.\nANSWER: 14656") == "C.2"


def test_the_messages_a_call_was_given_are_among_its_inputs():
    # a tool's output reaches the next model call as a message, not as a step of the run
    given = [{"role": "user", "parts": [{"type": "text", "content": "Observation: South: 29, 78, 64"}]}]
    step = Step(index=0, agent="data_agent", kind=StepKind.llm_call, content='final_answer("South: 29, 83, 64")',
                metadata={"input_messages": given})
    trace = Trace(task=Task(query="Sales of South?"), steps=[step, Step(index=1, agent="analyst", content="done")])
    assert mode_of_correction(trace, 0, 'final_answer("South: 29, 78, 64")') == "C.2"
    bare = trace.model_copy(update={"steps": [step.model_copy(update={"metadata": {}}), trace.steps[1]]})
    assert mode_of_correction(bare, 0, 'final_answer("South: 29, 78, 64")') == "R.3"


def test_a_name_its_inputs_held_is_a_restored_value_and_a_rewritten_computation_is_a_calculation_error():
    trace = desk(Step(index=3, agent="analyst", kind=StepKind.message, content="Looking up Brival Corp."))
    wrong = Step(index=3, agent="analyst", kind=StepKind.message, content="The revenue of Brivel Corp fell by 247.")
    trace = trace.model_copy(update={"steps": [*trace.steps[:3], wrong]})
    assert mode_of_correction(trace, 3, "The revenue of Brival Corp fell by 247.") == "C.2"
    # the correction also changes the operation: not a value carried over, a computation done again
    assert mode_of_correction(trace, 3, "The revenue of Brivel Corp fell by round(247 / 1, 1).") == "R.3"


def gateway_call(content: str, tool: str) -> Trace:
    """A run the gateway recorded: each model call a step whose text renders its tool calls as `[tool_call] name({...})`."""
    steps = [Step(index=0, agent="researcher", kind=StepKind.llm_call, content="Found: gasket 12.64, hinge 2.86"),
             Step(index=1, agent="supervisor", kind=StepKind.llm_call, content=content, tool_name=tool)]
    return Trace(task=Task(query="What do 6 gaskets and 2 hinges cost?"), steps=steps)


@pytest.mark.parametrize("content, corrected, mode", [
    # the same tool with other arguments: wrong parameters
    ('I evaluate it.\n[tool_call] calculate({"expression": "6 * 12.46"})',
     'I evaluate it.\n[tool_call] calculate({"expression": "6 * 12.64"})', "A.2"),
    # another tool: a wrong action
    ('[tool_call] lookup_price({"item": "gasket"})', '[tool_call] calculate({"expression": "6 * 12.64"})', "A.1"),
    # the tool call as it was, a value its inputs held put back in the text beside it: passed on wrongly
    ("calculator, compute: 5 * 12.64 + 2 * 2.86.\n[tool_call] transfer_to_calculator({})",
     "calculator, compute: 6 * 12.64 + 2 * 2.86.\n[tool_call] transfer_to_calculator({})", "C.2"),
    # a handoff's arguments are a message to the next agent: a value its inputs held, put back there, was passed on wrongly
    ('[tool_call] handoff({"reason": "Compute 5 * 12.64 + 2 * 2.86", "to_agent": "calculator"})',
     '[tool_call] handoff({"reason": "Compute 6 * 12.64 + 2 * 2.86", "to_agent": "calculator"})', "C.2"),
    ('[tool_call] transfer_to_calculator({"brief": "5 * 12.64"})', '[tool_call] transfer_to_calculator({"brief": "6 * 12.64"})', "C.2"),
    # an agent called as a tool answers back to its caller: its arguments are a tool call's
    ('[tool_call] ask_calculator({"question": "5 * 12.64"})', '[tool_call] ask_calculator({"question": "6 * 12.64"})', "A.2"),
    # a re-run's regenerated text is kept cut short: arguments cut short are not a correction of them
    ('Checking the price of 6 gaskets.\n[tool_call] lookup_price({"item": "gasket", "unit": "piece"})',
     'Checking the price of 2 gaskets.\n[tool_call] lookup_price({"item": "gasket", "un', "C.2"),
])
def test_a_gateway_recorded_call_is_read_by_its_tool_calls(content, corrected, mode):
    tool = content.split("[tool_call] ")[1].split("(")[0]
    assert mode_of_correction(gateway_call(content, tool), 1, corrected) == mode


def test_a_correction_cut_short_is_read_up_to_its_cut():
    # A trial keeps its regenerated text cut to KEPT characters, here mid-word and mid-number: the pieces are not new
    # tokens, and what the cut left out was not taken out.
    brief = "Trip: 3 travellers, Lisbon to Vienna, {n} nights. " + "Search the flights and choose one by the flight rule. " * 8
    content = f'[tool_call] handoff({{"reason": "{brief.format(n=2)}", "to_agent": "researcher"}})'
    corrected = f'[tool_call] handoff({{"reason": "{brief.format(n=4)}", "to_agent": "researcher"}})'[:KEPT - 3] + "200"
    trace = gateway_call(content, "handoff")
    trace = trace.model_copy(update={"task": Task(query="3 travellers, Lisbon to Vienna, 4 nights, at most 2000 EUR")})
    assert len(corrected) == KEPT and mode_of_correction(trace, 1, corrected) == "C.2"
    assert mode_of_correction(trace, 1, corrected[:-1]) == "R.3"  # not cut: 20 is a number no input holds
