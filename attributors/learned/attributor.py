"""`learned`: a small trained model ranks the steps and names the mode. No model calls.

The step scorer's probabilities over the steps of a trace give the ranking;
the blamed step is the top one, its agent the blamed agent, and the mode the
mode classifier's answer on that step. Confidence is the top step's share of
the summed step scores. `details["top_features"]` lists the features that
made the blamed step stand out: how much its score (log-odds) drops when the
feature is set to its median over the trace, so "why this step" can be read off.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from faultlens.middleware.model.trace import Attribution, AttributionStatus, Candidate, Cost, Trace

from ..base import BaseAttributor
from ..evidence import evidence, reason
from ..steptext import blameable
from .features import trace_features
from .model import LearnedModel, load

PROMPT_VERSION = "learned/v2"
TOP_FEATURES = 8
RANKING_SIZE = 10


class LearnedAttributor(BaseAttributor):
    """Offline attribution by the shipped (or a given) learned model; see the module docstring."""

    name = "learned"

    def __init__(self, model_path: str | Path | None = None, model: LearnedModel | None = None, **ignored: Any):
        # The model is read once, at construction: a missing file is a clear error now, not on the first trace.
        self.model = model if model is not None else load(model_path)
        self.model_path = str(model_path) if model_path is not None else None
        self.ignored = sorted(ignored)

    def attribute(self, trace: Trace, features: Any = None) -> Attribution:
        """Attribute one trace; `features` may pass its precomputed `trace_features`."""
        started = time.monotonic()
        details: dict[str, Any] = {"model": {k: self.model.meta.get(k) for k in ("traces", "seed", "trace_ids_sha256_16")}}
        if self.ignored:
            details["ignored_options"] = self.ignored
        if not trace.steps:
            return Attribution(trace_id=trace.id, method=self.name, backend=self.name, status=AttributionStatus.error,
                               error="the trace has no steps to attribute", details=details)
        X = features if features is not None else trace_features(trace)
        # Only decisions (and environment faults) are candidates: a tool result or an executor's
        # output is evidence, already in its cause's features (`err.own_result`, ...).
        allowed = blameable(trace)
        scores = self.scores(trace, X, allowed, details)
        order = self.rank(trace, scores, allowed, details)
        best = order[0]
        mode, mode_p = self.model.mode(X[best])
        # The why comes from the evidence around the step, in words; the features that ranked it stay in `details`.
        found = evidence(trace, best)
        if found:
            details["classifier_mode"] = mode
            mode = found[0].mode
        details["evidence"] = [e.as_dict() for e in found]
        top = self.model.contributions(X, best)[:TOP_FEATURES]
        details["top_features"] = [{"feature": n, "contribution": round(c, 4)} for n, c in top]
        details["mode_probability"] = round(mode_p, 4)
        details["step_score"] = round(float(scores[best]), 4)
        total = float(np.sum(scores[allowed]))
        ranking = [Candidate(step=i, score=round(float(scores[i]), 4), agent=trace.steps[i].agent) for i in order[:RANKING_SIZE]]
        return Attribution(
            trace_id=trace.id, method=self.name, backend=self.name, status=AttributionStatus.ok,
            agent=trace.steps[best].agent, step=best, mode=mode, reason=reason(trace, best, found),
            confidence=round(float(scores[best]) / total, 4) if total > 0 else 0.0,
            ranking=ranking, cost=Cost(seconds=round(time.monotonic() - started, 4)), details=details,
            prompt_version=PROMPT_VERSION,
        )

    def scores(self, trace: Trace, X: np.ndarray, allowed: list[int], details: dict[str, Any]) -> np.ndarray:
        """A score per step; the highest allowed one is blamed (`blend` overrides this)."""
        return self.model.step_scores(X)

    def rank(self, trace: Trace, scores: np.ndarray, allowed: list[int], details: dict[str, Any]) -> list[int]:
        """The allowed steps, most to least likely the decisive one (`blend` overrides this)."""
        return _ranked(scores, allowed)

    def blamed_steps(self, traces: list[Trace], features: dict[str, np.ndarray]) -> list[int | None]:
        """The step `attribute` blames in each trace (None for a trace with no step), all scored in one call.

        Training accuracy needs only this, for thousands of traces: one call of the trees per trace costs
        about 2 ms of overhead each, and `attribute` also explains its verdict."""
        blocks = [features[t.id] for t in traces]
        scores = self.model.step_scores(np.vstack(blocks)) if any(len(b) for b in blocks) else np.zeros(0)
        blamed: list[int | None] = []
        start = 0
        for trace, X in zip(traces, blocks):
            allowed = blameable(trace)
            blamed.append(_ranked(scores[start:start + len(X)], allowed)[0] if len(X) and allowed else None)
            start += len(X)
        return blamed

    def mode_at(self, trace: Trace, step: int) -> str | None:
        """The mode classifier's failure mode for any step of the trace (used by `counterfactual` for its candidates)."""
        if not 0 <= step < len(trace.steps):
            return None
        found = evidence(trace, step)
        return found[0].mode if found else self.model.mode(trace_features(trace)[step])[0]


def _ranked(scores: np.ndarray, allowed: list[int]) -> list[int]:
    """The allowed steps, highest score first, the earliest step on a tie (the decisive error is the first one)."""
    return sorted(allowed, key=lambda i: (-scores[i], i))
