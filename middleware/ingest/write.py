"""The ingest writer: an `IngestPlan` written into a store inside the caller's transaction, and `ingest`, which plans and writes.

Exporters send each span when it ends, children before their parents, so a
step often arrives before the agent span it belongs to. Every span's place
in the tree is kept (`save_span_links`); a step whose agent is not known yet
is stored with the service's name and marked as waiting on the first missing
ancestor, and is given its agent when that ancestor arrives (see
docs/capture-frameworks.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model.trace import Outcome
from ..spans.conventions import CHAIN, TRACE_AGENTS
from ..spans.mapping import placeholder_header
from ..spans.record import SpanRecord
from ..spans.tree import SpanLink, repeats_a_tool, resolve_agent, run_agents, run_task
from ..store.protocol import TraceNotFound
from ..store.step_json import stored_fields
from .plan import IngestPlan, RunPlan, plan_ingest
from .tree_store import SpanTreeStore


@dataclass(frozen=True)
class Written:
    """What `write_ingest` wrote: the trace ids touched, and each run's outcome as the store held it before (None: not stored, or no outcome yet)."""

    trace_ids: list[str]
    outcomes_before: dict[str, Outcome | None]


def write_ingest(store: SpanTreeStore, plan: IngestPlan) -> Written:
    """Write an `IngestPlan`. Call it inside `store.batch(plan.trace_ids)`: all of it lands, or none."""
    before: dict[str, Outcome | None] = {}
    for run in plan.runs:
        trace_id, header = run.trace_id, run.header
        # One look-up answers whether the run is stored and its outcome (not the whole
        # run: reading it here would make ingest cost grow with the run).
        stored, outcome = _stored_outcome(store, trace_id)
        before[trace_id] = outcome
        if header is not None:
            if header.outcome is None and stored:
                header = header.model_copy(update={"outcome": outcome})
            store.begin_trace(header)
        elif not stored:
            store.begin_trace(placeholder_header(trace_id, run.group))
        _write_run(store, run, new_run=not stored)
    return Written(plan.trace_ids, before)


def _stored_outcome(store: SpanTreeStore, trace_id: str) -> tuple[bool, Outcome | None]:
    try:
        return True, store.get_outcome(trace_id)
    except TraceNotFound:
        return False, None


def ingest(store: SpanTreeStore, records: Iterable[SpanRecord], *, source: str = "spans") -> list[str]:
    """Write spans into a store as they arrive (live tracer, HTTP server).

    Each record becomes a step (idempotent by span id). A trace's header is
    written from its workflow/root span when that arrives, and from a
    placeholder before then, so steps are never orphaned and survive a crash
    mid-run. Every record is converted before anything is written: a bad span
    raises InputError and the batch writes nothing. The writes are one
    transaction (`store.batch()`), so a process killed mid-batch leaves none
    of it either. Cost is linear in the batch, whatever the size of the runs
    it adds to. Returns the trace ids touched.
    """
    plan = plan_ingest(records, source=source)
    with store.batch(plan.trace_ids):
        return write_ingest(store, plan).trace_ids


def _write_run(store: SpanTreeStore, run: RunPlan, *, new_run: bool = False) -> None:
    """Store a run's planned steps with their agents, and finish the agents of earlier steps that waited on this batch.

    new_run: the run was not stored before this transaction, so nothing of its tree is either.
    """
    trace_id, links = run.trace_id, run.links
    known: dict[str, SpanLink | None] = dict(links)

    def lookup(span_id: str) -> SpanLink | None:
        if span_id not in known and new_run:
            known[span_id] = None
        elif span_id not in known:
            rows = store.span_links(trace_id, span_ids=[span_id])
            known[span_id] = SpanLink.from_row(rows[0]) if rows else None
        return known[span_id]

    waiting: dict[str, str | None] = {}
    ready = []
    for record, step, missing, prepared in run.steps:
        if record.operation == CHAIN and repeats_a_tool(record, list(map(SpanLink.from_row, store.span_links(trace_id, parent_id=record.span_id)))):
            continue
        if missing is not None:
            # The walk up left the batch at `missing`: go on through the stored tree.
            agent, missing = resolve_agent(missing, lookup)
            if agent is not None:
                step = {**step, "agent": agent}  # (the plan stays as planned)
                prepared = stored_fields(step)
        if step["span_id"] == record.span_id:
            waiting[record.span_id] = missing
        ready.append(prepared)
    store.add_steps(trace_id, ready, new_run=new_run)
    # A chain that arrived before its tool and turns out only to repeat it is no step after all.
    for link in links.values():
        output = link.output
        parent = lookup(link.parent_id) if link.parent_id and output and output.startswith("tool:") else None
        if parent is not None and output is not None and parent.output == "chain:" + output.split(":", 1)[1] and parent.span_id not in links:
            store.delete_step(trace_id, parent.span_id)
    # Steps stored earlier whose walk up the tree stopped at a span of this batch.
    resolved: dict[str, str] = {}
    for span_id, missing in [] if new_run else store.steps_waiting_on(trace_id, list(links)):
        agent, still_missing = resolve_agent(missing, lookup)
        waiting[span_id] = still_missing
        if agent is not None:
            resolved[span_id] = agent
    store.save_span_links(trace_id, [link.row(waiting.get(link.span_id)) for link in links.values()])
    earlier = {span_id: missing for span_id, missing in waiting.items() if span_id not in links}
    if earlier:
        store.set_step_agents(trace_id, resolved, earlier)
    _fill_run_header(store, run)


def _fill_run_header(store: SpanTreeStore, run: RunPlan) -> None:
    """The run's agents and task, where the spans give them and the header did not."""
    trace_id, root, header, links = run.trace_id, run.root, run.header, run.links
    explicit_agents = root is not None and TRACE_AGENTS in root.attributes
    if not explicit_agents and (header is not None or _may_change_run_agents(store, trace_id, links)):
        # (a faultlens.agents list stored from an earlier batch wins inside run_agents)
        store.set_run_agents(trace_id, run_agents(SpanLink.from_row(row) for row in store.span_links(trace_id, describing=True)))
    if header is not None and not header.task.query:
        store.fill_run_query(trace_id, run_task(SpanLink.from_row(row) for row in store.span_links(trace_id, with_task=True)) or "")
    elif header is None:
        hint = run_task(links.values())
        if hint:
            store.fill_run_query(trace_id, hint)


def _may_change_run_agents(store: SpanTreeStore, trace_id: str, links: dict[str, SpanLink]) -> bool:
    """Whether this batch's (already stored) links can change `run_agents` of the run.

    Only a link that describes agents, or that is the first span of its agent
    (a new agent, or one seen earlier than before), can: `run_agents` reads
    each agent's first span and the describing ones. Checking that costs one
    indexed look-up per agent named in the batch, where recomputing reads
    every link of the run; a tracer that stamps each span with its agent
    would otherwise pay for the whole run on every batch.
    """
    if any(link.agents or link.explicit for link in links.values()):
        return True
    named = {link.span_id: link.agent for link in links.values() if link.agent}
    if not named:
        return False
    first = store.first_agent_spans(trace_id, sorted(set(named.values())))
    return any(first.get(agent) == span_id for span_id, agent in named.items())

