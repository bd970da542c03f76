"""The learned model: a step scorer and a mode classifier over step features.

- Step scorer: gradient-boosted trees (scikit-learn
  `HistGradientBoostingClassifier`) over every step of every training trace
  (label 1 on the gold step, 0 elsewhere). At inference the steps of one trace
  are ranked by that score; the blamed agent is the agent of the top step.
  Trees were chosen over the earlier logistic regression by the
  leave-one-environment-out numbers (`faultlens train --loeo`): the features
  are mostly within-trace comparisons whose meaning depends on each other
  (a new value matters in an agent's step, not in a tool result), which a
  linear score cannot express. No early stopping, so no random validation
  split: the same data and seed give the same trees.
- Mode classifier: logistic regression from the gold step's features to its
  failure mode, applied to the top-ranked step (or any step, `mode_at`).
- Explanation: `contributions` says how much the blamed step's score drops
  when one feature is set to its median over the trace, i.e. which features
  made this step stand out from the others.

`fit` takes traces already in memory (loading datasets, and refusing `test`
traces, is `benchmark.train`'s job, as attributors may not import benchmark).
The fitted model is a plain dict saved with joblib; loading needs no network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import sklearn
from scipy import sparse
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from threadpoolctl import ThreadpoolController

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Trace

from ..steptext import blameable
from .features import feature_names, trace_features

FORMAT_VERSION = 2
DEFAULT_MODEL_PATH = Path(__file__).parent / "model.joblib"


class ModelMissingError(FaultlensError):
    """The learned model file is not there (or is not a faultlens learned model)."""


@dataclass
class LearnedModel:
    """A fitted step scorer and mode classifier, with what they were trained on."""

    scaler: StandardScaler  # for the mode classifier (trees need no scaling)
    step_model: HistGradientBoostingClassifier
    mode_model: LogisticRegression | None
    single_mode: str | None
    names: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def step_scores(self, X: np.ndarray) -> np.ndarray:
        """Probability that each row (step) is the decisive one."""
        with _one_thread():
            return self.step_model.predict_proba(_dense(X))[:, 1]

    def contributions(self, X: np.ndarray, step: int) -> list[tuple[str, float]]:
        """Per feature: the drop of step `step`'s score (log-odds) when that feature is set to its trace median; largest first."""
        X = _dense(X)
        row = X[step]
        median = np.median(X, axis=0)
        differs = np.flatnonzero(row != median)
        if differs.size == 0:
            return []
        probes = np.repeat(row[None, :], differs.size, axis=0)
        probes[np.arange(differs.size), differs] = median[differs]
        with _one_thread():
            # One call for the row and its probes: each call costs input checks on top of the trees.
            raw = self.step_model.decision_function(np.vstack([row[None, :], probes]))
        drops = raw[0] - raw[1:]
        order = np.argsort(-np.abs(drops), kind="stable")
        return [(self.names[differs[i]], float(drops[i])) for i in order if drops[i] != 0]

    def mode(self, row: np.ndarray) -> tuple[str | None, float]:
        """The failure mode of a step (its feature row) and the classifier's probability for it."""
        if self.mode_model is None:
            return self.single_mode, 1.0 if self.single_mode else 0.0
        proba = self.mode_model.predict_proba(self.scaler.transform(_dense(row).reshape(1, -1)))[0]
        best = int(np.argmax(proba))
        return str(self.mode_model.classes_[best]), float(proba[best])


_controller: ThreadpoolController | None = None


def _one_thread() -> Any:
    """One OpenMP thread for the trees: a trace has a few dozen rows, and on a busy machine
    OpenMP workers waiting for each other cost far more than they save (seconds instead of ms).

    The controller is made once: `threadpool_limits()` finds the loaded libraries
    again on every call (reading /proc/self/maps), which cost more than the trees.
    """
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="openmp")


def _dense(X: Any) -> np.ndarray:
    return np.asarray(X.toarray() if sparse.issparse(X) else X, dtype=np.float64)


def labelled(traces: list[Trace]) -> list[Trace]:
    """The traces usable for training: a gold step inside the trace."""
    return [t for t in traces if t.gold is not None and t.steps and 0 <= t.gold.step < len(t.steps)]


