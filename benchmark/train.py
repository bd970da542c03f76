"""Train the `learned` attributor on a dataset, and evaluate it leave-one-environment-out.

`train_learned("bundled:dev", out=PATH, seed=0)` reads the dataset, refuses
any trace of the bundled `test` split (by spec, and by trace and task id
against `benchmark/data/test.jsonl.gz` when it exists), fits the model and
writes it. The same dataset and seed give the same model and the same
predictions.

`leave_one_environment_out(traces)` trains on every environment but one and
tests on the held-out one, for each environment in turn, next to
`baseline:first-step` on the same traces.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attributors.learned import LearnedAttributor, fit, save, trace_features
from attributors.learned.model import DEFAULT_MODEL_PATH, LearnedModel, labelled
from attributors.registry import get
from middleware.errors import FaultlensError
from middleware.jsonl import read_jsonl
from middleware.model import Trace

from .datasets import bundled_path, load_dataset


class TestTraceError(FaultlensError):
    """A `test` trace reached training; the learned model must never see one."""

    __test__ = False  # not a pytest test class, despite the name


def test_identities(data_dir: Path | None = None) -> tuple[set[str], set[str]]:
    """Trace ids and task ids of the bundled `test` split (empty sets if it is not built)."""
    path = bundled_path("test", data_dir)
    if not path.exists():
        return set(), set()
    ids, tasks = set(), set()
    for trace in read_jsonl(path):
        ids.add(trace.id)
        if trace.task.id:
            tasks.add(trace.task.id)
    return ids, tasks


test_identities.__test__ = False  # type: ignore[attr-defined]


def assert_no_test_traces(dataset_spec: str, traces: Iterable[Trace], data_dir: Path | None = None) -> None:
    """Raise `TestTraceError` if the spec names a test split or any trace (or its task) is in bundled `test`."""
    parts = dataset_spec.split(":")
    if "test" in parts[:2] and parts[0] in {"bundled", "whowhen", "whowhenpro"} or dataset_spec.rstrip("/").endswith("test.jsonl.gz"):
        raise TestTraceError(f"refusing to train on {dataset_spec!r}: it names a test split")
    ids, tasks = test_identities(data_dir)
    for trace in traces:
        if trace.source.subset == "test" or trace.metadata.get("split") == "test":
            raise TestTraceError(f"refusing to train: trace {trace.id} is marked as a test trace")
        if trace.id in ids or (trace.task.id and trace.task.id in tasks):
            raise TestTraceError(f"refusing to train: trace {trace.id} (task {trace.task.id}) is in the bundled test split")


@dataclass
class TrainResult:
    out: Path
    traces: int
    steps: int
    environments: list[str]
    train_step_accuracy: float
    meta: dict[str, Any] = field(default_factory=dict)


def fit_checked(dataset_spec: str, traces: list[Trace], seed: int = 0, data_dir: Path | None = None) -> LearnedModel:
    """`fit` after `assert_no_test_traces`: the only way this module trains."""
    assert_no_test_traces(dataset_spec, traces, data_dir)
    return fit(traces, seed=seed)


def train_learned(dataset_spec: str = "bundled:dev", out: Path | str = DEFAULT_MODEL_PATH, seed: int = 0,
                  data_dir: Path | None = None) -> TrainResult:
    """Train the `learned` model on a dataset and write it to `out`."""
    traces = labelled(load_dataset(dataset_spec).traces())
    if not traces:
        raise FaultlensError(f"{dataset_spec} has no traces with a gold step to train on")
    model = fit_checked(dataset_spec, traces, seed=seed, data_dir=data_dir)
    model.meta["dataset"] = dataset_spec
    path = save(model, out)
    scored = evaluate(LearnedAttributor(model=model), traces)
    return TrainResult(path, model.meta["traces"], model.meta["steps"], model.meta["environments"], scored["step"], model.meta)


def evaluate(attributor: Any, traces: list[Trace], features: dict[str, Any] | None = None) -> dict[str, float]:
    """Step, agent and mode accuracy of an attributor on labelled traces (no intervals; see benchmark.metrics for those)."""
    n = step = agent = mode = 0
    for trace in labelled(traces):
        a = attributor.attribute(trace, features=features[trace.id]) if features is not None else attributor.attribute(trace)
        n += 1
        step += a.step == trace.gold.step
        agent += a.agent == (trace.gold.agent or trace.steps[trace.gold.step].agent)
        mode += bool(trace.gold.mode) and a.mode == trace.gold.mode
    return {"n": n, "step": step / n if n else 0.0, "agent": agent / n if n else 0.0, "mode": mode / n if n else 0.0}


def leave_one_environment_out(traces: list[Trace], seed: int = 0, baseline: str = "baseline:first-step",
                              dataset_spec: str = "in-memory", data_dir: Path | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """For each environment: train on the others, test on it. Returns {env: {"learned": acc, baseline: acc}}.

    Only non-test traces are accepted (pass the dev split): the held-out
    environment's traces are still never from the bundled `test` split.
    """
    usable = labelled(traces)
    assert_no_test_traces(dataset_spec, usable, data_dir)
    envs = sorted({t.source.benchmark for t in usable if t.source.benchmark})
    if len(envs) < 2:
        raise FaultlensError(f"leave-one-environment-out needs at least 2 environments, got {envs}")
    base = get(baseline)
    # Features depend on the trace alone, so they are computed once for all folds.
    features = {t.id: trace_features(t) for t in usable}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for env in envs:
        train = [t for t in usable if t.source.benchmark != env]
        held = [t for t in usable if t.source.benchmark == env]
        model = fit(train, seed=seed, features=features)
        out[env] = {"learned": evaluate(LearnedAttributor(model=model), held, features), baseline: evaluate(base, held)}
    return out


def loeo_average(results: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Macro average over environments of each method's accuracies."""
    methods = sorted({m for per in results.values() for m in per})
    return {m: {k: sum(results[e][m][k] for e in results) / len(results) for k in ("step", "agent", "mode")} for m in methods}
