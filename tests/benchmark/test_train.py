"""Training the `learned` model from a dataset spec: reproducible, never on a test trace, and the `faultlens train` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from faultlens.attributors.learned import LearnedAttributor, load
from faultlens.attributors.learned.model import SOURCE_BALANCE
from faultlens.benchmark import train as train_module
from faultlens.benchmark.train import (TestTraceError, assert_no_test_traces, leave_one_out, loeo_average, loeo_tables,
                             train_learned)
from faultlens.middleware.jsonl import write_jsonl
from tests.attributors.test_learned import ENVS, injected_traces, split_by_task


@pytest.fixture
def fake_bundle(tmp_path: Path) -> Path:
    """A bundled-data folder whose `test` split holds two of the injected traces."""
    data = tmp_path / "data"
    traces = list(injected_traces())
    write_jsonl(traces[:1], data / "dev.jsonl.gz")
    write_jsonl(traces[-2:], data / "test.jsonl.gz")
    return data


@pytest.fixture
def train_file(tmp_path: Path) -> Path:
    train, _ = split_by_task(injected_traces())
    path = tmp_path / "train.jsonl"
    write_jsonl(train, path)
    return path


def test_refuses_a_test_split_by_name():
    for spec in ("bundled:test", "bundled:test:table_qa"):
        with pytest.raises(TestTraceError, match="names a test split"):
            train_learned(spec, out="/nonexistent/never-written.joblib")
    assert not Path("/nonexistent/never-written.joblib").exists()


def test_refuses_traces_of_the_bundled_test_split(fake_bundle: Path, tmp_path: Path):
    traces = list(injected_traces())
    with pytest.raises(TestTraceError, match="in the bundled test split"):
        assert_no_test_traces("jsonl:whatever", traces, fake_bundle)
    # A trace of another task than the test ones passes.
    test_tasks = {t.task.id for t in traces[-2:]}
    clean = [t for t in traces if t.task.id not in test_tasks]
    assert_no_test_traces("jsonl:whatever", clean, fake_bundle)
    # Through train_learned: nothing is written.
    path = tmp_path / "all.jsonl"
    write_jsonl(traces, path)
    out = tmp_path / "m.joblib"
    with pytest.raises(TestTraceError):
        train_learned(f"jsonl:{path}", out=out, data_dir=fake_bundle)
    assert not out.exists()


def test_refuses_a_trace_marked_test():
    trace = injected_traces()[0].model_copy(deep=True)
    trace.source.subset = "test"
    with pytest.raises(TestTraceError, match="marked as a test trace"):
        assert_no_test_traces("jsonl:x", [trace], Path("/nonexistent"))


@pytest.mark.slow
def test_train_learned_is_reproducible(train_file: Path, tmp_path: Path):
    empty = tmp_path / "no-bundle"
    a = train_learned(f"jsonl:{train_file}", out=tmp_path / "a.joblib", seed=0, data_dir=empty)
    b = train_learned(f"jsonl:{train_file}", out=tmp_path / "b.joblib", seed=0, data_dir=empty)
    assert a.traces == b.traces > 20 and a.meta["trace_ids_sha256_16"] == b.meta["trace_ids_sha256_16"]
    _, held = split_by_task(injected_traces())
    pa = [LearnedAttributor(model=load(a.out)).attribute(t) for t in held]
    pb = [LearnedAttributor(model=load(b.out)).attribute(t) for t in held]
    assert [(x.step, x.mode, x.confidence) for x in pa] == [(x.step, x.mode, x.confidence) for x in pb]
    assert a.out.stat().st_size < 5_000_000
    # Same data and seed: the same file, byte for byte (no early-stopping split, no timestamps in the model).
    assert a.out.read_bytes() == b.out.read_bytes()


@pytest.mark.slow
def test_faultlens_train_command(train_file: Path, tmp_path: Path, monkeypatch):
    from faultlens.cli import cli

    # The test's traces are not in the repository's bundled test split (other task seeds); checked against an empty folder for speed.
    monkeypatch.setattr(train_module, "test_identities", lambda data_dir=None: (set(), set()))
    out = tmp_path / "cli.joblib"
    result = CliRunner().invoke(cli, ["train", "--dataset", f"jsonl:{train_file}", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "trained on" in result.output and out.exists()
    assert load(out).meta["dataset"] == f"jsonl:{train_file}"
    refused = CliRunner().invoke(cli, ["train", "--dataset", "bundled:test", "--out", str(tmp_path / "x.joblib")])
    assert refused.exit_code != 0 and not (tmp_path / "x.joblib").exists()


@pytest.mark.slow
def test_leave_one_out(tmp_path: Path):
    """Train on one half of the tasks' traces of the other environments, score the held-out environment's other half."""
    train, held = split_by_task(injected_traces())
    report = leave_one_out(train, held, seed=0, data_dir=tmp_path / "no-bundle", in_distribution=True)
    assert report.environments == sorted(ENVS)
    assert report.methods[:2] == ["learned", "heuristic"]
    assert {"baseline:first-step", "baseline:last-step", "baseline:majority-agent"} <= set(report.methods)
    for env in ENVS:
        n = sum(1 for t in held if t.source.benchmark == env)
        assert all(report.hits[env][m]["step"].size == n for m in report.methods)
        # first-step is right exactly on the held-out traces whose gold step is 0.
        gold0 = sum(1 for t in held if t.source.benchmark == env and t.gold.step == 0)
        assert report.accuracy(env, "baseline:first-step", "step") == pytest.approx(gold0 / n)
    # Agent accuracy only on multi-agent environments (math_react and table_qa have one agent).
    assert report.accuracy("math_react", "learned", "agent") is None
    assert report.accuracy("research_team", "learned", "agent") is not None
    average = report.average("learned", "step")
    assert average["ci"][0] <= average["value"] <= average["ci"][1] and average["environments"] == len(ENVS)
    assert loeo_average(report)["learned"]["step"] == pytest.approx(average["value"])
    # The paired difference is the difference of the averages; learned minus itself is exactly zero.
    other = report.strongest_other("step")
    assert other != "learned" and other in report.methods
    assert report.difference("learned", other, "step")["value"] == pytest.approx(
        average["value"] - report.average(other, "step")["value"])
    assert report.difference("learned", "learned", "step") == {"value": 0.0, "ci": [0.0, 0.0]}
    summary = json.loads(json.dumps(report.summary()))
    assert summary["in_distribution"]["learned"]["n"] == len(held)
    assert set(summary["environments"]) == set(ENVS)
    assert summary["learned_minus_strongest"]["step"]["other"] == other
    text = Console(width=200, record=True)
    for table in loeo_tables(report):
        text.print(table)
    printed = text.export_text()
    assert "research_team" in printed and "95% CI" in printed and "in-distribution" in printed and "paired 95% CI" in printed


@pytest.mark.slow
def test_leave_one_framework_out(tmp_path: Path):
    """Grouped by `source.framework`: each fold holds out every trace of one framework, whatever its environment."""
    from faultlens.middleware.errors import UnknownName

    def relabel(traces):
        # Two frameworks: the first environment's traces say "fw-a", the others "fw-b".
        return [t.model_copy(update={"source": t.source.model_copy(update={"framework": "fw-a" if t.source.benchmark == ENVS[0] else "fw-b"})})
                for t in traces]

    train, held = split_by_task(injected_traces())
    train, held = relabel(train), relabel(held)
    report = leave_one_out(train, held, seed=0, data_dir=tmp_path / "no-bundle", by="framework")
    assert report.environments == ["fw-a", "fw-b"] and report.by == "framework"
    assert report.hits["fw-a"]["learned"]["step"].size == sum(1 for t in held if t.source.benchmark == ENVS[0])
    assert report.hits["fw-b"]["learned"]["step"].size == sum(1 for t in held if t.source.benchmark != ENVS[0])
    assert report.summary()["held_out"] == "framework"
    text = Console(width=200, record=True)
    for table in loeo_tables(report):
        text.print(table)
    assert "leave-one-framework-out" in text.export_text()
    with pytest.raises(UnknownName, match="grouping"):
        leave_one_out(train, held, data_dir=tmp_path / "no-bundle", by="colour")


def test_loeo_refuses_test_traces_in_training(fake_bundle: Path):
    with pytest.raises(TestTraceError):
        leave_one_out(list(injected_traces()), data_dir=fake_bundle)


@pytest.mark.slow
def test_faultlens_train_loeo_command(tmp_path: Path, monkeypatch):
    from faultlens.cli import cli

    monkeypatch.setattr(train_module, "test_identities", lambda data_dir=None: (set(), set()))
    train, held = split_by_task(injected_traces())
    write_jsonl(train, tmp_path / "train.jsonl")
    write_jsonl(held, tmp_path / "held.jsonl")
    out = tmp_path / "loeo.json"
    result = CliRunner().invoke(cli, ["train", "--loeo", "--dataset", f"jsonl:{tmp_path / 'train.jsonl'}",
                                      "--test-dataset", f"jsonl:{tmp_path / 'held.jsonl'}", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "leave-one-environment-out" in result.output and "in-distribution" in result.output
    numbers = json.loads(out.read_text())
    assert set(numbers["environments"]) == set(ENVS) and "learned" in numbers["average"]
    # Without --loeo, --out is required.
    missing = CliRunner().invoke(cli, ["train", "--dataset", f"jsonl:{tmp_path / 'train.jsonl'}"])
    assert missing.exit_code != 0 and "--out" in missing.output


@pytest.mark.slow
def test_train_on_runs_labelled_in_a_store(train_file: Path, tmp_path: Path, monkeypatch):
    """A user's path: label stored runs (`faultlens traces label`), train on them beside another dataset."""
    from faultlens.middleware import open_store
    from faultlens.middleware.model.labels import label_for

    monkeypatch.setattr(train_module, "test_identities", lambda data_dir=None: (set(), set()))
    _, held = split_by_task(injected_traces())
    db = tmp_path / "mine.db"
    store = open_store(db)
    unlabelled = [t.model_copy(update={"gold": None}) for t in held]
    store.save_traces(unlabelled)
    store.save_trace(injected_traces()[0])  # a run in both datasets is trained on once
    for original in held[:6]:
        store.set_gold(original.id, label_for(original, original.gold.step, mode=original.gold.mode))
    store.close()

    result = train_learned([f"jsonl:{train_file}", f"store:{db}"], out=tmp_path / "m.joblib")
    train, _ = split_by_task(injected_traces())
    assert injected_traces()[0] in train
    assert result.traces == len(train) + 6  # the six labelled runs; the run in both datasets once
    assert result.meta["dataset"] == f"jsonl:{train_file} + store:{db}"
    assert result.repeated == 1
    assert result.sources == {f"jsonl:{train_file}": (len(train), 1.0), f"store:{db}": (6, pytest.approx((len(train) / 6) ** SOURCE_BALANCE))}
    with pytest.raises(Exception, match="no traces with a gold step"):
        train_learned([f"store:{tmp_path / 'empty.db'}"], out=tmp_path / "n.joblib")