def candidate_rows(trace: Trace) -> list[int]:
    """The rows the step scorer learns from and ranks: the steps an offline method may blame."""
    return blameable(trace)


# Chosen leave-one-system-out (`faultlens train --loso`: every system scored by a model that never saw a run of it;
# the mean over the seven systems decides, docs/real-traces.md). Smaller, more regularised trees transfer better to a
# system they never saw: mean step accuracy of `learned` alone 22.7% with the earlier 400 trees of 31 leaves (at least 40
# steps a leaf), 28.3% with 100 trees of 15 leaves (at least 100 steps a leaf), 26.6% with 60 trees of 7 leaves (200).
# The earlier trees had been chosen on each dataset's own held-out half, which rewarded learning its habits.
TREE_PARAMS = {"max_iter": 100, "learning_rate": 0.05, "max_leaf_nodes": 15, "min_samples_leaf": 100,
               "l2_regularization": 1.0}


# How much a small source of traces counts against a large one (see `source_weights`). A source is one system: a
# dataset's runs of one framework (the bundled `dev` split is five: our own environments and four frameworks). With
# balance 1 every system weighs the same in training, so no one system's habits (most of all when its errors happen)
# dominate. Leave-one-system-out mean step accuracy of `learned` alone, the earlier trees: 18.0% with the earlier
# setting (balance 0.5 over whole datasets, which the real datasets' own halves had chosen), 22.7% with balance 1 over
# systems. Over eleven systems, 0.75 (larger systems count somewhat more) lifts `blend`, the default, by about three
# points of step accuracy against 1, paired on the same traces with an interval above zero (docs/real-traces.md,
# `scripts/loso_grid.py --balance 0.75 --paired-with 1.0`); 0.5 and 0.25 less or not at all.
SOURCE_BALANCE = 0.75
# The share of the training weight given to the runs of the one system a model is fitted for (`fit(own=...)`):
# `faultlens adapt` fits `learned` for a user's system from a few dozen runs injected into its own successful runs,
# beside thousands of bundled ones; balanced as one more source they would be a few percent of the weight.
OWN_SHARE = 0.5


def source_weights(traces: list[Trace], balance: float = SOURCE_BALANCE,
                   sources: Mapping[str, str] | None = None, own: Collection[str] = (),
                   own_share: float = OWN_SHARE) -> dict[str, float]:
    """A weight per trace id: `(largest source / this source) ** balance`, a source being the dataset a trace came
    from (`sources`: trace id -> name), else the format it was read from, and within it the framework that ran it.

    With one simulator's 2,000 traces beside 80 real ones, unweighted trees learn the simulator alone; balance 1
    gives every source the same total weight, 0 gives every trace the same weight. A user's own labelled runs are
    stored in faultlens's format, like the bundled benchmark, hence the dataset and not the format when known.

    `own`: the ids of the runs of the system the model is for; together they get `own_share` of the total weight.
    """
    def source(t: Trace) -> tuple[str, str]:
        return (sources[t.id] if sources is not None and t.id in sources else t.source.format or "", t.source.framework or "")

    sizes: dict[tuple[str, str], int] = {}
    for t in traces:
        sizes[source(t)] = sizes.get(source(t), 0) + 1
    largest = max(sizes.values(), default=1)
    weights = {t.id: (largest / sizes[source(t)]) ** balance for t in traces}
    mine = [t.id for t in traces if t.id in own]
    rest = sum(w for i, w in weights.items() if i not in own)
    if mine and rest and 0 < own_share < 1:
        scale = own_share / (1 - own_share) * rest / sum(weights[i] for i in mine)
        weights.update({i: weights[i] * scale for i in mine})
    return weights


