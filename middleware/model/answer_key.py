"""The answer key: what a trace may carry that gives its gold label away.

A trace keeps, for provenance, how its failure was made: the injection
pipeline's record (`metadata["injection"]`: the injected action itself) or an
imported dataset's own label fields (Who&When Pro's `ground_truth`,
`is_injected`, `phase: "injected"`, ..., kept under `metadata["answer_key"]`).
An attributor must see none of it, nor the gold label: `attributor_view` is the
one way a trace is handed to an attributor, by the benchmark runner and by
`faultlens attribute`. An importer that keeps such fields puts them under
`ANSWER_KEY` (on the trace or on a step); a new kind of record that reveals the
answer is added to `ANSWER_KEY_FIELDS`, and every caller hides it at once.
"""

from __future__ import annotations

from typing import Any

from .trace import Trace

ANSWER_KEY = "answer_key"
# Metadata keys (on the trace and on each step) that reveal the gold label.
ANSWER_KEY_FIELDS: tuple[str, ...] = ("injection", ANSWER_KEY)


def _without(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k not in ANSWER_KEY_FIELDS}


def has_answer_key(trace: Trace) -> bool:
    """Whether the trace holds a gold label or any answer-revealing record."""
    return (trace.gold is not None or any(k in trace.metadata for k in ANSWER_KEY_FIELDS)
            or any(k in s.metadata for s in trace.steps for k in ANSWER_KEY_FIELDS))


def attributor_view(trace: Trace, with_reference: bool = True) -> Trace:
    """A copy of `trace` fit for an attributor: no gold label, no answer key, and
    without the task's reference answer unless `with_reference`. The original is untouched."""
    update: dict[str, Any] = {"gold": None}
    if any(k in trace.metadata for k in ANSWER_KEY_FIELDS):
        update["metadata"] = _without(trace.metadata)
    if any(k in s.metadata for s in trace.steps for k in ANSWER_KEY_FIELDS):
        update["steps"] = [s.model_copy(update={"metadata": _without(s.metadata)}) if any(k in s.metadata for k in ANSWER_KEY_FIELDS) else s
                           for s in trace.steps]
    if not with_reference and trace.task.reference_answer is not None:
        update["task"] = trace.task.model_copy(update={"reference_answer": None})
    return trace.model_copy(update=update)
