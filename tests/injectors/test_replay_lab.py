"""The replay lab end to end: a framework team as a separate process through the live gateway, its failed runs verified.

Real parts throughout: the team's framework (LlamaIndex), its program in a subprocess talking HTTP to the
gateway, the store, `verify` re-running the program; the simulated agents are the gateway's upstream here.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from faultlens.attributors import build
from faultlens.injectors.envs import get as get_env
from faultlens.injectors.replay_lab import SimulatedAgents, program_command
from faultlens.injectors.replay_lab.program import find_task
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.store.sqlite import open_store
from tests.scripts import load_script

pytest.importorskip("llama_index.core")
TEAM = "workflow_team"
# The researcher calls a tool with wrong arguments (A.2) at about every other call.
TENDENCIES = {"researcher": {"A.2": 0.5}}


class Spy:
    """The base method, keeping every trace it was shown."""

    name = "blend"

    def __init__(self):
        self.inner = build("blend")
        self.seen = []

    def attribute(self, trace):
        self.seen.append(trace)
        return self.inner.attribute(trace)


def test_a_task_id_names_one_generated_task():
    env = get_env(TEAM)
    assert find_task(env, f"{TEAM}-7-2") == env.tasks(7, 3)[2]
    with pytest.raises(ConfigError, match="is not"):
        find_task(env, "chart_desk-7-2")


def test_the_program_needs_the_gateway():
    done = subprocess.run(program_command(TEAM, f"{TEAM}-0-0"), shell=True, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "FAULTLENS_GATEWAY"})
    assert done.returncode == 2 and "FAULTLENS_GATEWAY" in done.stderr and done.stdout == ""


def test_slips_are_a_function_of_task_agent_request_and_draw():
    env = get_env(TEAM)
    task = env.tasks(0, 1)[0]
    agents = SimulatedAgents(env, {"concierge": {"C.2": 0.5}})
    request = {"model": "m", "messages": [{"role": "system", "content": "You are the concierge."}, {"role": "user", "content": task.query}]}
    agents.rerun(task)
    first = [agents("concierge", request) for _ in range(8)]
    again = SimulatedAgents(env, {"concierge": {"C.2": 0.5}})
    again.rerun(task)
    assert [again("concierge", request) for _ in range(8)] == first  # draw n is the same draw in any process
    assert len({str(c) for c in first}) > 1  # and the draws differ from each other
    steady = SimulatedAgents(env, {"concierge": {"C.2": 1.0}})
    steady.rerun(task, slips=False)  # the lab's oracle: no agent slips
    plain = [steady("concierge", request) for _ in range(3)]
    assert plain[0] == plain[1] == plain[2] and plain[0] in first  # the answer of every draw that did not slip
    steady.rerun(task)
    assert steady("concierge", request) != plain[0]  # a sure slip again


def test_failed_runs_of_a_team_in_a_subprocess_are_verified_at_their_first_slip(tmp_path):
    lab = load_script("replay_lab_eval")
    store = open_store(tmp_path / "lab.db")
    recorded = lab.record_team(TEAM, 2, store, seed=5, tendencies=TENDENCIES, timeout=60)
    assert recorded.runs == 2 and recorded.crashed == 0
    assert recorded.cases, "no failed run with a slip: the test's tendencies no longer make one"
    for case in recorded.cases:
        if case.slips == 1:
            assert case.gold.step == case.first_step  # a run's only slip decides it
        stored = store.get_trace(case.run_id)
        assert stored.gold is None and stored.outcome is not None and not stored.outcome.success  # posted, unlabelled
    recorded.cases = recorded.cases[:1]  # one run verified keeps the test short
    spy = Spy()
    rows = lab.verify_team(recorded, spy, k=10, draws=2, timeout=60)
    assert spy.seen and all(trace.gold is None for trace in spy.seen)  # the method never sees the gold
    shown = {trace.id for trace in spy.seen}
    assert shown == {case.run_id for case in recorded.cases}
    verified = [row for row in rows if row["verified"]]
    assert any(row["step"] == row["gold_step"] and row["agent"] == row["gold_agent"] for row in verified)
    scores = lab.team_scores(rows)
    assert scores["n"] == len(rows) and scores["verified_step"] > 0 and scores["adapted_step"] is None
    assert "| workflow_team (LlamaIndex) |" in lab.markdown({TEAM: scores}, lab.mean_scores({TEAM: scores}))

