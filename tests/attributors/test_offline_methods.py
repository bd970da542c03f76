"""The heuristic and the baselines on hand-made traces."""

from __future__ import annotations

import pytest

from faultlens import attributors
from faultlens.attributors.methods.heuristic import SIGNALS
from faultlens.middleware.model.trace import AttributionStatus, Outcome, Step, StepKind, Task, Trace

from .conftest import numbered_trace


def trace_of(steps, query="What is the population of Lyon?", reference=None, trace_id="h"):
    return Trace(id=trace_id, task=Task(query=query, reference_answer=reference),
                 steps=[Step(index=i, **s) for i, s in enumerate(steps)], outcome=Outcome(success=False))


def signals_of(result):
    return {(s["signal"], s["step"]) for s in result.details["signals"]}


def test_near_miss_name_in_tool_call(trace):
    result = attributors.get("heuristic").attribute(trace)
    assert result.status == AttributionStatus.ok
    assert (result.step, result.agent, result.mode) == (2, "searcher", "A.2")
    assert ("near_miss", 2) in signals_of(result)
    assert "Marla" in result.reason and result.backend == "heuristic"
    assert result.ranking[0].step == 2 and result.cost.calls == 0


def test_tool_error_blames_the_call_for_argument_errors():
    t = trace_of([
        dict(agent="a", kind=StepKind.plan, content="Look up the city."),
        dict(agent="a", kind=StepKind.tool_call, tool_name="lookup", tool_arguments={"city": "Lyonn"}),
        dict(agent="a", kind=StepKind.tool_result, tool_name="lookup", error="city not found: Lyonn"),
        dict(agent="a", kind=StepKind.final_answer, content="I could not find it."),
    ])
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.mode) == (1, "A.2")
    # The tool result is evidence about the call, not a candidate: its hit moved to step 1.
    assert signals_of(result) == {("tool_error", 1)}
    assert any("via step 2 (tool_result)" in s["note"] for s in result.details["signals"])
    assert all(c.step != 2 for c in result.ranking)


def test_environment_error_blames_the_failing_step():
    t = trace_of([
        dict(agent="a", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": "Lyon population"}),
        dict(agent="a", kind=StepKind.tool_result, tool_name="search", error="upstream timeout after 30s"),
        dict(agent="a", kind=StepKind.final_answer, content="About 500000."),
    ])
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.mode) == (1, "V.3")


def test_first_appearance_of_the_wrong_answer():
    t = trace_of([
        dict(agent="reader", kind=StepKind.tool_result, tool_name="read", tool_result="Lyon has 522,250 inhabitants."),
        dict(agent="reader", kind=StepKind.message, content="The document gives 552,250 inhabitants."),
        dict(agent="answerer", kind=StepKind.final_answer, content="552250"),
    ], reference="522250")
    result = attributors.get("heuristic", with_reference=True).attribute(t)
    assert result.step == 1 and result.agent == "reader" and result.mode == "R.1"
    assert ("answer_origin", 1) in signals_of(result)
    # With the reference, the step after the last correct sighting is flagged too.
    assert ("reference_lost", 1) in signals_of(result)


def test_arithmetic_origin_is_a_calculation_error():
    t = trace_of([
        dict(agent="a", kind=StepKind.tool_result, tool_name="read", tool_result="17 apples and 25 pears"),
        dict(agent="a", kind=StepKind.message, content="17 + 25 = 32 fruits in total"),
        dict(agent="a", kind=StepKind.final_answer, content="32"),
    ], query="How many fruits are there?")
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.mode) == (1, "R.3")


def test_correct_final_value_does_not_fire_answer_origin():
    t = trace_of([
        dict(agent="a", kind=StepKind.message, content="The answer is 42"),
        dict(agent="a", kind=StepKind.final_answer, content="42 units"),
    ], reference="42")
    result = attributors.get("heuristic", with_reference=True).attribute(t)
    assert not any(s["signal"] == "answer_origin" for s in result.details["signals"])


