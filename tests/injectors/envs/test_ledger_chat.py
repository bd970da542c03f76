"""`ledger_chat`: real Semantic Kernel code (a `GroupChatOrchestration` of three `ChatCompletionAgent`s on the
`InProcessRuntime`, the analyst with a kernel plugin) on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks2` extra (semantic-kernel) is not installed; `make test` runs them in .venv-frameworks2.
"""

from __future__ import annotations

import os
import random
import socket

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, needs_framework,  # noqa: E402
                       seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.ledger_chat.policy import CALCULATE, QUERY, TeamPolicy, read_question  # noqa: E402
from faultlens.injectors.envs.ledger_chat.world import (ALL, FAMILIES, aggregate, answer_of, figure,  # noqa: E402
                                                        figures_of, make_task, query_text, rounded)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

pytestmark = pytest.mark.frameworks2
ENV = "ledger_chat"
SIM = FRAMEWORK_SIM
needs_sk = needs_framework("semantic_kernel", "frameworks2")
runs = seed_runs_fixture(ENV, 9)


def test_rounding_is_half_up_to_the_decimals_asked():
    assert [rounded("2.45", 1), rounded("2.35", 1), rounded("-2.5", 0), rounded("7", 2)] == ["2.5", "2.4", "-3", "7.00"]


def test_each_figure_changes_under_another_filter_so_a_wrong_query_changes_the_answer():
    for i in range(40):
        _, world = make_task(random.Random(i), FAMILIES[i % 4])
        q, ledger = world["question"], world["ledger"]
        for f in figures_of(q):
            assert aggregate(ledger, f) != aggregate(ledger, {**f, "department": ALL}) or f["department"] == ALL
        assert answer_of(world) == world_answer(world)  # the reference reads the figures as the tool states them


def world_answer(world: dict) -> str:
    from faultlens.injectors.envs.docs_team.calculator import calculate
    from faultlens.injectors.envs.ledger_chat.world import FORMULAS, evaluate_formula

    q = world["question"]
    values = {name: query_text(world["ledger"], f).rsplit(": ", 1)[1].split(" (")[0] for name, f in zip("AB", figures_of(q))}
    return rounded(calculate(evaluate_formula(FORMULAS[q["family"]], values)), q["decimals"])


def test_the_agents_read_the_question_as_the_world_wrote_it():
    env = envs.get(ENV)
    for task in env.tasks(0, 12):
        q = task.metadata["world"]["question"]
        assert read_question(task.query) == q, task.query
    assert query_text([], figure("count", "Sales")) == "count of amount, department Sales, quarter all, category all: 0 (0 rows)"


def test_the_reviewer_sends_back_an_unrounded_result_and_approves_a_rounded_one():
    question = envs.get(ENV).tasks(0, 1)[0].query  # asks for 1 decimal
    report = ("Report:\n- A = sum of amount, department Operations, quarter Q1, category all: 11320.18\n"
              "- B = sum of amount, department all, quarter Q1, category all: 43315.12\n"
              "- Computation: 11320.18 / 43315.12 * 100 = 26.13\nResult: {}")
    answer = lambda r: TeamPolicy.reviewer(question, [{"role": "user", "content": question},  # noqa: E731
                                                      {"role": "assistant", "content": report.format(r)}])
    assert answer("26.13") == "REVISE: round the result to 1 decimal place as the question asks."
    assert answer("26.1").startswith("APPROVED") and answer("26.1").endswith("reporter, please report the result: 26.1")
    other = report.replace("Operations", "Sales").format("26.1")
    assert TeamPolicy.reviewer(question, [{"role": "assistant", "content": other}]).startswith("REVISE: the question is about")


