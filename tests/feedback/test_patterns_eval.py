"""scripts/patterns_eval.py: its scoring of patterns against first slips, and its core end to end on one team with few tasks."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from faultlens.feedback.patterns import Pattern
from tests.scripts import load_script



@pytest.fixture(scope="module")
def patterns_eval() -> ModuleType:
    return load_script("patterns_eval")


def pattern(agent: str, mode: str, runs: list[str]) -> Pattern:
    return Pattern(f"{agent}|{mode}|s", agent, mode, "s", runs=runs)


def test_a_tendency_is_recovered_only_by_a_top_pattern_naming_its_agent_and_mode(patterns_eval):
    # Tendencies: coder C.2 (6 first slips), planner C.2 (5); writer R.3 has 2 first slips, too few to count.
    first = {**{f"c{i}": ("coder", "C.2") for i in range(6)}, **{f"p{i}": ("planner", "C.2") for i in range(5)},
             "w0": ("writer", "R.3"), "w1": ("writer", "R.3"), "x": None}
    found = [pattern("coder", "C.2", ["c0", "c1", "c2", "c3", "p0", "x"]),  # 4 of 6 runs its own slip
             pattern("planner", "R.1", ["p1", "p2", "p3", "p4"]),  # the right agent, the wrong mode: recovers nothing
             pattern("coder", "C.2", ["c4", "c5"])]
    scored = patterns_eval.score(found, first)
    assert (scored["tendencies_recovered"], scored["tendencies"]) == (1, 2)
    assert scored["missed"] == ["planner C.2 (5 first slips)"]
    assert scored["purity_top5"] == pytest.approx((4 / 6 + 0 + 1) / 3, abs=1e-4)
    # Beyond the top 5 a pattern recovers nothing.
    assert patterns_eval.score(found, first, top=1)["tendencies_recovered"] == 1
    assert patterns_eval.score([pattern("w", "A.1", ["w0"])] * 5 + found, first)["tendencies_recovered"] == 0


def test_the_script_runs_one_team_through_the_gateway_and_writes_its_scores(patterns_eval, tmp_path):
    out = tmp_path / "patterns_eval.json"
    assert patterns_eval.main(["--teams", "agents_desk", "--tasks", "12", "--workers", "1", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    row = written["teams"]["agents_desk"]
    assert row["runs"] == 12 and 0 < row["failed"] <= 12 and row["attributed"] == row["failed"]
    assert set(written["mean"]) >= {"tendencies_recovered", "tendencies", "purity_top5"}
    assert 0 <= row["tendencies_recovered"] <= row["tendencies"]
    # Patterns of the gold verdicts are pure by construction: each run's first slip is its pattern's agent and mode.
    assert row["oracle_purity_top5"] == 1.0 and row["oracle_tendencies_recovered"] == row["tendencies"]
    assert written["settings"]["mode"] == "in-process gateway" and written["settings"]["method"] == "blend"


def test_the_first_slip_of_each_failed_run_is_kept_beside_the_store_never_in_it(patterns_eval):
    from faultlens.middleware.store import open_store

    store = open_store(":memory:")
    runs = patterns_eval.run_team("agents_desk", 8, store, say=lambda line: None)
    assert runs.runs == 8 and set(runs.first_slip) == set(runs.failed)
    slipped = [r for r in runs.failed if runs.first_slip[r] is not None]
    assert slipped, "agents_desk's tendencies make some of 8 runs fail with a slip"
    for run_id in slipped:
        agent, mode = runs.first_slip[run_id]
        assert agent in {"triage", "refunds", "orders"} and mode == "A.2"
        assert store.get_trace(run_id).gold is None and store.get_outcome(run_id).success is False
    store.close()


def test_method_verify_stores_each_failed_runs_verified_verdict_where_the_patterns_read_it(patterns_eval):
    from faultlens.feedback.patterns import find_patterns, latest_verdict
    from faultlens.middleware.replay.gateway_calls import call_steps
    from faultlens.middleware.store import open_store

    store = open_store(":memory:")
    runs = patterns_eval.run_team("agents_desk", 12, store, say=lambda line: None)
    usable, verified = patterns_eval.verify_runs(runs, mode_from="correction", say=lambda line: None)
    assert usable == len(runs.failed) and 0 < verified <= usable
    verdicts = {run_id: latest_verdict(store, run_id) for run_id in runs.failed}
    assert all(v is not None and v.method == "verify" for v in verdicts.values())
    # A verified verdict of a run whose first slip is a tool call's wrong arguments names that call and reads A.2 from the correction.
    on_slip = [run_id for run_id, v in verdicts.items() if v.details.get("verified") and runs.first_slip[run_id] is not None
               and v.step == call_steps(store.get_trace(run_id))[runs.first_call[run_id]]]
    assert on_slip, "the re-runs confirm the first slip's own call in some failed run"
    assert all((verdicts[r].agent, verdicts[r].mode) == runs.first_slip[r] and verdicts[r].details["mode_from"] == "correction"
               for r in on_slip)
    assert sum(p.count for p in find_patterns(store)) == len(runs.failed)
    store.close()


def test_method_verify_reads_a_miscalculated_number_as_r3_in_a_tool_call_and_in_a_result_passed_on(patterns_eval):
    # supervisor_team's calculator slips R.3: a price copied into its `calculate` expression with two digits swapped, or
    # the result of its own calculation written wrong beside the handoff back. Read from the correction, both are R.3
    # (not A.2 for the tool call's arguments, nor C.2 for the value its inputs held).
    from faultlens.feedback.patterns import latest_verdict
    from faultlens.middleware.replay.gateway_calls import call_steps
    from faultlens.middleware.store import open_store

    store = open_store(":memory:")
    runs = patterns_eval.run_team("supervisor_team", 20, store, say=lambda line: None)
    patterns_eval.verify_runs(runs, mode_from="correction", say=lambda line: None)
    read = {}
    for run_id, slip in runs.first_slip.items():
        verdict = latest_verdict(store, run_id)
        calls = call_steps(store.get_trace(run_id))
        if slip == ("calculator", "R.3") and verdict.details.get("verified") and verdict.step == calls[runs.first_call[run_id]]:
            read[run_id] = (verdict.mode, "[tool_call] calculate(" in store.get_trace(run_id).steps[verdict.step].content)
    assert {in_call for _, in_call in read.values()} == {True, False}, "slips both in the expression and in the result"
    assert all(mode == "R.3" for mode, _ in read.values()), read
    store.close()


def test_method_verify_prints_the_verified_table_with_the_verified_runs_and_the_slips_call(patterns_eval):
    row = {"runs": 10, "failed": 4, "verified": 3, "tendencies_recovered": 1, "tendencies": 2, "purity_top5": 0.5,
           "agent_accuracy": 0.75, "mode_accuracy": 0.5, "step_accuracy": 0.25}
    other = {**row, "verified": None, "tendencies_recovered": 2, "step_accuracy": None}
    teams = {"a_team": row, "b_team": other}
    table = patterns_eval.verify_markdown(teams, patterns_eval.mean_row(teams)).splitlines()
    assert table[0].split(" | ")[3:4] == ["verified"] and table[0].endswith("| verdict at the slip's call |")
    assert table[2] == "| a_team | 10 | 4 | 3 | 1/2 | 0.50 | 0.75 | 0.50 | 0.25 |"
    assert table[3] == "| b_team | 10 | 4 | – | 2/2 | 0.50 | 0.75 | 0.50 | – |"  # a team without a verify run says so
    assert table[-1] == "| **mean** (tendencies: sum) | 10 | 4 | 3 | **3/4** | 0.50 | 0.75 | 0.50 | 0.25 |"


def test_teams_whose_program_runs_in_another_interpreter_are_started_first_in_their_order(patterns_eval, monkeypatch):
    import faultlens.injectors.envs as envs

    class Env:
        def __init__(self, name: str) -> None:
            self.name = name

        def missing(self) -> list[str]:
            return ["crewai"] if name_elsewhere(self.name) else []

    def name_elsewhere(name: str) -> bool:
        return name in {"search_crew", "math_society"}

    monkeypatch.setattr(envs, "get", Env)
    teams = ["docs_team", "search_crew", "airline_desk", "math_society"]
    assert patterns_eval.slowest_first(teams) == ["search_crew", "math_society", "docs_team", "airline_desk"]
