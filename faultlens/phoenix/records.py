"""Phoenix's spans (`GET /v1/projects/{p}/spans`) as `SpanRecord`s, for the span mapping OTLP ingest uses.

Phoenix answers with its own span shape: the OpenInference span kind moved
out of the attributes into `span_kind`, every attribute flattened to dotted
keys (lists too: `participant_names.0`, `participant_names.1`), ISO times
and status codes `OK`/`ERROR`/`UNSET`. `span_record` undoes exactly that,
so `middleware.spans` sees the attributes the instrumentation wrote.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from faultlens.middleware.errors import InputError
from faultlens.middleware.spans.conventions import OI_KIND
from faultlens.middleware.spans.record import SpanRecord

_STATUS = {"OK": "ok", "ERROR": "error", "UNSET": "unset"}
_INDEXED = re.compile(r"^(.+)\.(\d+)$")


def _ns(value: Any, source: str, span: str, field: str) -> int:
    if value is None:
        return 0
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise InputError(source, span, field, f"not an ISO 8601 time: {value!r}") from None
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _primitive(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def unflatten_lists(attributes: dict[str, Any]) -> dict[str, Any]:
    """`name.0`, `name.1`, ... with plain values back into the list `name` they were flattened from.

    Only keys whose last part is an index and whose value is plain: OpenInference's
    own flattened keys (`llm.input_messages.0.message.role`) end in a name and stay."""
    lists: dict[str, dict[int, Any]] = {}
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        m = _INDEXED.match(key)
        if m and _primitive(value):
            lists.setdefault(m.group(1), {})[int(m.group(2))] = value
        else:
            out[key] = value
    for prefix, items in lists.items():
        # a prefix that is also a plain attribute, or a gap in the indices: not a flattened list, keep the keys
        if prefix in out or sorted(items) != list(range(len(items))):
            out.update({f"{prefix}.{i}": v for i, v in items.items()})
        else:
            out[prefix] = [items[i] for i in range(len(items))]
    return out


def span_label(span: Any) -> str | None:
    """The id a malformed span can be reported by: its OpenTelemetry span id (the one Phoenix's UI shows), else Phoenix's own
    (`id`); None when it has neither."""
    if not isinstance(span, dict):
        return None
    context = span.get("context")
    for value in (context.get("span_id") if isinstance(context, dict) else None, span.get("id")):
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type (for messages about an answer's shape)."""
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _shaped(value: Any, want: type, source: str, label: str, field: str) -> Any:
    """`value` when it is of type `want` (null reads as empty); an InputError naming the field otherwise."""
    if value is None:
        return want()
    if not isinstance(value, want):
        raise InputError(source, label, field, f"must be a JSON {json_type(want())}, not a {json_type(value)} ({value!r:.60})")
    return value


def _events(span: dict[str, Any], source: str, label: str) -> list[dict[str, Any]]:
    events = []
    for i, event in enumerate(_shaped(span.get("events"), list, source, label, "events")):
        event = _shaped(event, dict, source, label, f"events.{i}")
        events.append({"name": str(event.get("name") or ""), "time_ns": _ns(event.get("timestamp"), source, label, f"events.{i}.timestamp"),
                       "attributes": dict(_shaped(event.get("attributes"), dict, source, label, f"events.{i}.attributes"))})
    return events


def span_record(span: Any, *, source: str = "phoenix", project: str | None = None) -> SpanRecord:
    """One Phoenix span as a `SpanRecord`. Raises InputError naming the span and field it cannot read (a span that is no JSON object too)."""
    label = f"span {span_label(span) or '(no id)'}"
    if not isinstance(span, dict):
        raise InputError(source, label, None, f"a span must be a JSON object, not a {json_type(span)} ({span!r:.60})")
    context = _shaped(span.get("context"), dict, source, label, "context")
    span_id, trace_id = context.get("span_id"), context.get("trace_id")
    if not span_id or not trace_id or not isinstance(span_id, str) or not isinstance(trace_id, str):
        raise InputError(source, label, "context", "a span needs context.trace_id and context.span_id (strings)")
    attributes = unflatten_lists(dict(_shaped(span.get("attributes"), dict, source, label, "attributes")))
    kind = span.get("span_kind")
    if kind and str(kind).upper() != "UNKNOWN" and OI_KIND not in attributes:
        attributes[OI_KIND] = str(kind).upper()
    status = str(span.get("status_code") or "UNSET").upper()
    if status not in _STATUS:
        raise InputError(source, label, "status_code", f"unknown status {status!r}; Phoenix sends OK, ERROR or UNSET")
    # (Phoenix keeps no resource but the project)
    resource = {"openinference.project.name": project} if project else {}
    return SpanRecord(
        trace_id=str(trace_id).lower(),
        span_id=str(span_id).lower(),
        parent_id=str(span["parent_id"]).lower() if span.get("parent_id") else None,
        name=str(span.get("name") or ""),
        start_ns=_ns(span.get("start_time"), source, label, "start_time"),
        end_ns=_ns(span.get("end_time") or span.get("start_time"), source, label, "end_time"),
        attributes=attributes,
        status=_STATUS[status],
        status_message=str(span.get("status_message") or "") or None,
        events=_events(span, source, label),
        resource=resource,
    )
