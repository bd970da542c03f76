"""The ingest planner: spans mapped to run headers, tree links and serialised steps, without touching a store.

This is the costly part of ingest; kept apart so a server can do it outside
its write lock (`write.write_ingest` then writes the plan in one transaction).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..model.trace import Trace
from ..spans.conventions import AGENT, CHAIN
from ..spans.mapping import header_from_record, is_header_span, step_fields
from ..spans.record import SpanRecord
from ..spans.traces import group_by_trace
from ..spans.tree import SpanLink, read_link, repeats_a_tool, resolve_agent
from ..store.step_json import PreparedStep, stored_fields


@dataclass(frozen=True)
class RunPlan:
    """One run's share of an `IngestPlan`."""

    trace_id: str
    group: list[SpanRecord]
    root: SpanRecord | None
    header: Trace | None
    links: dict[str, SpanLink]
    # (record, step, missing, prepared): the step as its field values (`step_fields`); `missing` is the first
    # ancestor outside the batch the agent walk stopped at (None: resolved within the batch, or no agent above).
    steps: list[tuple[SpanRecord, dict[str, Any], str | None, PreparedStep]]


@dataclass(frozen=True)
class IngestPlan:
    """What `ingest` will write, worked out without touching the store: per run, its header (or None), tree links and steps."""

    runs: list[RunPlan]

    @property
    def trace_ids(self) -> list[str]:
        return [run.trace_id for run in self.runs]


def plan_ingest(records: Iterable[SpanRecord], *, source: str = "spans") -> IngestPlan:
    """Map spans to headers, tree links and steps, and serialise the steps for storage (no reads, no writes).

    Raises InputError on the first bad span. A step's agent is resolved here
    as far as the batch's own spans go; `write_ingest` finishes the walk
    through the stored tree for the few that leave the batch.
    """
    runs = []
    for trace_id, group in group_by_trace(records).items():
        root = next((r for r in group if is_header_span(r)), None)
        if root is None:
            root = next((r for r in group if r.parent_id is None and r.operation in (AGENT, CHAIN)), None)
        header = header_from_record(root, trace_id, source=source) if root is not None else None
        links = {r.span_id: read_link(r, source) for r in group}
        children: dict[str, list[SpanLink]] = {}
        for link in links.values():
            children.setdefault(link.parent_id or "", []).append(link)
        steps: list[tuple[SpanRecord, dict[str, Any], str | None]] = []
        for r in group:
            step = step_fields(r, source=source)
            if step is None:
                continue
            # Exporters send a chain after its children, so they are usually in the batch
            # (stored children are checked at write time; a chain that comes first is
            # handled when its tool arrives, see write._write_run).
            if r.operation == CHAIN and repeats_a_tool(r, children.get(r.span_id, [])):
                continue
            agent, missing = resolve_agent(r.span_id, links.get)
            if agent is not None:
                step["agent"] = agent
            steps.append((r, step, missing))
        runs.append(RunPlan(trace_id, group, root, header, links, [(r, step, missing, stored_fields(step)) for r, step, missing in steps]))
    return IngestPlan(runs)
