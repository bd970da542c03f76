"""The frameworks added since the replay lab's eight (issue 47) run in it: a team's program in a separate process
through the live gateway, its answer judged, its failed run verified at its slip by re-running that program.

A `frameworks2` team (Semantic Kernel's here) runs with its virtualenv's interpreter, picked by `program_command` because its
framework is not importable in this one; the lab and these tests run in this one (so they are not marked
frameworks2), and skip that team when the virtualenv is absent.
"""

from __future__ import annotations

import sys

import pytest

from faultlens.injectors.envs import get as get_env
from faultlens.injectors.replay_lab import LAB_TENDENCIES, program_command
from faultlens.injectors.replay_lab.agents import team_python
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.replay.gateway_calls import call_steps
from faultlens.middleware.store.sqlite import open_store
from tests.scripts import load_script

# A main-virtualenv team (Haystack) and a frameworks2 one (Semantic Kernel), each with an agent slipping at every call,
# whose rule applies once in the run of task 0 of seed 3 (so the one slip decides it, and a re-run can confirm it).
SURE_SLIPS = {"docs_team": {"researcher": {"A.2": 1.0}}, "ledger_chat": {"reviewer": {"C.2": 1.0}}}


def runnable(team: str) -> None:
    """Skip unless some interpreter here can run `team`'s framework (this one, or its extra's virtualenv's)."""
    try:
        team_python(team)
    except ConfigError as exc:
        pytest.skip(str(exc))


def test_every_new_team_has_tendencies_of_its_own_agents():
    lab = load_script("replay_lab_eval")
    assert set(lab.NEW_TEAMS) <= set(LAB_TENDENCIES)
    for team in lab.NEW_TEAMS:
        tendencies = LAB_TENDENCIES[team]
        assert tendencies and set(tendencies) <= set(get_env(team).agent_names), team
        assert all(0 < rate <= 0.3 for modes in tendencies.values() for rate in modes.values()), team


def test_the_teams_option_keeps_the_eight_of_record_by_default_and_names_the_new_ones():
    lab = load_script("replay_lab_eval")
    assert lab.chosen_teams("record") == list(lab.RECORD_TEAMS) and len(lab.RECORD_TEAMS) == 8
    assert lab.chosen_teams("new") == list(lab.NEW_TEAMS)
    assert lab.chosen_teams("docs_team,new") == list(lab.NEW_TEAMS)  # each team once
    assert lab.chosen_teams("all") == list(lab.TEAMS) and "sql_desk" not in lab.TEAMS


def test_a_frameworks2_team_runs_with_its_virtualenvs_python(tmp_path, monkeypatch):
    if not get_env("search_crew").missing():
        pytest.skip("CrewAI is importable here: this interpreter runs it")
    monkeypatch.chdir(tmp_path)  # no .venv-frameworks2 here
    monkeypatch.delenv("FAULTLENS_FRAMEWORKS2_PYTHON", raising=False)
    with pytest.raises(ConfigError, match="search_crew needs crewai.*FAULTLENS_FRAMEWORKS2_PYTHON"):
        program_command("search_crew", "search_crew-0-0")
    python = tmp_path / "elsewhere" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setenv("FAULTLENS_FRAMEWORKS2_PYTHON", str(python))
    assert program_command("search_crew", "search_crew-0-0").split()[0] == str(python)
    assert program_command("docs_team", "docs_team-0-0").split()[0] == sys.executable  # its framework is here


@pytest.mark.parametrize("team", list(SURE_SLIPS))
def test_a_new_team_runs_through_the_gateway_and_its_slip_is_verified(team, tmp_path):
    runnable(team)
    lab = load_script("replay_lab_eval")
    store = open_store(tmp_path / "lab.db")
    clean = lab.record_team(team, 1, store, seed=3, tendencies={}, timeout=120)
    assert (clean.runs, clean.crashed, clean.failed) == (1, 0, 0)  # no slip: the judged answer is right
    stored = store.get_trace(clean.succeeded[0].id)
    assert stored.outcome.success and len(call_steps(stored)) >= 2  # every model call went through the gateway

    slipping = lab.record_team(team, 1, open_store(tmp_path / "slips.db"), seed=3, tendencies=SURE_SLIPS[team], timeout=120)
    assert (slipping.runs, slipping.crashed, slipping.failed, len(slipping.cases)) == (1, 0, 1, 1)
    case = slipping.cases[0]
    (agent, modes), = SURE_SLIPS[team].items()
    assert (case.gold.agent, case.gold.mode) == (agent, next(iter(modes)))
    slipping.agents.tendencies = {}  # the agents stop slipping: a re-run with the slip's call drawn anew succeeds
    rows = lab.verify_team(slipping, "blend", k=30, draws=1, controls=1, timeout=120, say=lambda _line: None)
    assert rows[0]["verified"] and rows[0]["step"] == case.gold.step and rows[0]["agent"] == agent


def test_the_patterns_measure_runs_a_frameworks2_team_in_its_own_process():
    runnable("ledger_chat")
    if not get_env("ledger_chat").missing():
        pytest.skip("Semantic Kernel is importable here: the team runs in process")
    patterns = load_script("patterns_eval")
    assert patterns.chosen_teams("record") == list(patterns.RECORD_TEAMS) and patterns.chosen_teams("new") == list(patterns.NEW_TEAMS)
    store = open_store(":memory:")
    runs = patterns.run_team("ledger_chat", 1, store, seed=3, tendencies=SURE_SLIPS["ledger_chat"], say=lambda _line: None)
    assert (runs.runs, runs.crashed, len(runs.failed)) == (1, 0, 1)
    (run_id,) = runs.failed
    assert runs.first_slip[run_id] == ("reviewer", "C.2")
    stored = store.get_trace(run_id)
    assert stored.outcome is not None and not stored.outcome.success and stored.gold is None
    assert {step.agent for step in stored.steps} >= {"analyst", "reviewer"}  # the team's calls, through the gateway
