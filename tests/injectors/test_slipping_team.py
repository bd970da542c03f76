"""Framework teams through the live gateway: one run with the right agents, slips with exact gold labels, lessons followed.

The runs need the `frameworks` extra (openai-agents, AG2); they skip without it.
"""

from __future__ import annotations

import importlib.util

import pytest

from faultlens.feedback.gateway_lessons import GatewayLessons
from faultlens.feedback.memory import LessonMemory
from faultlens.injectors import envs
from faultlens.injectors.slipping_team import GatewayTeam, follows_lesson, strip_lessons
from faultlens.middleware.capture.live_gateway import Gateway, LESSONS_BEGIN, inject_lessons
from faultlens.middleware.capture.upstream import CallableUpstream
from faultlens.middleware.model.trace import Lesson
from faultlens.middleware.store import open_store

needs = {name: pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"needs {module} (the frameworks extra)")
         for name, module in (("agents_desk", "agents"), ("ag2_experts", "autogen"))}


def through_gateway(env_name: str, tendencies=None, lessons=None):
    env = envs.get(env_name)
    store = open_store(":memory:")
    team = GatewayTeam(env, tendencies)
    team.gateway = Gateway(CallableUpstream(team.upstream), store, lessons(store) if lessons else None)
    return env, store, team


@pytest.mark.parametrize("env_name", [pytest.param("agents_desk", marks=needs["agents_desk"]),
                                      pytest.param("ag2_experts", marks=needs["ag2_experts"])])
def test_a_framework_teams_calls_become_one_run_with_its_agents(env_name):
    env, store, team = through_gateway(env_name, tendencies={})
    task = env.tasks(3, 1)[0]
    record = team.run(task, "run-1")
    assert team.gateway.flush(10)
    trace = store.get_trace("run-1")
    assert record.trace.outcome.success and not record.slips
    assert len(trace.steps) == record.calls == team.gateway.status()["calls"] > 0
    assert [s.id for s in store.list_traces(limit=None)] == ["run-1"]  # one run, no other
    # Every agent of the framework's own trace that made a model call is an agent of the gateway's run.
    called = {s.agent for s in trace.steps}
    assert called and all(s.kind.value == "llm_call" for s in trace.steps)
    expected = {"agents_desk": {"screen", "triage"}, "ag2_experts": {"planner", "coder", "chat_manager"}}[env_name]
    assert expected <= called
    assert trace.task.query == task.query


@needs["agents_desk"]
def test_a_slip_is_the_gold_label_of_the_failed_run_and_a_lesson_prevents_it():
    env, store, team = through_gateway("agents_desk", tendencies={"refunds": {"R.3": 1.0}})
    tasks = [t for t in env.tasks(7, 12) if "refund" in t.query.lower() or "damaged" in t.query.lower()]
    failed = None
    for task in tasks:
        record = team.run(task, f"r-{task.id}")
        if record.slips and not record.trace.outcome.success:
            failed = (task, record)
            break
    assert failed is not None, "no refund task failed with every refunds call slipping"
    task, record = failed
    assert team.gateway.flush(10)
    trace = store.get_trace(record.run_id)
    gold = record.gold
    assert gold is not None and gold.mode == "R.3" and trace.steps[gold.step].agent == "refunds"

    # The same task again, the refunds agent now shown an R.3 lesson whose situation shares a word with the task.
    def lessons(s):
        memory = LessonMemory(s)
        memory.add(Lesson(agent="refunds", mode="R.3", situation=f"refunds: tasks like {task.query!r}",
                          mistake="paid out a miscalculated amount", advice="recompute the amount from the order"))
        return GatewayLessons(memory, ["refunds"])

    env, store2, team2 = through_gateway("agents_desk", tendencies={"refunds": {"R.3": 1.0}}, lessons=lessons)
    again = team2.run(task, "again")
    assert again.followed >= 1 and not again.slips and again.trace.outcome.success
    assert team2.gateway.flush(10)
    assert any(s.lessons for s in store2.get_trace("again").steps if s.agent == "refunds")


def test_the_simulated_agent_reads_the_block_and_answers_without_it():
    request = {"messages": [{"role": "system", "content": "You are the coder."}, {"role": "user", "content": "Sum the primes below 50."}],
               "tools": [{"type": "function", "function": {"name": "run"}}]}
    block = ("Lessons from earlier runs (follow one when its situation matches yours):\n"
             "- [lesson abc | for coder | R.3 Numerical or calculation error] When: coder: tasks like \"Sum the primes below 40\". "
             "Mistake: off by one. Instead: check the bound.")
    shown = {**request, "messages": inject_lessons(request["messages"], block)}
    plain, text = strip_lessons(shown)
    assert plain == request and LESSONS_BEGIN in text
    assert follows_lesson(text, "R.3", "Sum the primes below 50.")
    assert not follows_lesson(text, "R.2", "Sum the primes below 50.")  # another mode: not followed
    assert not follows_lesson(text, "R.3", "Refund order A1234.")  # no word in common with the task
    added = {**request, "messages": inject_lessons(request["messages"][1:], block)}
    assert strip_lessons(added)[0]["messages"] == request["messages"][1:]  # a system message added for the block alone goes
