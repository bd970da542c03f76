"""A faultlens verdict as Phoenix span annotations: one on the blamed step's span, one on the run's root span.

    faultlens.decisive_error   on the span of the step the attribution blames:
                               label the failure mode, score the confidence, explanation the reason
    faultlens.verdict          on the run's root span: label the blamed agent, the same score,
                               an explanation naming agent, step and mode
    faultlens.p_failed         on the run's root span(s), when `--failed-if` names p_failed:
                               score the detector's p_failed, label failed or ok (whether it met the bound)

The first two carry metadata (method, model, backend, agent, step, the candidate
ranking, the faultlens run and attribution ids) and the identifier
`faultlens`: Phoenix keeps one annotation per (name, span, identifier), so
writing a verdict again updates it instead of adding one. The annotator kind
is LLM for methods that call a model (`attributors.registry.uses_model`),
CODE for the offline ones.
"""

from __future__ import annotations

from typing import Any

from faultlens.attributors.registry import uses_model
from faultlens.middleware.errors import NotFound
from faultlens.middleware.model.trace import Attribution, Trace
from faultlens.middleware.model.taxonomy import get_mode, is_mode

DECISIVE_ERROR = "faultlens.decisive_error"
VERDICT = "faultlens.verdict"
P_FAILED = "faultlens.p_failed"
IDENTIFIER = "faultlens"
CANDIDATES = 5  # candidates kept in the metadata


def annotator_kind(attribution: Attribution) -> str:
    try:
        llm = uses_model(attribution.method)
    except NotFound:  # a method this faultlens does not know (saved by another version): it says if it had a model
        llm = attribution.model is not None
    return "LLM" if llm else "CODE"


def _mode_text(mode: str | None) -> str:
    if not mode:
        return "no mode given"
    return f"{mode} {get_mode(mode).name}" if is_mode(mode) else mode


def blamed_span(trace: Trace, attribution: Attribution) -> str | None:
    """The span id of the step the attribution blames (None: no step, or a step no span recorded)."""
    if attribution.step is None or not 0 <= attribution.step < len(trace.steps):
        return None
    return trace.steps[attribution.step].span_id


def verdict_annotations(trace: Trace, attribution: Attribution, root_span: str) -> list[dict[str, Any]]:
    """The two annotations of one attributed run (as `POST /v1/span_annotations` takes them); [] if it blames no span."""
    span_id = blamed_span(trace, attribution)
    if span_id is None:
        return []
    step = trace.steps[attribution.step or 0]
    agent = attribution.agent or step.agent
    metadata = {
        "method": attribution.method, "model": attribution.model, "backend": attribution.backend,
        "agent": agent, "step": attribution.step, "step_kind": step.kind.value,
        "candidates": [c.model_dump(mode="json", exclude_none=True) for c in attribution.ranking[:CANDIDATES]],
        "faultlens_run": trace.id, "faultlens_attribution": attribution.id, "blamed_span": span_id,
    }
    kind = annotator_kind(attribution)
    reason = attribution.reason or "(the method gave no reason)"
    score = attribution.confidence

    def annotation(span: str, name: str, label: str, explanation: str) -> dict[str, Any]:
        result: dict[str, Any] = {"label": label, "explanation": explanation}
        if score is not None:
            result["score"] = float(score)
        return {"span_id": span, "name": name, "annotator_kind": kind, "result": result, "metadata": metadata, "identifier": IDENTIFIER}

    return [
        annotation(span_id, DECISIVE_ERROR, attribution.mode or "unknown", reason),
        annotation(root_span, VERDICT, agent,
                   f"The run failed at step {attribution.step} ({step.kind.value}) by {agent}: {_mode_text(attribution.mode)}. {reason}"),
    ]


def p_failed_annotation(run_id: str, root_span: str, p_failed: float, failed: bool, rule: str) -> dict[str, Any]:
    """The detector's probability that run `run_id` failed, as an annotation of its root span (CODE: no model call)."""
    verdict = "failed" if failed else "ok"
    return {"span_id": root_span, "name": P_FAILED, "annotator_kind": "CODE", "identifier": IDENTIFIER,
            "result": {"label": verdict, "score": float(p_failed),
                       "explanation": f"faultlens's failure detector gives p_failed {p_failed:.2f}: {verdict} by {rule}"},
            "metadata": {"faultlens_run": run_id, "detector": "faultlens.attributors.detect", "rule": rule}}