def fit(traces: list[Trace], seed: int = 0, C: float = 0.5,
        features: dict[str, np.ndarray] | None = None, balance: float = SOURCE_BALANCE,
        tree_params: dict[str, Any] | None = None, sources: Mapping[str, str] | None = None,
        own: Collection[str] = (), own_share: float = OWN_SHARE) -> LearnedModel:
    """Fit the step scorer and the mode classifier on labelled traces (deterministic given `seed`).

    `features` (trace id -> `trace_features`) lets a caller that fits several
    times on overlapping sets (leave-one-environment-out) compute them once.
    `balance` weights the sources (`source_weights`, with `sources`); `own` (run ids) are the runs of the system
    the model is fitted for, given `own_share` of the weight.
    """
    usable = labelled(traces)
    params = dict(TREE_PARAMS if tree_params is None else tree_params)
    weight_of = source_weights(usable, balance, sources, own, own_share)
    if len(usable) < 2:
        raise FaultlensError(f"need at least 2 traces with a gold step to train, got {len(usable)}")
    blocks, labels, weights, gold_rows, modes = [], [], [], [], []
    for trace in usable:
        gold = trace.gold
        if gold is None or gold.step is None:  # `labelled` keeps only traces with a gold step
            raise FaultlensError(f"trace {trace.id}: no gold step to train on")
        X = _dense(features[trace.id] if features is not None and trace.id in features else trace_features(trace))
        rows = candidate_rows(trace)
        if gold.step in rows:
            # A gold step that is no candidate (a tool result blamed for a wrong call) cannot be ranked; the trace
            # still teaches the mode classifier.
            y = np.zeros(len(rows), dtype=int)
            y[rows.index(gold.step)] = 1
            blocks.append(X[rows])
            labels.append(y)
            weights.append(np.full(len(rows), weight_of[trace.id]))
        if gold.mode:
            gold_rows.append(X[gold.step])
            modes.append(gold.mode)
    X_all = np.vstack(blocks)
    y_all = np.concatenate(labels)
    step_model = HistGradientBoostingClassifier(**params, early_stopping=False, random_state=seed)
    with _one_thread():
        step_model.fit(X_all, y_all, sample_weight=np.concatenate(weights))
    mode_model, single_mode = None, None
    distinct = sorted(set(modes))
    scaler = StandardScaler().fit(np.vstack(gold_rows) if gold_rows else X_all)
    if len(distinct) >= 2:
        mode_model = LogisticRegression(C=C, max_iter=3000, random_state=seed)
        mode_model.fit(scaler.transform(np.vstack(gold_rows)), np.asarray(modes))
    elif distinct:
        single_mode = distinct[0]
    ids = hashlib.sha256("\n".join(sorted(t.id for t in usable)).encode()).hexdigest()[:16]
    meta = {"format_version": FORMAT_VERSION, "seed": seed, "C": C, "tree_params": params, "source_balance": balance, "traces": len(usable), "steps": int(X_all.shape[0]),
            "modes": distinct, "sklearn": sklearn.__version__, "trace_ids_sha256_16": ids,
            "environments": sorted({t.source.benchmark for t in usable if t.source.benchmark})}
    return LearnedModel(scaler, step_model, mode_model, single_mode, feature_names(), meta)


def save(model: LearnedModel, path: Path | str) -> Path:
    """Write the model with joblib (compressed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": "faultlens-learned", "format_version": FORMAT_VERSION, "scaler": model.scaler,
               "step_model": model.step_model, "mode_model": model.mode_model, "single_mode": model.single_mode,
               "names": model.names, "meta": model.meta}
    joblib.dump(payload, path, compress=3)
    return path


def load(path: Path | str | None = None) -> LearnedModel:
    """Read a model written by `save` (default: the one shipped in the package)."""
    path = Path(path) if path is not None else DEFAULT_MODEL_PATH
    if not path.exists():
        raise ModelMissingError(
            f"no learned model at {path}; train one with `faultlens train --dataset bundled:dev --out {path}` "
            f"(or pass model_path= to the `learned` attributor)")
    payload = joblib.load(path)
    if not isinstance(payload, dict) or payload.get("format") != "faultlens-learned":
        raise ModelMissingError(f"{path} is not a faultlens learned model")
    if payload.get("format_version") != FORMAT_VERSION:
        raise ModelMissingError(f"{path} has model format {payload.get('format_version')}, this faultlens reads "
                                f"{FORMAT_VERSION}; retrain with `faultlens train`")
    if payload["names"] != feature_names():
        raise ModelMissingError(f"{path} was trained on different features than this faultlens computes; retrain with `faultlens train`")
    return LearnedModel(payload["scaler"], payload["step_model"], payload["mode_model"], payload["single_mode"],
                        payload["names"], payload["meta"])
