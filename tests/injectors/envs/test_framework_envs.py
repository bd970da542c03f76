"""What every tool-calling team on a real framework guarantees, checked on each of them.

The teams: `agents_desk` (OpenAI Agents SDK), `workflow_team` (LlamaIndex),
`chart_desk` (PydanticAI), `adk_team` (Google ADK), `supervisor_team`
(langgraph-supervisor), `docs_team` (Haystack), `airline_desk` (Agno), `schedule_desk` (DSPy) and `code_desk` (Strands Agents). Each is listed only with the frameworks, names the
extra when its framework is missing, runs its seed tasks to success and
replays them with zero drift, maps each step to its recorded call, treats a
changed request on replay as drift, makes a kept failure with an exact label
from each of its error rules, and injects byte-identically in one process and
in two workers. What is particular to one team is in its own test module.
Cases whose framework is not installed skip; `make test` installs them all.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import assert_inject_is_byte_identical, assert_rule_fails_the_task, seed_runs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.agents_desk.wire import text_of  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Drift, Session  # noqa: E402

SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}


@dataclass(frozen=True)
class Team:
    env: str
    framework: str  # the traces' `source.framework`
    tasks: int  # seed tasks run (task seed 0)
    rule_tries: int = 6  # applications of a rule before it must have made a kept failure
    max_steps: int | None = None  # an injected run ends in fewer steps than this

    def __str__(self) -> str:
        return self.env


TEAMS = [
    Team("agents_desk", "openai-agents", 12),
    Team("workflow_team", "llama-index", 12),
    Team("chart_desk", "pydantic-ai", 12, rule_tries=8),
    Team("adk_team", "google-adk", 9),
    Team("supervisor_team", "langgraph", 9, max_steps=40),
    Team("docs_team", "haystack", 9),
    Team("airline_desk", "agno", 9),
    Team("schedule_desk", "dspy", 9),
    Team("code_desk", "strands-agents", 9, rule_tries=10),
    Team("ledger_chat", "semantic-kernel", 9),
    Team("search_crew", "crewai", 8),
    Team("math_society", "camel", 9),
    Team("clip_desk", "agno", 10, rule_tries=8),
    Team("sql_desk", "haystack", 10),
]


def _installed(team: Team) -> list[pytest.MarkDecorator]:
    """Skip without the team's framework; a `frameworks2` team's cases also carry that mark (`make test` runs them in
    .venv-frameworks2, the virtualenv of that extra)."""
    env = envs.get(team.env)
    marks = [pytest.mark.skipif(bool(env.missing()), reason=f"needs the {env.extra} extra: pip install 'faultlens[{env.extra}]'")]
    return marks + [pytest.mark.frameworks2] if env.extra == "frameworks2" else marks


def teams(with_framework: bool = True) -> list:
    return [pytest.param(t, id=t.env, marks=_installed(t) if with_framework else _extra_mark(t)) for t in TEAMS]


def _extra_mark(team: Team) -> list[pytest.MarkDecorator]:
    return [pytest.mark.frameworks2] if envs.get(team.env).extra == "frameworks2" else []


def runs_of(team: Team) -> list:
    return seed_runs(team.env, SIM, 0, team.tasks)


@pytest.mark.parametrize("team", teams(with_framework=False))
def test_listed_only_with_frameworks_so_the_bundled_benchmark_is_unchanged(team):
    assert team.env not in envs.names()
    assert team.env in envs.names(include_frameworks=True)
    assert envs.get(team.env).framework == team.framework


@pytest.mark.parametrize("team", teams(with_framework=False))
def test_without_its_framework_a_run_names_the_extra(team, monkeypatch):
    env = envs.get(team.env)
    for package in env.requires:  # as if not installed: loaded modules forgotten, the package unimportable
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, package, None)
    task = env.tasks(0, 1)[0]  # tasks need no framework
    with pytest.raises(RuntimeError, match=rf"faultlens\[{env.extra}\]"):
        env.run(task, sim={"seed": 0, "noise": 0.0})


@pytest.mark.parametrize("team", teams())
def test_seed_runs_succeed_cover_every_family_and_replay_with_zero_drift(team):
    env = envs.get(team.env)
    runs = runs_of(team)
    families = {t.metadata["family"] for t in env.tasks(0, 100)}
    if len(runs) >= len(families):
        assert {t.metadata["family"] for t, _ in runs} == families
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.framework == team.framework and trace.source.benchmark == team.env
        session = Session(result.recording, replay_until=None)
        again = env.run(task, session=session, sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()
        assert session.live == 0 and session.replayed == len(result.recording.calls)


@pytest.mark.parametrize("team", teams())
def test_steps_map_to_their_calls_and_tool_results_have_none(team):
    for _, result in runs_of(team):
        steps, calls = result.trace.steps, result.recording.calls
        assert len(result.step_calls) == len(steps)
        assert sorted(c for c in result.step_calls if c is not None) == list(range(len(calls)))
        for step, call in zip(steps, result.step_calls):
            if call is None:
                assert step.kind == StepKind.tool_result and step.tool_result
            else:
                assert text_of(calls[call].response) == step.content
        assert steps[-1].kind == StepKind.final_answer
        assert all(s.tool_name is None for s in steps if s.metadata.get("handoff"))  # a handoff is a message, not a tool


@pytest.mark.parametrize("team", teams())
def test_a_changed_request_on_replay_is_drift_not_a_crash(team):
    env = envs.get(team.env)
    _, result = runs_of(team)[0]
    with pytest.raises(Drift):
        env.run(env.tasks(0, 2)[1], session=Session(result.recording, replay_until=None), sim=SIM)


def _rules() -> list:
    return [pytest.param(team, mode, rule, id=f"{team.env}-{mode}-{rule.__name__}", marks=_installed(team))
            for team in TEAMS for mode, rules in envs.get(team.env).mutators().items() for rule in rules]


@pytest.mark.parametrize("team,mode,rule", _rules())
def test_each_rule_of_a_team_fails_the_task_with_an_exact_label(team, mode, rule):
    assert_rule_fails_the_task(team.env, runs_of(team), mode, rule, SIM, tries=team.rule_tries, max_steps=team.max_steps)


@pytest.mark.parametrize("team", teams())
def test_inject_is_byte_identical_in_process_and_in_workers(team):
    assert_inject_is_byte_identical(team.env)