@needs_sk
def test_the_requests_are_semantic_kernels_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:2]] == ["analyst", "analyst"]
    first = calls[0].request
    # SK's agents stream (invoke_stream in the group chat's actors), asking for usage in the stream
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    # the analyst's kernel plugin, as SK names its functions for the model: <plugin>-<function>
    assert {t["function"]["name"] for t in first["tools"]} == {QUERY, CALCULATE}
    assert first["messages"][0] == {"role": "system", "name": "analyst", "content": first["messages"][0]["content"]}
    assert first["messages"][0]["content"].startswith("You are the analyst")
    reviewer = next(c for c in calls if c.agent == "reviewer").request
    assert "tools" not in reviewer
    # the group chat hands each agent the others' messages (not their tool calls) as named assistant messages
    handed = [m for m in reviewer["messages"] if m["role"] == "assistant"]
    assert {m["name"] for m in handed} == {"analyst"} and not any(m.get("tool_calls") for m in handed)
    assert handed[0]["content"].startswith("Plan:") and handed[-1]["content"].startswith("Report:")


@needs_sk
def test_the_manager_gives_the_analyst_two_turns_then_the_reviewer_then_the_reporter(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "analyst" and steps[0].kind == StepKind.plan
        speakers = [s.agent for s in steps if s.kind != StepKind.tool_result]
        assert speakers[-2:] == ["reviewer", "reporter"] and steps[-1].kind == StepKind.final_answer
        assert f"ANSWER: {task.reference_answer}" in steps[-1].content
        tools = [s.tool_name for s in steps if s.kind == StepKind.tool_call]
        assert tools.count(CALCULATE) == 1 and tools.count(QUERY) >= 2 and all(s.agent == "analyst" for s in steps if s.tool_name)


@needs_sk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    env = envs.get(ENV)
    more = [r for _, r in runs] + [env.run(t, sim=SIM) for t in env.tasks(0, 24)[9:]]
    results = [s.content for r in more for s in r.trace.steps if s.kind == StepKind.tool_result]
    assert any(c.startswith("error: unknown department") for c in results)
    assert any(s.content.startswith("REVISE: round") for r in more for s in r.trace.steps)
    assert all(r.trace.outcome.success for r in more)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        # plan; two queries and the calculation, each with its result; report; approval; answer
        assert clean.trace.outcome.success and len(clean.trace.steps) == 10


@needs_sk
def test_a_run_opens_no_socket(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    env = envs.get(ENV)
    task = env.tasks(3, 1)[0]
    assert env.run(task, sim=dict(SIM, noise=0.0)).trace.outcome.success


@needs_sk
def test_the_manager_routes_by_who_spoke_and_what_they_said():
    from semantic_kernel.contents import AuthorRole, ChatMessageContent

    from faultlens.injectors.envs.ledger_chat.team import next_speaker

    said = lambda name, text: ChatMessageContent(role=AuthorRole.ASSISTANT, name=name, content=text)  # noqa: E731
    assert next_speaker(None)[0] == "analyst"
    assert next_speaker(said("analyst", "Plan:\n1. ..."))[0] == "analyst"
    assert next_speaker(said("analyst", "Report:\n- A = ...\nResult: 4.2"))[0] == "reviewer"
    assert next_speaker(said("reviewer", "REVISE: round the result"))[0] == "analyst"
    assert next_speaker(said("reviewer", "APPROVED: fine"))[0] == "reporter"


@needs_sk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV, modes=8)


@needs_sk
def test_runs_are_captured_as_semantic_kernels_own_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.openai")
    assert imported.source.framework == "semantic-kernel"
    # Agents: SK's `invoke_agent <name>` spans (gen_ai.agent.name) under the run's root span; no adapter needed.
    assert [a.name for a in imported.agents] == ["analyst", "reviewer", "reporter"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: SK's `execute_tool <plugin>-<function>` spans carry the very text the analyst was given.
    tools = [s for s in imported.steps if s.kind == StepKind.tool_call]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    assert [(s.agent, s.tool_name, str(s.tool_result)) for s in tools] == [(s.agent, s.tool_name, s.content) for s in given]
    assert tools[0].tool_arguments["metric"] == "sum"
    assert imported.task.query == seed_run.trace.task.query
