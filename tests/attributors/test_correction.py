"""`mode_of_correction`: the failure mode read from what a verified correction changed."""

from __future__ import annotations

import pytest

from faultlens.attributors.methods.correction import _numerical_slip, mode_of_correction
from faultlens.middleware.replay.rerunners import REGENERATED_KEPT as KEPT
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
    # the same tool with other arguments (another value its inputs held): wrong parameters
    ('I evaluate it.\n[tool_call] calculate({"expression": "6 * 2.86"})',
     'I evaluate it.\n[tool_call] calculate({"expression": "6 * 12.64"})', "A.2"),
    # the same tool, a price copied with two digits swapped: a miscalculated number, not a wrong argument
    ('I evaluate it.\n[tool_call] calculate({"expression": "6 * 12.46"})',
     'I evaluate it.\n[tool_call] calculate({"expression": "6 * 12.64"})', "R.3"),
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
    sentence = "Search the flights and choose one by the flight rule. "
    # Leading spaces (no tokens) put the cut at the same place in a sentence, mid-word, whatever KEPT is.
    brief = " " * ((KEPT - 300) % len(sentence)) + "Trip: 3 travellers, Lisbon to Vienna, {n} nights. " + sentence * (KEPT // 50 + 1)
    content = f'[tool_call] handoff({{"reason": "{brief.format(n=2)}", "to_agent": "researcher"}})'
    corrected = f'[tool_call] handoff({{"reason": "{brief.format(n=4)}", "to_agent": "researcher"}})'[:KEPT - 3] + "200"
    trace = gateway_call(content, "handoff")
    trace = trace.model_copy(update={"task": Task(query="3 travellers, Lisbon to Vienna, 4 nights, at most 2000 EUR")})
    assert len(corrected) == KEPT and mode_of_correction(trace, 1, corrected) == "C.2"
    assert mode_of_correction(trace, 1, corrected[:-1]) == "R.3"  # not cut: 20 is a number no input holds


def test_numerical_slips_of_a_value_the_inputs_held_are_calculation_errors():
    trace = gateway_call('[tool_call] calculate({"expression": "3 * 98.96 * 1.1"})', "calculate")
    trace.steps[0].content = "Rates: USD 1.0807 EUR per unit; gasket 12.64"
    # a rate rounded to one decimal in a calculation's expression: precision lost, not another input used
    assert mode_of_correction(trace, 1, '[tool_call] calculate({"expression": "3 * 98.96 * 1.0807"})') == "R.3"
    # a digit changed (neither rounded nor swapped) is a value the inputs held, put back: a wrong argument, as before
    trace.steps[1].content = '[tool_call] calculate({"expression": "3 * 98.96 * 1.0817"})'
    assert mode_of_correction(trace, 1, '[tool_call] calculate({"expression": "3 * 98.96 * 1.0807"})') == "A.2"
    # a message, rounded: the answer rounded to a whole number where the team worked out 12.64
    answer = Step(index=1, agent="supervisor", kind=StepKind.llm_call, content="The total is 13.\nANSWER: 13")
    trace = trace.model_copy(update={"steps": [trace.steps[0], answer]})
    assert mode_of_correction(trace, 1, "The total is 12.64.\nANSWER: 12.64") == "R.3"
    assert mode_of_correction(trace, 1, "The total is 1.0807.\nANSWER: 1.0807") == "C.2"  # 13 is no rounding of it


def test_a_swapped_input_value_stays_a_value_passed_on_wrongly_even_when_it_looks_like_a_digit_slip():
    # 12.46 is itself a price the inputs held: the brief took another item's price, it did not miswrite this one
    trace = gateway_call("calculator, compute: 6 * 12.46.\n[tool_call] transfer_to_calculator({})", "transfer_to_calculator")
    trace.steps[0].content = "Found: gasket 12.64, washer 12.46"
    assert mode_of_correction(trace, 1, "calculator, compute: 6 * 12.64.\n[tool_call] transfer_to_calculator({})") == "C.2"


def test_a_year_or_a_date_one_off_in_a_tool_call_is_a_wrong_argument():
    # an integer one off is no rounding and no digit swap (a neighbouring year, another day)
    trace = gateway_call('[tool_call] open_page({"url": "https://reports.example/acme/2020"})', "open_page")
    trace = trace.model_copy(update={"task": Task(query="Revenue of Acme in 2019?")})
    assert mode_of_correction(trace, 1, '[tool_call] open_page({"url": "https://reports.example/acme/2019"})') == "A.2"
    trace.steps[1].content = '[tool_call] search_flights({"date": "2026-05-13"})'
    trace = trace.model_copy(update={"task": Task(query="Fly on 2026-05-14")})
    assert mode_of_correction(trace, 1, '[tool_call] search_flights({"date": "2026-05-14"})') == "A.2"


def calculated(agent: str, answered_by: str, arguments: dict) -> Trace:
    """A run whose last call (by `agent`) states a result, given a `calculate` call made by `answered_by` and its answer."""
    given = [{"role": "assistant", **({"name": answered_by} if answered_by else {}),
              "parts": [{"type": "tool_call", "id": "c1", "name": "calculate", "arguments": arguments}]},
             {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"result": 711.68, **arguments}}]}]
    steps = [Step(index=0, agent="coordinator", kind=StepKind.llm_call, content="Budget brief: 1900 EUR"),
             Step(index=1, agent=agent, kind=StepKind.llm_call, content="Result: 761.18 EUR\n[tool_call] transfer_to_agent({})",
                  metadata={"input_messages": given})]
    return Trace(task=Task(query="What is left of 1900 EUR?"), steps=steps)


