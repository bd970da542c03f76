"""`faultlens bench run` and `faultlens bench report` end to end, offline, through the root CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from faultlens.cli import cli

from .conftest import FIXTURES, CountingTestDouble

PNG = b"\x89PNG\r\n\x1a\n"


def invoke(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False, terminal_width=120)
    return result


@pytest.mark.slow
def test_bench_run_heuristic_and_majority_agent_then_report(synthetic_jsonl, tmp_path):
    spec = f"jsonl:{synthetic_jsonl}"
    for method, folder in (("heuristic", "h"), ("baseline:majority-agent", "m")):
        result = invoke("bench", "run", "--dataset", spec, "--method", method, "--out", str(tmp_path / folder), "--no-progress")
        assert result.exit_code == 0, result.output
        assert "24/24 trace(s) predicted" in result.output
        lines = (tmp_path / folder / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == 24 and all(json.loads(line)["method"] == method for line in lines)
    # every registered baseline ran beside the heuristic, on the same traces
    baselines = sorted(p.name for p in (tmp_path / "h" / "baselines").iterdir())
    assert {"first-step", "last-step", "majority-agent", "random-agent", "random-step"} <= set(baselines)

    result = invoke("bench", "report", str(tmp_path / "h"), str(tmp_path / "m"), "--out", str(tmp_path / "report"))
    assert result.exit_code == 0, result.output
    assert "heuristic" in result.output and "baseline:majority-agent" in result.output
    assert "step acc" in result.output and "step accuracy by environment" in result.output
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    labels = [r["label"] for r in report["runs"]]
    assert labels[0] == "heuristic" and labels.count("baseline:majority-agent") == 1  # shown once, not per folder
    heuristic = report["runs"][0]["metrics"]
    assert heuristic["overall"]["n"] == 24 and set(heuristic["by"]["benchmark"]) == {"qa-team", "csv-code"}
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| heuristic |" in md and "## Step accuracy by environment" in md and "## Step accuracy by modality" in md
    assert "## Per-mode precision / recall / F1" in md
    for name in ("step_accuracy_by_length.png", "mode_f1.png", "confusion_heuristic.png"):
        assert (tmp_path / "report" / name).read_bytes().startswith(PNG), name
    assert set(report["plots"]) >= {"step_accuracy_by_length.png", "mode_f1.png", "confusion_heuristic.png"}
    # How far to trust a verdict: the heuristic's verdicts by the confidence it gave them; baselines give none.
    by_confidence = heuristic["by"]["confidence"]
    assert sum(g["n"] for g in by_confidence.values()) == 24 and set(by_confidence) - {"none"}
    assert set(report["runs"][1]["metrics"]["by"]["confidence"]) == {"none"}
    assert "step accuracy by confidence" in result.output and "## Step accuracy by confidence" in md
    assert "step_accuracy_by_confidence.png" in report["plots"]


def test_bench_run_on_whowhenpro_scores_in_native_ids(tmp_path):
    out = tmp_path / "run"
    result = invoke("bench", "run", "--dataset", f"whowhenpro:{FIXTURES / 'whowhenpro'}", "--method", "baseline:first-step",
                    "--out", str(out), "--no-progress")
    assert result.exit_code == 0, result.output
    records = {json.loads(line)["trace_id"]: json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()}
    assert records["wwp-debate-1"]["gold"]["native_step"] == "1:1"
    assert records["wwp-debate-1"]["predicted"]["native_step"] == "0:0"
    assert records["wwp-smol-image-1"]["gold"] == {"agent": None, "step": 1, "native_step": "1.1", "mode": "A.2"}


def test_a_gold_span_id_is_scored_in_the_steps_namespace():
    # TRAIL's gold names a span id while its steps carry no native id: the right step must still count.
    from faultlens.benchmark.metrics import step_correct
    from faultlens.benchmark.runner import prediction_record
    from faultlens.middleware.model.trace import Attribution, GoldLabel, Step, Task, Trace

    steps = [Step(index=i, agent="a", content=f"step {i}", span_id=f"span{i}") for i in range(3)]
    trace = Trace(id="t", task=Task(query="q"), steps=steps, gold=GoldLabel(step=1, native_step="span1"))
    for predicted, right in ((1, True), (2, False)):
        record = prediction_record(trace, Attribution(trace_id="t", method="m", step=predicted), "d", "m", None, 0.0)
        assert step_correct(record["predicted"], record["gold"]) is right


def test_cli_resume_with_a_registered_test_double(synthetic_jsonl, tmp_path):
    from faultlens.attributors import register

    doubles = []

    def factory(**options):
        doubles.append(CountingTestDouble(interrupt_after=5 if not doubles else None))
        return doubles[-1]

    register("test-double:counting", factory)
    args = ["bench", "run", "--dataset", f"jsonl:{synthetic_jsonl}", "--method", "test-double:counting",
            "--out", str(tmp_path / "run"), "--no-progress", "--concurrency", "2"]
    result = invoke(*args)  # Ctrl-C after 5 calls: click reports "Aborted!"
    assert result.exit_code == 1 and "Aborted" in result.output
    # Answers that arrived are on file; a call still in flight at Ctrl-C has no answer to keep.
    on_file = {json.loads(line)["trace_id"] for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()}
    assert 3 <= len(on_file) <= 5 and on_file <= set(doubles[0].calls)
    result = invoke(*args)
    assert result.exit_code != 0 and "--resume" in result.output
    result = invoke(*args, "--resume")
    assert result.exit_code == 0, result.output
    assert len(doubles[-1].calls) == 24 - len(on_file) and not set(doubles[-1].calls) & on_file
    assert f"{24 - len(on_file)} now, {len(on_file)} already on file" in result.output


def test_bench_errors_are_one_clear_line(tmp_path, monkeypatch):
    from faultlens.benchmark import datasets

    monkeypatch.setattr(datasets, "DATA_DIR", tmp_path)
    result = CliRunner().invoke(cli, ["bench", "run", "--dataset", "bundled:test", "--method", "heuristic",
                                      "--out", str(tmp_path / "x"), "--no-progress"])
    assert result.exit_code != 0 and "faultlens bench build" in result.output and "Traceback" not in result.output
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(cli, ["bench", "report", str(tmp_path / "empty")])
    assert result.exit_code != 0 and "not a benchmark run folder" in result.output
    assert "run" in invoke("bench", "--help").output and "report" in invoke("bench", "--help").output
