"""`search_crew`: real CrewAI code (a hierarchical `Crew` whose manager delegates with CrewAI's own delegation tool to
two worker `Agent`s with tools) on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks2` extra (crewai) is not installed; `make test` runs them in .venv-frameworks2.
"""

from __future__ import annotations

import os
import random
import socket

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.search_crew.world import (FAMILIES, answer_of, formula, make_task, open_page,  # noqa: E402
                                                        parse_question, read_page, results, search, url_of)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

pytestmark = pytest.mark.frameworks2

ENV = "search_crew"
SIM = FRAMEWORK_SIM
needs_crewai = needs_framework("crewai", "frameworks2")
runs = seed_runs_fixture(ENV, 8)


def _world(i: int) -> tuple[str, dict]:
    return make_task(random.Random(i), FAMILIES[i % len(FAMILIES)])


def test_a_question_names_its_landmarks_and_every_wrong_page_changes_the_answer():
    for i in range(60):
        question, world = _world(i)
        family, facts, adults = parse_question(question)
        assert family == world["question"]["family"] and [list(f) for f in facts] == world["question"]["facts"]
        assert answer_of(world) > 0
        by_title = {p["title"]: p for p in world["pages"]}
        for name, figure in facts:
            namesakes = [t for t in by_title if t != name and t.endswith(" " + name)]
            assert len(namesakes) == 1  # a near-namesake with other figures is one search result away
            assert by_title[namesakes[0]]["figures"][figure] != by_title[name]["figures"][figure]
        assert formula(family, facts, adults).count(facts[0][0]) == 1


def test_search_ranks_by_title_words_and_a_page_opens_only_by_its_exact_url():
    question, world = _world(3)
    (name, figure), _ = parse_question(question)[1]
    found = results(search(world["pages"], name))
    assert name in [t for t, _ in found][:2] and all(u == url_of(t) for t, u in found)
    page = open_page(world["pages"], url_of(name))
    assert read_page(page)[figure] == next(p for p in world["pages"] if p["title"] == name)["figures"][figure]
    assert open_page(world["pages"], url_of(name).lower()).startswith("error: no page")
    assert search(world["pages"], "zeppelin").startswith("No results")


@needs_crewai
def test_the_requests_are_crewais_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:2]] == ["manager", "searcher"]
    # the hierarchical process gives the manager CrewAI's two delegation tools, and no other
    assert {t["function"]["name"] for t in calls[0].request["tools"]} == {"delegate_work_to_coworker", "ask_question_to_coworker"}
    system, user = (m["content"] for m in calls[0].request["messages"][:2])
    assert system.startswith("You are manager. You are the manager") and "Your personal goal is:" in system
    assert user.strip().startswith("Current Task: How many") and "expected criteria for your final answer" in user
    # a worker gets the task and context the manager wrote, in CrewAI's delegation prompt, and its own tools
    worker = calls[1].request["messages"][1]["content"]
    assert "Current Task: Find the '" in worker and "This is the context you're working with:\nPlan:" in worker
    assert {t["function"]["name"] for t in calls[1].request["tools"]} == {"web_search", "open_page"}
    analyst = next(c for c in calls if c.agent == "analyst")
    assert {t["function"]["name"] for t in analyst.request["tools"]} == {"calculate"}
    # the worker's last reply comes back to the manager as the delegation's tool result, as it is
    later = next(c for c in calls[2:] if c.agent == "manager").request["messages"]
    assert [m for m in later if m.get("role") == "tool"][0]["content"] == next(
        s.content for s in result.trace.steps if s.agent == "searcher" and s.kind == StepKind.message)


@needs_crewai
def test_the_manager_plans_delegates_each_figure_then_the_computation_and_answers(runs):
    for task, result in runs:
        steps = result.trace.steps
        delegated = [s.metadata["delegate"] for s in steps if s.metadata.get("delegate")]
        assert steps[0].kind == StepKind.plan and delegated[:2] == ["searcher", "searcher"] and delegated[-1] == "analyst"
        assert "3. analyst: " in steps[0].content  # the plan is the first delegation's context
        reports = [s for s in steps if s.agent in ("searcher", "analyst") and s.kind == StepKind.message]
        assert {s.agent for s in reports} == {"searcher", "analyst"} and all(s.tool_name is None for s in reports)
        assert steps[-1].agent == "manager" and steps[-1].kind == StepKind.final_answer
        assert f"ANSWER: {task.reference_answer}" in steps[-1].content


