"""Agent identity from the span tree: a step's agent is that of the nearest span above it that names one.

Frameworks traced with OpenInference name the agent only on their agent
spans, so each span's place in the tree is kept as a `SpanLink`; a step's
agent comes from `resolve_agent` over them, and the run's agents and task
from the tree too (`run_agents`, `run_task`). `ingest` keeps every span's
link in the store so that this works when children arrive before their
parents, as exporters send them (docs/capture-frameworks.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..errors import FieldError, InputError
from ..model.trace import AgentInfo
from ..store.protocol import LinkRow
from .adapters import hooks
from .conventions import AGENT_DESCRIPTION, CHAIN, CHAT, STEP_KIND, TOOL, TRACE_AGENTS
from .mapping import agent_of, plain_output, read_error
from .messages import first_user_text, json_attr
from .record import SpanRecord

_MAX_INT64 = 2**63 - 1  # the span_links.start_ns column is a signed 64-bit integer


@dataclass(frozen=True)
class SpanLink:
    """What the span tree needs of one span: where it hangs, whose it is, what it says of the run.

    Kept for every span (steps and the containers that are not steps), so a
    step's agent can be found whatever order the spans arrive in.
    """

    span_id: str
    parent_id: str | None
    start_ns: int
    agent: str | None = None  # the agent the span names itself (agent_of)
    agents: tuple[AgentInfo, ...] = ()  # agents it describes: itself when described, the team members it lists
    explicit: bool = False  # `agents` is the run's list as given (faultlens.agents)
    task: str | None = None  # the first user message of a model call: the run's task if the root gives none
    output: str | None = None  # `tool:`/`chain:` + digest of its text output (a chain that only repeats a tool's is no step)

    def row(self, waiting_on: str | None = None) -> LinkRow:
        describes = {"agents": [a.model_dump(mode="json") for a in self.agents], "explicit": self.explicit} if self.agents or self.explicit else None
        # The schema accepts times up to 2**64 ns; the column is a signed 64-bit integer, and only order matters.
        start_ns = None if self.start_ns is None else min(self.start_ns, _MAX_INT64)
        return LinkRow(span_id=self.span_id, parent_id=self.parent_id, start_ns=start_ns, agent=self.agent,
                       describes=json.dumps(describes, sort_keys=True) if describes else None, task=self.task, output=self.output,
                       waiting_on=waiting_on)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SpanLink:
        describes = json.loads(row["describes"]) if row.get("describes") else {}
        return cls(span_id=row["span_id"], parent_id=row.get("parent_id"), start_ns=int(row.get("start_ns") or 0), agent=row.get("agent"),
                   agents=tuple(AgentInfo.model_validate(a) for a in describes.get("agents", [])), explicit=bool(describes.get("explicit")), task=row.get("task"), output=row.get("output"))


def _described_agents(record: SpanRecord, own: str | None) -> tuple[list[AgentInfo], bool]:
    """The agents a span describes, and whether that is the run's whole list (faultlens.agents). own: `agent_of(record)`."""
    attrs = record.attributes
    if TRACE_AGENTS in attrs:
        try:
            value = json_attr(attrs, TRACE_AGENTS)
            return [AgentInfo.model_validate(a) for a in value], True
        except (FieldError, ValidationError, TypeError):
            return [], True  # header_from_record reports the bad value
    found: list[AgentInfo] = []
    if own is not None and attrs.get(AGENT_DESCRIPTION):
        # (an agent's name alone is in SpanLink.agent)
        found.append(AgentInfo(name=own, description=str(attrs[AGENT_DESCRIPTION])))
    # What a framework lists on a span (managed agents, a team's participants), as its adapter reads it.
    for listed in hooks().listed_agents:
        if more := listed(record):
            found.extend(more)
    return found, False


def read_link(record: SpanRecord, source: str) -> SpanLink:
    """`link_of`, with a bad attribute value raised as an InputError naming `source` and the span."""
    # try/except, as in span_to_step: this runs for every span.
    try:
        return link_of(record)
    except InputError:
        raise
    except (FieldError, ValidationError, TypeError, AttributeError, KeyError, ValueError) as exc:
        raise read_error(exc, source, f"span {record.span_id}", "a span tree link") from None


def link_of(record: SpanRecord) -> SpanLink:
    """What the span tree keeps of a span."""
    own = agent_of(record)
    agents, explicit = _described_agents(record, own)
    return SpanLink(
        span_id=record.span_id,
        parent_id=record.parent_id,
        start_ns=record.start_ns,
        agent=own,
        agents=tuple(agents),
        explicit=explicit,
        task=first_user_text(record) if record.operation == CHAT else None,
        output=_output_key(record),
    )


def _digest(text: str | None) -> str | None:
    return hashlib.sha1(text.encode()).hexdigest() if text else None


def _output_key(record: SpanRecord) -> str | None:
    """`tool:<digest>` / `chain:<digest>` of a tool's or an observing chain's text output."""
    op = record.operation
    if op not in (TOOL, CHAIN) or (op == CHAIN and STEP_KIND in record.attributes):
        return None
    digest = _digest(plain_output(record))
    return f"{'tool' if op == TOOL else 'chain'}:{digest}" if digest else None


def repeats_a_tool(record: SpanRecord, children: Iterable[SpanLink]) -> bool:
    """A chain whose text output only repeats one of its tools' (a tool-calling agent's `Step N`)."""
    key = _output_key(record)
    if record.operation != CHAIN or key is None:
        return False
    return any(child.output == "tool:" + key.split(":", 1)[1] and child.parent_id == record.span_id for child in children)


def resolve_agent(span_id: str, lookup: Callable[[str], SpanLink | None]) -> tuple[str | None, str | None]:
    """(agent, missing): the agent of the nearest span at or above `span_id` that names one.

    When the walk up reaches a span not known yet, the agent is None and
    `missing` is that span's id: resolution resumes from it when it arrives.
    Both None: the tree above holds no agent.
    """
    seen: set[str] = set()
    current: str | None = span_id
    while current is not None and current not in seen:
        seen.add(current)
        link = lookup(current)
        if link is None:
            return None, current
        if link.agent:
            return link.agent, None
        current = link.parent_id
    return None, None


def run_agents(links: Iterable[SpanLink]) -> list[AgentInfo]:
    """The run's agents: the run's own list if a span gives one (faultlens.agents), else
    the agents that own spans, in order of their first span, then those only listed
    (a managed agent or participant that never ran); descriptions from wherever given."""
    ordered = sorted(links, key=lambda link: (link.start_ns, link.span_id))
    explicit = [link for link in ordered if link.explicit]
    if explicit:
        return list(explicit[0].agents)
    described: dict[str, str] = {}
    for link in ordered:
        for info in link.agents:
            if info.description and not described.get(info.name):
                described[info.name] = info.description
    names = list(dict.fromkeys(link.agent for link in ordered if link.agent))
    names += [n for n in dict.fromkeys(info.name for link in ordered for info in link.agents) if n not in names]
    return [AgentInfo(name=n, description=described.get(n, "")) for n in names]


def run_task(links: Iterable[SpanLink]) -> str | None:
    """The first user message of the run's earliest model call: its task when the root states none."""
    hints = sorted((link for link in links if link.task), key=lambda link: (link.start_ns, link.span_id))
    return hints[0].task if hints else None
