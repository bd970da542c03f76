"""`docs_team`: real Haystack code (an `Agent` calling a researcher `Agent` as a `ComponentTool`, its BM25 retriever)
on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks` extra (haystack-ai) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.docs_team.calculator import calculate  # noqa: E402
from faultlens.injectors.envs.docs_team.world import FAMILIES, answer_of, items_of, make_task  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "docs_team"
SIM = FRAMEWORK_SIM
needs_sdk = needs_framework("haystack")
runs = seed_runs_fixture(ENV, 9)


def test_the_other_years_report_is_always_in_the_corpus_and_differs():
    for i in range(60):
        _, world = make_task(random.Random(i), FAMILIES[i % 3])
        ids = {d["id"] for d in world["docs"]}
        assert len(ids) == 10
        for item in items_of(world):
            other = f"{item.company[:3].upper()}-{2024 if item.year == 2025 else 2025}"
            assert other in ids
        assert answer_of(world) > 0


def test_the_calculator_takes_plain_arithmetic_only():
    assert calculate("412 - 300") == "112" and calculate("7 / 2") == "3.5"
    assert calculate("412 \u2212 300").startswith("error") and calculate("__import__('os')").startswith("error")


@needs_sdk
def test_the_requests_are_haystacks_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:2]] == ["lead", "researcher"]
    lead_tools = {t["function"]["name"] for t in calls[0].request["tools"]}
    assert lead_tools == {"researcher", "calculate"}
    # Haystack's agent-as-tool: the researcher tool takes a list of chat messages, as Haystack's ChatMessage schema
    researcher_tool = next(t for t in calls[0].request["tools"] if t["function"]["name"] == "researcher")
    assert "messages" in researcher_tool["function"]["parameters"]["properties"]
    first = calls[1].request["messages"]
    assert first[0]["role"] == "system" and first[1]["content"].startswith("Find these figures")
    later = [c for c in calls if c.agent == "lead"][1].request["messages"]
    report = [m for m in later if m.get("role") == "tool"][0]["content"]
    assert report.splitlines()[0].endswith(")") and "ChatMessage" not in report  # the researcher's last message only


@needs_sdk
def test_the_lead_plans_the_researcher_reports_and_the_lead_answers(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "lead" and steps[0].kind == StepKind.plan and steps[0].metadata["delegate"] == "researcher"
        reports = [s for s in steps if s.agent == "researcher" and s.kind == StepKind.message]
        assert reports and all(s.tool_name is None for s in reports)
        assert steps[-1].agent == "lead" and steps[-1].kind == StepKind.final_answer
        assert f"ANSWER: {task.reference_answer}" in steps[-1].content


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    errors = sum(any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in r.trace.steps) for _, r in runs)
    vague = sum(any('annual report"' in s.content for s in r.trace.steps if s.kind == StepKind.tool_call) for _, r in runs)
    assert errors >= 1 and vague >= 1
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert len(clean.trace.steps) == 9  # plan, two searches and their results, report, calculation and result, answer


@needs_sdk
def test_the_lead_follows_its_plan_so_a_plan_with_the_other_operation_fails_the_task(runs):
    from faultlens.injectors.generators import Generated

    task, seed = runs[0]
    plan = seed.trace.steps[0].content
    changed = plan.replace(" minus ", " plus ", 1) if " minus " in plan else plan.replace(" plus ", " minus ", 1)
    attempt = inject_at(ENV, seed, 0, "R.4", Generated(changed, "the other operation"))
    assert attempt.status == "kept" and attempt.trace.gold.agent == "lead"
    calc = next(s for s in attempt.trace.steps if s.kind == StepKind.tool_call and s.tool_name == "calculate")
    assert calc.tool_arguments["expression"] != next(s for s in seed.trace.steps if s.tool_name == "calculate").tool_arguments["expression"]


@needs_sdk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV)


@needs_sdk
def test_runs_are_captured_as_haystacks_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.haystack")
    assert imported.source.framework == "haystack"
    # Agents: the `Agent.run` spans named by their system prompts (the haystack span adapter); each model call is
    # the agent's whose run it is in, in the order of the recorded calls.
    assert [a.name for a in imported.agents] == ["lead", "researcher"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: each search is the BM25 retriever's span (a tool step), its documents read back as the very text
    # the researcher was given; the calls themselves are in the model-call steps.
    searches = [s for s in imported.steps if s.kind == StepKind.tool_call]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result and s.agent == "researcher"]
    assert [s.tool_result for s in searches] == [s.content for s in given] and len(given) >= 2
    assert [s.tool_arguments for s in searches] == [s.tool_arguments for s in seed_run.trace.steps
                                                    if s.kind == StepKind.tool_call and s.tool_name == "search_reports"]
    assert all(s.agent == "researcher" for s in searches)
    called = [c for c in seed_run.recording.calls if c.response["choices"][0]["message"].get("tool_calls")]
    assert len([s for s in llm if "[tool_call]" in s.content]) == len(called)
    assert imported.task.query == seed_run.trace.task.query  # the question, not the pipeline's input sockets
