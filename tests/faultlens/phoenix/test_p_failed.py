"""`--failed-if 'p_failed>0.7'`: the failure detector's probability as a failure rule, written back on the root span."""

from __future__ import annotations

import pytest

from faultlens.attributors.detect import Detector
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.store import open_store
from faultlens.phoenix.annotations import P_FAILED, VERDICT, p_failed_annotation
from faultlens.phoenix.failed import Condition, FailureRule
from faultlens.phoenix.state import RunState, SyncState
from faultlens.phoenix.sync import PhoenixSync, SyncSummary

from .test_failed_and_annotations import FakePhoenix
from .test_sync import MemoryPhoenix, add_run


def test_p_failed_is_a_bound_on_a_probability_not_an_annotation():
    assert Condition.parse("p_failed>0.7").detector and not Condition.parse("correctness<0.5").detector
    for bad in ("p_failed=yes", "p_failed>1.5", "p_failed<-0.1", "p_failed>high"):
        with pytest.raises(ConfigError, match="--failed-if"):
            Condition.parse(bad)
    rule = FailureRule.parse(["p_failed>0.7", "correctness=incorrect"], status_error=False)
    assert rule.names == ["correctness"] and rule.uses_detector  # no annotation named p_failed is looked up


def test_a_run_whose_p_failed_passes_fails_and_says_so_and_one_without_is_left_to_the_other_conditions():
    runs = {r: RunState(phase="complete", traces=[f"t{r}"], roots={f"s{r}": "ok"}) for r in ("a", "b", "c")}
    phoenix = FakePhoenix(trace_annotations=[{"trace_id": "tc", "name": "correctness", "result": {"label": "incorrect"}}])
    rule = FailureRule.parse(["p_failed>0.7", "correctness=incorrect"])
    failed = rule.judge(phoenix, "agents", runs, {"a": 0.91, "b": 0.7})  # c: no p_failed (e.g. a run without steps)
    assert failed == {"a": "the detector's p_failed 0.91 meets p_failed>0.7 (--failed-if)",
                      "c": "trace tc is annotated correctness=incorrect (--failed-if)"}
    assert phoenix.calls[0] == ("traces", ["tb", "tc"], ["correctness"])  # the annotation look-up skips the run p_failed failed


def test_the_annotation_scores_p_failed_and_labels_it():
    a = p_failed_annotation("run-1", "root1", 0.8123, True, "p_failed>0.7")
    assert (a["span_id"], a["name"], a["annotator_kind"], a["identifier"]) == ("root1", P_FAILED, "CODE", "faultlens")
    assert a["result"]["score"] == pytest.approx(0.8123) and a["result"]["label"] == "failed" and "0.81" in a["result"]["explanation"]
    assert p_failed_annotation("run-1", "root1", 0.2, False, "p_failed>0.7")["result"]["label"] == "ok"


def _add_ok_run(phoenix: MemoryPhoenix, trace: str, n: int) -> None:
    add_run(phoenix, trace, f"chat-{n}", n)
    for span in phoenix.spans[-3:]:
        span["status_code"] = "OK"  # nothing but the detector can call it failed


@pytest.mark.parametrize("above", [True, False])
def test_sync_fails_the_runs_the_detector_suspects_and_writes_p_failed_back_on_each_root(tmp_path, above):
    phoenix = MemoryPhoenix()
    _add_ok_run(phoenix, "a" * 32, 1)
    store = open_store(str(tmp_path / "faultlens.db"))
    state = SyncState.load(tmp_path / "state.json", url=phoenix.url, project="agents")
    sync = PhoenixSync(phoenix, store, "agents", state=state, method="heuristic", rule=FailureRule())
    summary = SyncSummary()
    sync.pull(summary)
    (run_id,) = state.runs
    expected = Detector().score([store.get_trace(run_id)])[0].p_failed
    assert expected is not None
    bound = expected - 0.01 if above else min(1.0, expected + 0.01)
    sync.rule = FailureRule.parse([f"p_failed>{bound:.4f}"], status_error=False)

    sync.judge(summary)
    sync.attribute(summary)
    sync.write_back(summary)
    assert summary.detected == 1 and summary.failed == int(above)
    (written,) = [a for (name, _, _), a in phoenix.annotations.items() if name == P_FAILED]
    assert written["span_id"] == next(iter(state.runs[run_id].roots)) and written["metadata"]["faultlens_run"] == run_id
    assert written["result"]["score"] == pytest.approx(expected) and written["result"]["label"] == ("failed" if above else "ok")
    assert any(name == VERDICT for name, _, _ in phoenix.annotations) == above  # a suspected run is attributed as a failed one
    outcome = store.get_outcome(run_id)
    assert (outcome is not None and not outcome.success and "p_failed" in outcome.detail) if above else outcome is None


def test_a_recheck_scores_only_runs_not_scored_before(tmp_path):
    phoenix = MemoryPhoenix()
    _add_ok_run(phoenix, "b" * 32, 2)
    store = open_store(str(tmp_path / "faultlens.db"))
    state = SyncState.load(tmp_path / "state.json", url=phoenix.url, project="agents")
    sync = PhoenixSync(phoenix, store, "agents", state=state, method="heuristic", recheck=True,
                       rule=FailureRule.parse(["p_failed>1"], status_error=False))
    first = sync.run_once()
    assert first.detected == 1 and first.failed == 0 and list(state.runs.values())[0].phase == "ok"
    again = sync.run_once()  # (--watch's next pass: the ok run is judged again for late annotations, not rescored)
    assert again.detected == 0 and again.failed == 0