@pytest.mark.slow
def test_cross_validate_scores_each_of_your_runs_once_by_a_model_that_never_saw_it(train_file: Path, tmp_path: Path, monkeypatch):
    from faultlens.benchmark.train import cross_validate, fold_of, scenario_key
    from faultlens.cli import cli

    monkeypatch.setattr(train_module, "test_identities", lambda data_dir=None: (set(), set()))
    _, held = split_by_task(injected_traces())
    mine = tmp_path / "mine.jsonl"
    write_jsonl(held, mine)
    seen: list[str] = []
    fitted: list[set[str]] = []
    real_fit = train_module.fit

    def spying_fit(traces, **kwargs):
        fitted.append({t.id for t in traces})
        return real_fit(traces, **kwargs)

    monkeypatch.setattr(train_module, "fit", spying_fit)
    report = cross_validate([f"jsonl:{train_file}", f"jsonl:{mine}"], folds=3, progress=seen.append)
    [row] = report.environments
    assert row == f"jsonl:{mine}, 3 folds" and len(seen) == len(fitted) == 3
    assert report.hits[row]["learned"]["step"].size == len(held)
    assert {"learned", "heuristic", "baseline:first-step"} <= set(report.methods)
    folds = {t.id: fold_of(scenario_key(t), 3) for t in held}
    for k, trained_on in enumerate(fitted):
        # Each model saw every training-set run and the other folds' runs, never its own fold.
        assert not {i for i, f in folds.items() if f == k} & trained_on
        assert {i for i, f in folds.items() if f != k} <= trained_on
    # Runs of one task share a fold.
    by_task: dict[str, set[int]] = {}
    for t in held:
        by_task.setdefault(t.task.id, set()).add(folds[t.id])
    assert all(len(f) == 1 for f in by_task.values())

    refused = CliRunner().invoke(cli, ["train", "--cross-validate", "3", "--dataset", f"jsonl:{mine}"])
    assert refused.exit_code != 0 and "takes the training datasets and, last, yours" in refused.output
