"""The offline failure detector: features from the run's own evidence, a calibrated p_failed, never a traceback."""

from __future__ import annotations

import base64
import json

import pytest
from click.testing import CliRunner

from faultlens.attributors.detect import FEATURE_NAMES, Detector, detector_view, features, fit
from faultlens.attributors.detect.features import group_key, with_relative
from faultlens.middleware.model.trace import GoldLabel, Media, Outcome, Source, Step, StepKind, StepRole, Task, Trace

pytest.importorskip("sklearn")


def _run(i: int, failed: bool, n_extra: int = 0) -> Trace:
    """A small lookup run: a failed one loses its lookup, says 'unknown' and is short; a good one answers."""
    steps = [Step(index=0, agent="planner", kind=StepKind.plan, content="Plan: 1. searcher: find the price of item %d" % i),
             Step(index=1, agent="searcher", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": f"item {i}"}),
             Step(index=2, agent="searcher", kind=StepKind.tool_result, role=StepRole.tool_result, tool_name="search",
                  tool_result="No documents matched." if failed else f"item {i} costs {100 + i}")]
    for k in range(n_extra):
        steps.append(Step(index=len(steps), agent="searcher", kind=StepKind.message, content=f"checking source {k} for item {i}"))
    answer = "Answer: unknown" if failed else f"Answer: {100 + i}"
    steps.append(Step(index=len(steps), agent="answerer", kind=StepKind.final_answer, content=answer))
    return Trace(id=f"run-{i}-{failed}", task=Task(query=f"What is the price of item {i}?", reference_answer=str(100 + i)),
                 steps=steps, outcome=Outcome(success=not failed))


@pytest.fixture(scope="module")
def detector() -> Detector:
    runs = [_run(i, i % 2 == 0, n_extra=i % 3) for i in range(240)]
    rows = with_relative([features(t) for t in runs], [group_key(t) for t in runs])
    return Detector(payload=fit(rows, [t.failed for t in runs]))


def test_view_hides_gold_reference_outcome_source_and_answer_key():
    trace = _run(1, True).model_copy(update={"gold": GoldLabel(step=2, agent="searcher", mode="V.3"),
                                             "source": Source(framework="crewai", benchmark="secretbench"),
                                             "metadata": {"injection": {"injected_action": "x"}, "note": "y"}})
    trace.steps[1].metadata["answer_key"] = {"is_injected": True}
    view = detector_view(trace)
    dumped = view.model_dump_json()
    assert view.gold is None and view.outcome is None and view.task.reference_answer is None
    for secret in ("crewai", "secretbench", "injected_action", "is_injected", "V.3"):
        assert secret not in dumped
    assert trace.gold is not None and trace.outcome is not None  # the original is untouched


def test_features_do_not_depend_on_labels_or_source():
    plain = _run(3, True)
    labelled = plain.model_copy(update={"gold": GoldLabel(step=0, agent="planner", mode="R.4"), "outcome": Outcome(success=True),
                                        "source": Source(framework="langgraph", benchmark="x")})
    assert features(plain) == features(labelled)
    assert list(features(plain)) + [n for n in FEATURE_NAMES if n.startswith("rel_") or n == "group_log_size"] == FEATURE_NAMES


def test_evidence_features_see_the_failure():
    bad, good = features(_run(4, True)), features(_run(4, False))
    assert bad["give_up"] == 1.0 and good["give_up"] == 0.0
    assert bad["n_empty_results"] == 1.0 and good["n_empty_results"] == 0.0


def test_loop_and_unsupported_number():
    steps = [Step(index=k, agent="a", kind=StepKind.tool_call, tool_name="get", tool_arguments={"id": 1}) for k in range(4)]
    steps.append(Step(index=4, agent="a", kind=StepKind.final_answer, content="The total is 4242."))
    f = features(Trace(task=Task(query="What is the total?"), steps=steps))
    assert f["max_same_action"] == 4 and f["longest_streak"] == 4
    assert f["final_new_numbers"] == 1


def test_calibrated_p_failed_ranks_failed_runs_higher(detector):
    found = detector.score([_run(i, i % 2 == 0) for i in range(1000, 1010)])
    failed = [d.p_failed for d in found if d.trace_id.endswith("True")]
    good = [d.p_failed for d in found if d.trace_id.endswith("False")]
    assert all(0.0 <= p <= 1.0 for p in failed + good)
    assert min(failed) > max(good)


def test_odd_runs_get_p_failed_or_a_reason(detector):
    empty = Trace(id="empty", task=Task(query="q"), steps=[])
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"0" * 32).decode()
    image = _run(5, False)
    image.steps[0].media.append(Media(mime_type="image/png", data=png))
    video = _run(6, True)
    video.steps[0].media.append(Media(mime_type="video/mp4", uri="file:///tmp/clip.mp4"))
    long = Trace(id="long", task=Task(query="Count to 3000."),
                 steps=[Step(index=k, agent="a" if k % 2 else "b", content=f"{k}") for k in range(3000)])
    found = {d.trace_id: d for d in detector.score([empty, image, video, long])}
    assert found["empty"].p_failed is None and "no steps" in found["empty"].reason
    for tid in (image.id, video.id, "long"):
        assert found[tid].p_failed is not None and 0.0 <= found[tid].p_failed <= 1.0


def test_shipped_model_loads_and_scores():
    detection = Detector().score_one(_run(7, True))
    assert detection.p_failed is not None and 0.0 <= detection.p_failed <= 1.0


def test_cli_dataset_writes_predictions_and_db_prints_a_table(tmp_path):
    from faultlens.cli import cli
    from faultlens.middleware.store.sqlite import open_store

    path = tmp_path / "runs.jsonl"
    path.write_text("".join(_run(i, i % 2 == 0).model_dump_json() + "\n" for i in range(4)) +
                    Trace(id="no-steps", task=Task(query="q")).model_dump_json() + "\n")
    result = CliRunner().invoke(cli, ["detect", "--dataset", f"jsonl:{path}", "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert [r["trace_id"] for r in rows] == ["run-0-True", "run-1-False", "run-2-True", "run-3-False", "no-steps"]
    assert all(0 <= r["p_failed"] <= 1 for r in rows[:4]) and rows[4]["p_failed"] is None and rows[4]["reason"]

    db = str(tmp_path / "store.db")
    store = open_store(db)
    store.save_traces([_run(8, True).model_copy(update={"outcome": None}), _run(9, False)])
    store.close()
    result = CliRunner().invoke(cli, ["detect", "--db", db, "--quiet"])
    assert result.exit_code == 0, result.output
    assert "run-8-True" in result.output and "run-9-False" not in result.output  # only runs without an outcome


def test_cli_needs_a_source():
    from faultlens.cli import cli

    result = CliRunner().invoke(cli, ["detect"])
    assert result.exit_code != 0 and "--dataset" in result.output