def test_repeated_action_is_looping():
    call = dict(agent="a", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": "lyon"})
    res = dict(agent="a", kind=StepKind.tool_result, tool_name="search", tool_result="Lyon is a city in France.")
    t = trace_of([call, res, call, res, call, res, dict(agent="a", kind=StepKind.final_answer, content="France")])
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.mode) == (2, "A.6")
    assert [s["step"] for s in result.details["signals"] if s["signal"] == "repeated_action"] == [2]


def test_excluded_item_used():
    t = trace_of([
        dict(agent="a", kind=StepKind.plan, content="Search hotels."),
        dict(agent="a", kind=StepKind.tool_call, tool_name="book", tool_arguments={"hotel": "Ritz", "with": "breakfast"}),
        dict(agent="a", kind=StepKind.final_answer, content="Booked."),
    ], query="Book a hotel in Paris without breakfast.")
    result = attributors.get("heuristic").attribute(t)
    assert (result.step, result.mode) == (1, "R.4")


def test_no_signal_uses_the_documented_prior():
    t = trace_of([
        dict(agent="a", kind=StepKind.message, content="Thinking."),
        dict(agent="b", kind=StepKind.final_answer, content="Done."),
    ])
    result = attributors.get("heuristic").attribute(t)
    assert result.details["signals"] == [] and result.details["prior"] is True
    assert (result.step, result.agent, result.confidence) == (1, "b", 0.0)
    assert "no signal fired" in result.reason


def test_every_signal_documented_and_selectable(trace):
    import faultlens.attributors.methods.heuristic as h

    for name in SIGNALS:
        assert name in h.__doc__
    only = attributors.get("heuristic", signals=["repeated_action"]).attribute(trace)
    assert all(s["signal"] == "repeated_action" for s in only.details["signals"])
    with pytest.raises(ValueError, match="unknown heuristic signal"):
        attributors.get("heuristic", signals=["crystal_ball"])


def test_llm_options_given_to_heuristic_are_listed_not_dropped(trace):
    result = attributors.get("heuristic", model="openai/gpt-4o", budget_usd=1.0).attribute(trace)
    assert result.details["ignored_options"] == ["budget_usd", "model"]


def test_heuristic_async_entry_point(trace):
    import asyncio

    result = asyncio.run(attributors.get("heuristic").aattribute(trace))
    assert result.step == 2


BASELINES = ["baseline:random-step", "baseline:random-agent", "baseline:majority-agent", "baseline:first-step", "baseline:last-step"]


def test_fixed_baselines(trace):
    first = attributors.get("baseline:first-step").attribute(trace)
    last = attributors.get("baseline:last-step").attribute(trace)
    majority = attributors.get("baseline:majority-agent").attribute(trace)
    assert (first.step, first.agent) == (0, "planner")
    assert (last.step, last.agent) == (5, "planner")
    assert (majority.agent, majority.step) == ("planner", 0)  # planner has 3 steps of 6
    for r in (first, last, majority):
        assert r.status == AttributionStatus.ok and r.mode is None and r.backend == "baseline"


def test_majority_agent_tie_goes_to_the_first_agent():
    t = numbered_trace(4, 0)  # agent0, agent1, agent0, agent1
    assert attributors.get("baseline:majority-agent").attribute(t).agent == "agent0"


def test_random_baselines_are_seeded_per_trace():
    traces = [numbered_trace(20, 0, trace_id=f"r{i}") for i in range(30)]
    for name in ("baseline:random-step", "baseline:random-agent"):
        a = [attributors.get(name, seed=1).attribute(t).step for t in traces]
        b = [attributors.get(name, seed=1).attribute(t).step for t in traces]
        c = [attributors.get(name, seed=2).attribute(t).step for t in traces]
        assert a == b and a != c
        assert len(set(a)) > 5  # spread over the trace, not a constant
    agents = {attributors.get("baseline:random-agent", seed=0).attribute(t).agent for t in traces}
    assert agents == {"agent0", "agent1"}
    for t in traces:
        r = attributors.get("baseline:random-agent").attribute(t)
        assert t.steps[r.step].agent == r.agent


def test_registry_lists_every_builtin():
    names = attributors.names()
    for n in ["all_at_once", "step_by_step", "binary_search", "hybrid", "heuristic", *BASELINES]:
        assert n in names
