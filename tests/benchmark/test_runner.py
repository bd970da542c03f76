"""The runner: prediction lines, kill-and-resume without repeated calls, the budget, errors."""

from __future__ import annotations

import json

import pytest

from faultlens.benchmark.report import make_report
from faultlens.benchmark.runner import read_predictions, run_benchmark
from faultlens.middleware.errors import FaultlensError

from .conftest import FIXTURES, CountingTestDouble, FirstStepTestDouble

N = 24  # traces in the synthetic dataset


def _run(spec, out, double, **kw):
    kw.setdefault("baselines", {"baseline:first-step-double": FirstStepTestDouble()})
    return run_benchmark(spec, "test-double:counting", out=out, attributor=double, progress=False, **kw)


def _without_seconds(value):
    # Wall-clock seconds are the one thing two runs cannot share.
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_without_seconds(v) for v in value]
    return value


def _metrics(folder):
    report = make_report([folder], plots=False, samples=200)
    return {r["label"]: _without_seconds(r["metrics"]) for r in report["runs"]}


def test_prediction_lines_have_the_issue_format(synthetic_jsonl, tmp_path):
    out = tmp_path / "run"
    summary = _run(f"jsonl:{synthetic_jsonl}", out, CountingTestDouble(), concurrency=3)
    assert summary.done == summary.new == N and summary.skipped == 0 and summary.stopped is None
    records = read_predictions(out / "predictions.jsonl")
    assert sorted(r["trace_id"] for r in records) == [f"syn-{i:03d}" for i in range(N)]
    first = json.loads((out / "predictions.jsonl").read_text().splitlines()[0])
    assert {"trace_id", "dataset", "method", "model", "predicted", "gold", "status", "cost"} <= set(first)
    assert {"agent", "step", "native_step", "mode", "reason"} <= set(first["predicted"])
    assert set(first["gold"]) == {"agent", "step", "native_step", "mode"}
    assert first["predicted"]["native_step"] == str(first["predicted"]["step"])
    assert first["dataset"] == f"jsonl:{synthetic_jsonl}" and first["method"] == "test-double:counting"
    assert first["cost"]["usd"] == 0.01 and first["cost"]["calls"] == 1
    # The baselines are scored on the same traces.
    baseline = read_predictions(out / "baselines" / "first-step-double" / "predictions.jsonl")
    assert sorted(r["trace_id"] for r in baseline) == sorted(r["trace_id"] for r in records)
    assert all(r["predicted"]["step"] == 0 for r in baseline)
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_kill_halfway_then_resume_gives_the_same_report_without_repeated_calls(synthetic_jsonl, tmp_path):
    spec = f"jsonl:{synthetic_jsonl}"
    whole = CountingTestDouble()
    _run(spec, tmp_path / "whole", whole, concurrency=3)
    assert len(whole.calls) == N

    killed = CountingTestDouble(interrupt_after=N // 2)
    with pytest.raises(KeyboardInterrupt):
        _run(spec, tmp_path / "resumed", killed, concurrency=3)
    on_file = {r["trace_id"] for r in read_predictions(tmp_path / "resumed" / "predictions.jsonl")}
    assert 0 < len(on_file) <= N // 2
    assert not (tmp_path / "resumed" / "baselines").exists()  # baselines come after the method
    assert json.loads((tmp_path / "resumed" / "run.json").read_text())["status"] == "interrupted"

    with pytest.raises(FaultlensError, match="--resume"):
        _run(spec, tmp_path / "resumed", CountingTestDouble())  # never overwrite a run silently

    rest = CountingTestDouble()
    summary = _run(spec, tmp_path / "resumed", rest, concurrency=3, resume=True)
    assert summary.skipped == len(on_file) and summary.new == N - len(on_file) and summary.done == N
    assert len(rest.calls) == N - len(on_file)
    assert not set(rest.calls) & on_file  # nothing answered before is asked again
    assert len(read_predictions(tmp_path / "resumed" / "predictions.jsonl")) == N
    assert _metrics(tmp_path / "resumed") == _metrics(tmp_path / "whole")

    again = CountingTestDouble()
    summary = _run(spec, tmp_path / "resumed", again, resume=True)
    assert again.calls == [] and summary.new == 0  # a finished run costs nothing to resume


def test_half_written_last_line_is_redone_on_resume(synthetic_jsonl, tmp_path):
    spec, out = f"jsonl:{synthetic_jsonl}", tmp_path / "run"
    _run(spec, out, CountingTestDouble(), limit=5)
    path = out / "predictions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:4]) + lines[4][:30])  # killed in the middle of writing line 5
    double = CountingTestDouble()
    _run(spec, out, double, limit=5, resume=True)
    assert len(double.calls) == 1
    assert len(read_predictions(path)) == 5


def test_budget_cap_stops_cleanly_and_resume_finishes(synthetic_jsonl, tmp_path):
    spec, out = f"jsonl:{synthetic_jsonl}", tmp_path / "run"
    capped = CountingTestDouble(usd=0.1)
    summary = _run(spec, out, capped, concurrency=1, budget_usd=0.35)
    assert summary.stopped == "budget" and summary.done == 4 and len(capped.calls) == 4
    assert summary.spent_usd == pytest.approx(0.4)
    assert summary.baselines == {"baseline:first-step-double": 4}  # the same traces as the method
    assert json.loads((out / "run.json").read_text())["status"] == "stopped: budget"
    rest = CountingTestDouble(usd=0.1)
    summary = _run(spec, out, rest, concurrency=2, resume=True)
    assert summary.done == N and len(rest.calls) == N - 4


def test_budget_exceeded_from_the_llm_client_stops_without_writing(synthetic_jsonl, tmp_path):
    from faultlens.attributors.llm import BudgetExceeded

    double = CountingTestDouble(raise_at_call=(3, BudgetExceeded("USD budget used up")))
    summary = _run(f"jsonl:{synthetic_jsonl}", tmp_path / "run", double, concurrency=1)
    assert summary.stopped == "budget" and summary.done == 2  # the refused trace is left for --resume


def test_failures_count_as_errors_and_reference_answer_only_when_asked(synthetic_jsonl, tmp_path):
    double = CountingTestDouble(fail_ids={"syn-001", "syn-002"}, expect_reference=True)
    _run(f"jsonl:{synthetic_jsonl}", tmp_path / "run", double, with_reference=True)
    records = {r["trace_id"]: r for r in read_predictions(tmp_path / "run" / "predictions.jsonl")}
    assert records["syn-001"]["status"] == "error" and "500" in records["syn-001"]["error"]
    m = _metrics(tmp_path / "run")["test-double:counting"]["overall"]
    assert m["status"]["error"] == 2 and m["n"] == N
    with pytest.raises(FaultlensError, match="with_reference"):
        _run(f"jsonl:{synthetic_jsonl}", tmp_path / "run", CountingTestDouble(), resume=True)


class BudgetedClientTestDouble(CountingTestDouble):
    """Test double shaped like the LLM methods: a `client` with a budget, and an
    error attribution (not an exception) when the client refuses a call."""

    def __init__(self, budget_usd: float):
        super().__init__(usd=0.1)
        from faultlens.middleware.model.trace import Cost

        self.client = type("ClientDouble", (), {"budget_usd": budget_usd, "max_calls": None, "cost": Cost()})()

    async def aattribute(self, trace):
        from faultlens.middleware.model.trace import Attribution, AttributionStatus, Cost

        if self.client.cost.usd >= self.client.budget_usd:
            return Attribution(trace_id=trace.id, method=self.name, status=AttributionStatus.error,
                               error="stopped: USD budget used up")
        attribution = await super().aattribute(trace)
        self.client.cost = self.client.cost + Cost(usd=0.1, calls=1)
        return attribution


def test_budget_refusal_reported_as_an_error_attribution_is_left_for_resume(synthetic_jsonl, tmp_path):
    double = BudgetedClientTestDouble(budget_usd=0.25)
    summary = _run(f"jsonl:{synthetic_jsonl}", tmp_path / "run", double, concurrency=1)
    assert summary.stopped == "budget" and summary.done == 3
    records = read_predictions(tmp_path / "run" / "predictions.jsonl")
    assert [r["status"] for r in records] == ["ok"] * 3  # the refused trace is not scored as wrong


def test_most_common_step_baseline_uses_the_scored_traces(synthetic_jsonl, tmp_path):
    from collections import Counter

    from faultlens.benchmark.datasets import load_dataset

    spec = f"jsonl:{synthetic_jsonl}"
    summary = _run(spec, tmp_path / "run", CountingTestDouble(), baselines=["baseline:most-common-step"], limit=10)
    assert summary.baselines == {"baseline:most-common-step": 10}
    traces = load_dataset(spec).traces(10)
    counts = Counter(t.gold.step for t in traces)
    top = min(s for s, c in counts.items() if c == max(counts.values()))
    predicted = {r["trace_id"]: r["predicted"]["step"] for r in
                 read_predictions(tmp_path / "run" / "baselines" / "most-common-step" / "predictions.jsonl")}
    assert predicted == {t.id: min(top, len(t.steps) - 1) for t in traces}


class SigintTestDouble(CountingTestDouble):
    """Test double that presses Ctrl-C (a real SIGINT to this process) on its (N+1)-th call."""

    def __init__(self, sigint_after: int):
        super().__init__()
        self.sigint_after = sigint_after

    async def aattribute(self, trace):
        import asyncio
        import os
        import signal

        if len(self.calls) == self.sigint_after:
            self.calls.append(trace.id)
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(5)  # cancelled by asyncio's SIGINT handler long before this ends
        return await super().aattribute(trace)


def test_real_sigint_then_resume(synthetic_jsonl, tmp_path):
    import signal

    # asyncio turns Ctrl-C into KeyboardInterrupt only when SIGINT has Python's default handler; an earlier test in
    # the same process may have left another one (seen once in a full-suite run), so this test starts from the default.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        spec, out = f"jsonl:{synthetic_jsonl}", tmp_path / "run"
        killed = SigintTestDouble(sigint_after=6)
        with pytest.raises(KeyboardInterrupt):
            _run(spec, out, killed, concurrency=2)
        on_file = {r["trace_id"] for r in read_predictions(out / "predictions.jsonl")}
        assert 0 < len(on_file) <= 6
        rest = CountingTestDouble()
        summary = _run(spec, out, rest, concurrency=2, resume=True)
        assert summary.done == N and not set(rest.calls) & on_file and len(rest.calls) == N - len(on_file)
    finally:
        signal.signal(signal.SIGINT, previous)


def _mocked_llm_method(**options):
    """The real all_at_once method and LLM client; litellm's mock_response stands in for the model."""
    from faultlens.attributors import get

    answer = {"agent": "Critic", "step": 3, "mode": "R.3", "reason": "17*24 is 408, not 418", "confidence": 0.8}
    return get("all_at_once", model="openai/gpt-4o-mini", api_key="test-key", cache=False,
               mock_response=json.dumps(answer), **options)


PRO_SPEC = f"whowhenpro:{FIXTURES / 'whowhenpro'}"


@pytest.mark.slow
def test_llm_method_through_litellm_mock_response(tmp_path):
    summary = run_benchmark(PRO_SPEC, "all_at_once", model="openai/gpt-4o-mini", attributor=_mocked_llm_method(),
                            out=tmp_path / "run", progress=False, baselines=[])
    records = {r["trace_id"]: r for r in read_predictions(tmp_path / "run" / "predictions.jsonl")}
    # The same answer fits one trace; for the others it names an agent or step they do not have.
    assert records["wwp-debate-1"]["status"] == "ok" and records["wwp-debate-1"]["predicted"]["native_step"] == "1:1"
    assert {r["status"] for k, r in records.items() if k != "wwp-debate-1"} == {"unparsed"}
    assert all(r["cost"]["calls"] == 1 and r["cost"]["usd"] > 0 for r in records.values())
    assert summary.spent_usd == pytest.approx(sum(r["cost"]["usd"] for r in records.values()))
    m = _metrics(tmp_path / "run")["all_at_once · openai/gpt-4o-mini"]["overall"]
    assert m["status"] == {"ok": 1, "unparsed": 7, "error": 0}  # 4 paper-shaped fixtures, 4 published-shaped
    assert m["step_accuracy"]["value"] == 0.125 and m["joint_accuracy"]["value"] == 0.125


@pytest.mark.slow
def test_llm_client_budget_stops_the_run_cleanly(tmp_path):
    one_call = run_benchmark(PRO_SPEC, "all_at_once", attributor=_mocked_llm_method(), out=tmp_path / "probe",
                             progress=False, baselines=[], limit=1).spent_usd
    # A budget for two calls: the third is refused by the client before it reaches litellm.
    attributor = _mocked_llm_method(budget_usd=1.5 * one_call)
    summary = run_benchmark(PRO_SPEC, "all_at_once", attributor=attributor, out=tmp_path / "run", progress=False,
                            baselines=[], concurrency=1)
    assert summary.stopped == "budget" and summary.done == 2
    assert attributor.client.cost.calls == 2


def test_one_report_compares_models_side_by_side(synthetic_jsonl, tmp_path):
    spec = f"jsonl:{synthetic_jsonl}"
    for model in ("small-model", "big-model"):
        _run(spec, tmp_path / model, CountingTestDouble(), model=model, limit=6)
    report = make_report([tmp_path / "small-model", tmp_path / "big-model"], out=tmp_path / "cmp", plots=False, samples=50)
    labels = [r["label"] for r in report["runs"]]
    assert labels == ["test-double:counting · small-model", "test-double:counting · big-model", "baseline:first-step-double"]
    assert all(r["metrics"]["overall"]["n"] == 6 for r in report["runs"])
    md = (tmp_path / "cmp" / "report.md").read_text()
    assert "| test-double:counting · small-model |" in md and "| test-double:counting · big-model |" in md


def test_method_options_are_passed_recorded_and_checked_on_resume(synthetic_jsonl, tmp_path):
    out = tmp_path / "cf"
    spec = f"jsonl:{synthetic_jsonl}"
    summary = run_benchmark(spec, "counterfactual", out=out, progress=False, limit=4, baselines=[],
                            method_options={"base": "baseline:last-step", "k": 2})
    assert summary.done == 4
    records = read_predictions(out / "predictions.jsonl")
    # synthetic traces cannot be re-run: the base's step, with the reason, in every prediction
    assert all("not verified (no rerunner" in r["predicted"]["reason"] for r in records)
    assert all(r["cost"]["reruns"] == 0 for r in records)
    assert json.loads((out / "run.json").read_text())["options"] == {"base": "baseline:last-step", "k": 2}
    with pytest.raises(FaultlensError, match="options"):
        run_benchmark(spec, "counterfactual", out=out, progress=False, resume=True, baselines=[],
                      method_options={"base": "baseline:last-step", "k": 3})


def test_most_common_step_runs_as_a_method(tmp_path):
    """The README's tables show `baseline:most-common-step`; `bench run --method` accepts it."""
    from click.testing import CliRunner

    from faultlens.benchmark.cli import bench

    out = tmp_path / "mcs"
    result = CliRunner().invoke(bench, ["run", "--dataset", f"whowhen:{FIXTURES / 'whowhen'}", "--method",
                                        "baseline:most-common-step", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    records = read_predictions(out / "predictions.jsonl")
    assert records and {r["method"] for r in records} == {"baseline:most-common-step"}
    assert not (out / "baselines" / "most-common-step").exists()  # not scored twice


def test_labelled_only_scores_the_labelled_traces_of_a_store(synthetic_jsonl, tmp_path):
    from faultlens.middleware import open_store
    from faultlens.middleware.jsonl import read_jsonl

    traces = list(read_jsonl(synthetic_jsonl))
    db = tmp_path / "mine.db"
    store = open_store(db)
    store.save_traces([t.model_copy(update={"gold": None}) if i % 3 else t for i, t in enumerate(traces)])
    store.close()
    with pytest.raises(FaultlensError, match="needs a gold label .--labelled-only"):
        _run(f"store:{db}", tmp_path / "all", CountingTestDouble())
    summary = _run(f"store:{db}", tmp_path / "labelled", CountingTestDouble(), labelled_only=True)
    labelled = {t.id for i, t in enumerate(traces) if i % 3 == 0}
    assert summary.total == summary.done == len(labelled) and summary.unlabelled == N - len(labelled)
    assert {r["trace_id"] for r in read_predictions(tmp_path / "labelled" / "predictions.jsonl")} == labelled
    assert _run(f"store:{db}", tmp_path / "two", CountingTestDouble(), labelled_only=True, limit=2).total == 2
    empty = tmp_path / "empty.db"
    open_store(empty).close()
    with pytest.raises(FaultlensError, match="no trace carries a gold label"):
        _run(f"store:{empty}", tmp_path / "none", CountingTestDouble(), labelled_only=True)