@pytest.mark.parametrize("agent, answered_by, arguments, mode", [
    # the agent's own calculation said 711.68 (its model's call, unnamed): it stated its own result wrongly
    ("budget_agent", "", {"expression": "1900.0 - 2 * 594.16"}, "R.3"),
    ("budget_agent", "budget_agent", {"expression": "1900.0 - 2 * 594.16"}, "R.3"),
    # another agent's calculation: the value was passed on wrongly
    ("supervisor", "calculator", {"expression": "1900.0 - 2 * 594.16"}, "C.2"),
    # a look-up of its own, not arithmetic (a date is no subtraction): a value it reported wrongly
    ("budget_agent", "", {"date": "2026-05-14"}, "C.2"),
])
def test_a_result_of_the_agents_own_calculation_stated_wrongly_is_a_calculation_error(agent, answered_by, arguments, mode):
    # 761.18 is no rounding and no digit swap of 711.68: only whose calculation it was tells the modes apart
    trace = calculated(agent, answered_by, arguments)
    assert mode_of_correction(trace, 1, "Result: 711.68 EUR\n[tool_call] transfer_to_agent({})") == mode


@pytest.mark.parametrize("text, wrong, right, slipped", [
    ("Result: 716.18 EUR", "716.18", "711.68", False),   # two digits swapped in a figure stated: passed on wrongly
    ("3 * 716.18 + 1", "716.18", "711.68", True),         # the same, an operand of a calculation: a calculation error
    ("(12.46 - 1)", "12.46", "12.64", True),
    ("x = 12.46", "12.46", "12.64", False),
    ("range(34, 643 + 1)", "34", "43", False),            # a call's argument, not an operand
    ("2900 - 12.46", "12.46", "12.64", True),
    ("2026-12-46", "-46", "-64", False),                  # a date is no subtraction
    ("rate 1.1", "1.1", "1.0807", True),                  # rounded, wherever it stands
    ("ANSWER: 12", "12", "12.3", True),
    ("rate 1.0", "1.0", "1.0807", False),                 # cut, not rounded
    ("rate 1.2", "1.2", "1.0807", False),                 # fewer decimals, but not a rounding of it
    ("6 * 12.60", "12.60", "12.62", False),               # a digit changed
    ("2020 * 1", "2020", "2019", False),                  # one off
    ("3 * -41", "-41", "-14", True),
    ("3 * 41", "41", "-14", False),
])
def test_what_counts_as_a_slip_of_a_number(text, wrong, right, slipped):
    assert _numerical_slip([([wrong], [right])], text, inputs=set(), computed=set()) == slipped