@needs_crewai
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    errors = [s.content for _, r in runs for s in r.trace.steps if s.kind == StepKind.tool_result and s.content.startswith("error")]
    assert any("no page" in e for e in errors) and any("cannot evaluate" in e for e in errors)
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        # plan; search, its result, open, its result, report (twice); delegation, calculation, its result, report; answer
        assert len(clean.trace.steps) == 17


@needs_crewai
def test_the_manager_follows_its_plan_so_a_plan_with_the_other_operator_fails_the_task(runs):
    from faultlens.injectors.generators import Generated

    task, seed = next((t, r) for t, r in runs if t.metadata["family"] == "total_capacity")
    plan = seed.trace.steps[0].content
    changed = plan.replace("capacity + ", "capacity - ", 1)
    assert changed != plan
    attempt = inject_at(ENV, seed, 0, "R.4", Generated(changed, "the other operator"))
    assert attempt.status == "kept" and attempt.trace.gold.agent == "manager"
    calc = [s for s in attempt.trace.steps if s.kind == StepKind.tool_call and s.tool_name == "calculate"][-1]
    assert " - " in calc.tool_arguments["expression"]


@needs_crewai
def test_the_manager_follows_its_plans_figures_so_a_plan_counting_on_an_unpublished_one_fails(runs):
    from faultlens.injectors.envs.search_crew.mistakes import UNPUBLISHED, _pl2
    from faultlens.injectors.generators import gen_input

    _, seed = runs[0]
    made = _pl2(gen_input(seed.trace, 0, "PL.2", random.Random(0), envs.get(ENV)))
    assert made is not None
    attempt = inject_at(ENV, seed, 0, "PL.2", made)
    assert attempt.status == "kept" and attempt.trace.gold.agent == "manager"
    asked = [s.content for s in attempt.trace.steps if s.agent == "manager" and s.metadata.get("delegate") == "searcher"]
    # it asked the searcher for the figure its plan named, which the searcher cannot find
    assert any(f"'{figure}' figure" in text for text in asked[1:] for figure in UNPUBLISHED.values())
    assert "ANSWER:" not in (attempt.trace.steps[-1].content or "")


@needs_crewai
def test_a_run_opens_no_socket_and_sends_nothing_home(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network call: {args[1:]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    env = envs.get(ENV)
    task = env.tasks(4, 1)[0]
    assert env.run(task, sim=dict(SIM, noise=0.0)).trace.outcome.success
    assert os.environ["CREWAI_DISABLE_TELEMETRY"] == "true" and os.environ["CREWAI_TRACING_ENABLED"] == "false"
    assert "OTEL_SDK_DISABLED" not in os.environ  # our own tracer stays on


@needs_crewai
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV)


@needs_crewai
def test_runs_are_captured_as_crewais_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.crewai")
    assert imported.source.framework == "crewai"
    # Agents: in its event-listener mode the instrumentation makes an AGENT span per agent execution, the delegated
    # workers' included (`searcher.<task>.execute`, graph.node.id = the role), so no adapter is needed.
    assert [a.name for a in imported.agents] == ["manager", "searcher", "analyst"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: each search, page and calculation is a TOOL span under its worker whose output is the very text
    # the worker was given; each delegation is a TOOL span of the manager's whose output is the worker's report.
    tools = [s for s in imported.steps if s.kind == StepKind.tool_call and s.tool_name != "delegate_work_to_coworker"]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    assert [(s.agent, s.tool_name, str(s.tool_result)) for s in tools] == [(s.agent, s.tool_name, s.content) for s in given]
    delegations = [s for s in imported.steps if s.tool_name == "delegate_work_to_coworker"]
    reports = [s.content for s in seed_run.trace.steps if s.agent in ("searcher", "analyst") and s.kind == StepKind.message]
    assert [s.tool_result for s in delegations] == reports and all(s.agent == "manager" for s in delegations)
    # Task: the root (the crew's kickoff) states none, so it is the first model call's user message: CrewAI's prompt
    # around the question
    assert seed_run.trace.task.query in imported.task.query
