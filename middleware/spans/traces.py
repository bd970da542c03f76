"""Spans grouped into runs, and whole traces from a complete set of spans (an OTLP file)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import ValidationError

from ..errors import from_validation_error
from ..model.trace import Step, Trace
from .conventions import STEP_INDEX, TRACE_AGENTS
from .mapping import header_from_record, is_header_span, placeholder_header, span_to_step
from .record import SpanRecord
from .tree import SpanLink, link_of, repeats_a_tool, resolve_agent, run_agents, run_task

def group_by_trace(records: Iterable[SpanRecord]) -> dict[str, list[SpanRecord]]:
    """Records grouped by faultlens trace id: the conversation id, else the OTel trace id."""
    records = list(records)
    conversation: dict[str, str] = {}
    for r in records:
        if r.conversation_id and r.trace_id not in conversation:
            conversation[r.trace_id] = r.conversation_id
    groups: dict[str, list[SpanRecord]] = {}
    for r in records:
        groups.setdefault(r.conversation_id or conversation.get(r.trace_id, r.trace_id), []).append(r)
    return groups


def _root(records: list[SpanRecord]) -> SpanRecord | None:
    ids = {r.span_id for r in records}
    headers = [r for r in records if is_header_span(r)]
    if headers:
        return min(headers, key=lambda r: r.start_ns)
    roots = [r for r in records if r.parent_id is None or r.parent_id not in ids]
    return min(roots, key=lambda r: r.start_ns) if len(roots) == 1 and roots[0].parent_id is None else None


def _steps_of(records: list[SpanRecord], source: str, labels: Mapping[int, str | int] | None) -> list[tuple[SpanRecord, Step]]:
    links = {r.span_id: link_of(r) for r in records}
    children: dict[str, list[SpanLink]] = {}
    for link in links.values():
        children.setdefault(link.parent_id or "", []).append(link)
    out = []
    for r in records:
        label = labels.get(id(r)) if labels else None
        agent, _ = resolve_agent(r.span_id, links.get)
        step = span_to_step(r, source=source, label=label, agent=agent)
        if step is not None and not repeats_a_tool(r, children.get(r.span_id, [])):
            out.append((r, step))
    return out


def _order_key(pair: tuple[SpanRecord, Step]) -> tuple:
    record, step = pair
    index = record.attributes.get(STEP_INDEX)
    when = step.started_at if step.started_at is not None else float("inf")
    return (when, int(index) if index is not None else 0)


def traces_from_records(records: Iterable[SpanRecord], *, source: str = "spans", labels: Mapping[int, str | int] | None = None) -> list[Trace]:
    """Whole traces from a complete set of spans (an OTLP file). Raises InputError on bad spans."""
    traces = []
    for trace_id, group in group_by_trace(records).items():
        root = _root(group)
        label = (labels or {}).get(id(root)) if root is not None else None
        header = header_from_record(root, trace_id, source=source, label=label) if root is not None else placeholder_header(trace_id, group)
        links = [link_of(r) for r in group]
        if not (root is not None and TRACE_AGENTS in root.attributes):
            header.agents = run_agents(links)
        if not header.task.query:
            header.task.query = run_task(links) or ""
        pairs = sorted(_steps_of(group, source, labels), key=_order_key)
        steps = [step.model_copy(update={"index": i}) for i, (_, step) in enumerate(pairs)]
        try:
            traces.append(Trace.model_validate({**header.model_dump(), "steps": [s.model_dump() for s in steps]}))
        except ValidationError as exc:
            raise from_validation_error(source, label if label is not None else f"trace {trace_id}", exc) from None
    return traces

