"""The detector's model: gradient-boosted trees on the run's features, calibrated (Platt) to a probability.

`fit` trains on runs with known outcomes (the caller chooses them: training data
is `scripts/detect_train.py`'s job, as attributors may not import benchmark);
`save`/`load` keep it as a plain dict in a joblib file shipped next to this
module; `Detector.score` gives one `Detection` per trace: `p_failed`, or a
reason why there is none (a run with no steps), never an exception for a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from faultlens.middleware.errors import FaultlensError, extra_needed
from faultlens.middleware.model.trace import Trace

from .features import FEATURE_NAMES, features, group_key, with_relative

FORMAT_VERSION = 1
DEFAULT_MODEL_PATH = Path(__file__).parent / "model.joblib"


class DetectorMissingError(FaultlensError):
    """The detector's model file is not there (or is not a faultlens detector)."""


class Detection(BaseModel):
    """One run's verdict: the probability that it failed, or why there is none."""

    trace_id: str
    p_failed: float | None = None
    reason: str | None = None
    features: dict[str, float] = {}


def _matrix(rows: Sequence[dict[str, float]]) -> Any:
    import numpy as np

    return np.array([[row.get(name, 0.0) for name in FEATURE_NAMES] for row in rows], dtype=float)


def fit(rows: Sequence[dict[str, float]], failed: Sequence[bool], seed: int = 0) -> dict[str, Any]:
    """A calibrated classifier of failed runs from feature rows and their outcomes (True: failed).

    Small, strongly regularised trees with balanced class weights (failed runs outnumber the rest in the
    bundled data), then Platt scaling on shuffled stratified folds: the folds must mix systems, or the scaling
    learns one system's quirks; and the sigmoid keeps the trees' ranking (isotonic steps tie runs)."""
    with extra_needed("the failure detector"):
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.model_selection import StratifiedKFold
    leaf = min(100, max(5, len(rows) // 40))  # a user's few hundred runs still split
    base = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.05, max_leaf_nodes=7, min_samples_leaf=leaf,
                                          class_weight="balanced", random_state=seed)
    model = CalibratedClassifierCV(base, method="sigmoid", cv=StratifiedKFold(3, shuffle=True, random_state=seed))
    model.fit(_matrix(rows), [int(bool(f)) for f in failed])
    return {"format": FORMAT_VERSION, "features": list(FEATURE_NAMES), "model": model, "n_train": len(rows),
            "n_failed": int(sum(bool(f) for f in failed))}


def predict(payload: dict[str, Any], rows: Sequence[dict[str, float]]) -> list[float]:
    """p_failed for each feature row."""
    if not rows:
        return []
    return [float(p) for p in payload["model"].predict_proba(_matrix(rows))[:, 1]]


def save(payload: dict[str, Any], path: str | Path = DEFAULT_MODEL_PATH) -> Path:
    import joblib

    path = Path(path)
    joblib.dump(payload, path, compress=3)
    return path


def load(path: str | Path | None = None) -> dict[str, Any]:
    """The detector's model (the shipped one by default)."""
    path = Path(path) if path is not None else DEFAULT_MODEL_PATH
    if not path.is_file():
        raise DetectorMissingError(f"no detector model at {path}; train one with `python scripts/detect_train.py`")
    with extra_needed("the failure detector"):
        import joblib

        payload = joblib.load(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION or payload.get("features") != FEATURE_NAMES:
        raise DetectorMissingError(f"{path} is not a detector model of this version; retrain it with `python scripts/detect_train.py`")
    return payload


class Detector:
    """Scores finished runs: `p_failed`, a calibrated probability that the run failed."""

    def __init__(self, path: str | Path | None = None, payload: dict[str, Any] | None = None):
        self.payload = payload if payload is not None else load(path)

    def score(self, traces: Iterable[Trace], progress: Callable[[], None] | None = None) -> list[Detection]:
        """One `Detection` per trace, in order. Scored together, runs of one system (the same agents) are also
        compared with each other (`with_relative`): a run much shorter than its system's usual runs is suspect."""
        ids: list[str] = []
        rows: list[dict[str, float] | None] = []
        groups: list[str] = []
        for trace in traces:
            ids.append(trace.id)
            rows.append(features(trace) if trace.steps else None)
            groups.append(group_key(trace))
            if progress is not None:
                progress()
        scored = [i for i, r in enumerate(rows) if r is not None]
        full = with_relative([rows[i] for i in scored], [groups[i] for i in scored])  # type: ignore[misc]
        found = {i: (p, row) for i, p, row in zip(scored, predict(self.payload, full), full)}
        return [Detection(trace_id=ids[i], p_failed=round(found[i][0], 4), features=found[i][1]) if i in found
                else Detection(trace_id=ids[i], reason="the run has no steps: nothing to judge") for i in range(len(ids))]

    def score_one(self, trace: Trace) -> Detection:
        """One run alone (no other run of its system to compare with)."""
        return self.score([trace])[0]
