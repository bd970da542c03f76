"""From spans to steps: the one mapping every capture path shares.

The live tracer's span processor, the OTLP importer and the HTTP server all see
spans in different shapes (an SDK `ReadableSpan`, OTLP JSON, ...). Each first
turns a span into a small `SpanRecord`; from there `span_to_step` decides what
step (if any) the span is, and `ingest` writes records into a store.

Two attribute vocabularies are understood:

* the OpenTelemetry GenAI semantic conventions (`gen_ai.operation.name`,
  `gen_ai.agent.name`, `gen_ai.input.messages`, ...), which our tracer writes;
* OpenInference (`openinference.span.kind`, `llm.input_messages.N.message.*`,
  `input.value`, `output.value`, `tool.name`, `llm.token_count.*`).

faultlens's own attributes (`faultlens.*`) carry what neither convention has
(step kind, cost, lessons, media, and on export every field a `Trace` needs to
come back exactly).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import StatusCode
from pydantic import ValidationError

from .errors import InputError, from_validation_error
from .model import AgentInfo, GoldLabel, Media, Outcome, Source, Step, StepKind, Task, Trace, Usage

# -- attribute names ---------------------------------------------------------
OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_DESCRIPTION = "gen_ai.agent.description"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
PROVIDER = "gen_ai.provider.name"

STEP_KIND = "faultlens.step.kind"
COST_USD = "faultlens.cost_usd"
LESSONS = "faultlens.lessons"
MEDIA = "faultlens.media"
CONTENT = "faultlens.content"
STEP_METADATA = "faultlens.metadata"
NATIVE_ID = "faultlens.native_id"
STEP_INDEX = "faultlens.step.index"
SPAN_STARTED_AT = "faultlens.span_started_at"
# Markers trace_to_otlp writes when a step had no real span id / clock, so the
# importer can give back None instead of the synthetic value.
ORIGINAL_SPAN_ID = "faultlens.span_id"
ORIGINAL_PARENT_ID = "faultlens.parent_span_id"
NO_START = "faultlens.no_start"
NO_END = "faultlens.no_end"
# Trace header, on the workflow span.
TRACE_TASK = "faultlens.task"
TRACE_AGENTS = "faultlens.agents"
TRACE_OUTCOME = "faultlens.outcome"
TRACE_SOURCE = "faultlens.source"
TRACE_GOLD = "faultlens.gold"
TRACE_METADATA = "faultlens.trace.metadata"
SCHEMA_VERSION_ATTR = "faultlens.schema_version"

OI_KIND = "openinference.span.kind"
OI_SESSION = "session.id"

WORKFLOW, AGENT, CHAT, TOOL, STEP, CHAIN = "invoke_workflow", "invoke_agent", "chat", "execute_tool", "step", "chain"

_OPERATION_ALIASES = {
    "invoke_workflow": WORKFLOW,
    "invoke_agent": AGENT,
    "create_agent": None,
    "chat": CHAT,
    "text_completion": CHAT,
    "generate_content": CHAT,
    "execute_tool": TOOL,
    "embeddings": None,
}
_OPENINFERENCE_KINDS = {"LLM": CHAT, "TOOL": TOOL, "AGENT": AGENT, "CHAIN": CHAIN, "RETRIEVER": TOOL}


@dataclass
class SpanRecord:
    """One finished span, normalised: ids are lowercase hex, times are ns since the epoch."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "unset"  # "unset" | "ok" | "error"
    status_message: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # {name, time_ns, attributes}
    resource: dict[str, Any] = field(default_factory=dict)
    kind: str = "internal"

    @property
    def conversation_id(self) -> str | None:
        value = self.attributes.get(CONVERSATION_ID) or self.attributes.get(OI_SESSION)
        return str(value) if value else None

    @property
    def operation(self) -> str | None:
        """workflow / agent / chat / tool / step / chain, or None for spans that are no action."""
        if STEP_KIND in self.attributes and self.attributes.get(OPERATION) is None:
            return STEP
        op = self.attributes.get(OPERATION)
        if op is not None:
            return _OPERATION_ALIASES.get(str(op), None)
        oi = self.attributes.get(OI_KIND)
        if oi is not None:
            return _OPENINFERENCE_KINDS.get(str(oi).upper())
        head = self.name.split(" ", 1)[0]
        return _OPERATION_ALIASES.get(head) if head in (WORKFLOW, AGENT, CHAT, TOOL) else None


def _ns(value: Any) -> int:
    return int(value) if value is not None else 0


_STATUS_CODES = {StatusCode.ERROR: "error", StatusCode.OK: "ok"}


def _plain_dict(attributes: Any) -> dict[str, Any]:
    """A plain copy of SDK attributes. `dict(...)` on the SDK's read-only view goes
    through the Mapping protocol key by key (~5 µs for ten keys); the view's
    `copy()` reaches `BoundedAttributes.copy`, a C-level dict copy."""
    if not attributes:
        return {}
    copied = attributes.copy() if hasattr(attributes, "copy") else None
    return copied if isinstance(copied, dict) else dict(attributes)


def record_from_readable_span(span: Any) -> SpanRecord:
    """A `SpanRecord` from an OpenTelemetry SDK `ReadableSpan`."""
    ctx = span.get_span_context() if hasattr(span, "get_span_context") else span.context
    parent = span.parent
    status = span.status
    code = _STATUS_CODES.get(status.status_code, "unset")
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        start_ns=_ns(span.start_time),
        end_ns=_ns(span.end_time if span.end_time is not None else span.start_time),
        attributes=_plain_dict(span.attributes),
        status=code,
        status_message=status.description,
        events=[{"name": e.name, "time_ns": _ns(e.timestamp), "attributes": _plain_dict(e.attributes)} for e in span.events],
        resource=_plain_dict(span.resource.attributes) if span.resource is not None else {},
        kind=span.kind.name.lower(),
    )


# -- decoding attribute values -----------------------------------------------
class _Bad(ValueError):
    """A span attribute that cannot be read; turned into InputError by callers."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def maybe_json(value: Any) -> Any:
    """Parse a JSON string when it is one; anything else comes back unchanged."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("null", "true", "false") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text or "x"):
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return value
    return value


def _json_attr(attrs: Mapping[str, Any], name: str) -> Any:
    value = attrs.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise _Bad(name, f"not valid JSON ({exc.msg} at column {exc.colno})") from None


def _flattened(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Rebuild a list of nested dicts from OpenInference/OpenLLMetry-style keys `prefix.N.a.b`."""
    items: dict[int, dict[str, Any]] = {}
    keys = [k for k in attrs if k.startswith(prefix + ".")]
    if not keys:
        return []
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)\.(.+)$")
    for key in keys:
        value = attrs[key]
        m = pattern.match(key)
        if not m:
            continue
        node = items.setdefault(int(m.group(1)), {})
        *path, last = m.group(2).split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return [items[i] for i in sorted(items)]


def _listify(node: Any) -> list[Any]:
    """{'0': {...}, '1': {...}} (from flattened keys) → [{...}, {...}]."""
    if isinstance(node, dict) and node and all(k.isdigit() for k in node):
        return [node[k] for k in sorted(node, key=int)]
    return node if isinstance(node, list) else []


def _openinference_messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference `llm.input_messages.N.message.*` as GenAI-convention messages (role + parts)."""
    messages = []
    for item in _flattened(attrs, prefix):
        msg = item.get("message", item)
        parts: list[dict[str, Any]] = []
        if msg.get("content") is not None:
            parts.append({"type": "text", "content": str(msg["content"])})
        for content in _listify(msg.get("contents")):
            c = content.get("message_content", content)
            if c.get("text") is not None:
                parts.append({"type": "text", "content": str(c["text"])})
            elif c.get("image") is not None:
                parts.append({"type": "uri", "modality": "image", "uri": str(c["image"].get("image", {}).get("url", ""))})
        for call in _listify(msg.get("tool_calls")):
            call = call.get("tool_call", call)
            fn = call.get("function", {})
            parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"), "arguments": maybe_json(fn.get("arguments"))})
        messages.append({"role": msg.get("role", "user"), "parts": parts})
    return messages


def _openllmetry_messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenLLMetry `gen_ai.prompt.N.role/content` and `gen_ai.completion.N.*` as messages."""
    return [{"role": m.get("role", "user"), "parts": [{"type": "text", "content": str(m["content"])}] if m.get("content") is not None else []} for m in _flattened(attrs, prefix)]


_FLATTENED_MESSAGE_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion.")


def messages_of(record: SpanRecord, direction: str) -> list[Any] | None:
    """The span's input or output messages, or None if it records none."""
    attrs = record.attributes
    name = INPUT_MESSAGES if direction == "input" else OUTPUT_MESSAGES
    if name in attrs:
        value = _json_attr(attrs, name)
        return value if isinstance(value, list) else [value]
    # One pass to see whether any flattened message keys exist (most GenAI spans have none)
    # before the per-prefix scans below.
    if not any(k.startswith(_FLATTENED_MESSAGE_PREFIXES) for k in attrs):
        return None
    oi = _openinference_messages(attrs, "llm.input_messages" if direction == "input" else "llm.output_messages")
    if oi:
        return oi
    legacy = _openllmetry_messages(attrs, "gen_ai.prompt" if direction == "input" else "gen_ai.completion")
    return legacy or None


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return json.dumps(part, ensure_ascii=False, default=str)
    kind = part.get("type", "text")
    if kind == "text":
        return str(part.get("content", part.get("text", "")))
    if kind == "tool_call":
        args = part.get("arguments")
        args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
        return f"[tool_call] {part.get('name')}({args})"
    if kind == "tool_call_response":
        response = part.get("response")
        return f"[tool_result] {response if isinstance(response, str) else json.dumps(response, ensure_ascii=False, default=str)}"
    if kind in ("uri", "blob", "image_url"):
        return f"[{part.get('modality', kind)}]"
    return str(part.get("content", part.get("text", "")))


def message_text(message: Any) -> str:
    """The readable text of one message in any of the common shapes (GenAI parts, OpenAI content)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return json.dumps(message, ensure_ascii=False, default=str)
    pieces: list[str] = []
    if "parts" in message:
        pieces = [_part_text(p) for p in message.get("parts") or []]
    else:
        content = message.get("content")
        if isinstance(content, list):
            pieces = [_part_text(p) for p in content]
        elif content is not None:
            pieces = [str(content)]
        for call in message.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            pieces.append(_part_text({"type": "tool_call", "name": fn.get("name"), "arguments": fn.get("arguments")}))
    return "\n".join(p for p in pieces if p)


def messages_text(messages: list[Any] | None) -> str:
    return "\n".join(t for t in (message_text(m) for m in messages or []) if t)


# -- span → step ------------------------------------------------------------
def _kind_of(record: SpanRecord, op: str | None) -> StepKind | None:
    explicit = record.attributes.get(STEP_KIND)
    if explicit is not None:
        try:
            return StepKind(str(explicit))
        except ValueError:
            raise _Bad(STEP_KIND, f"unknown step kind {explicit!r}; expected one of {[k.value for k in StepKind]}") from None
    return {CHAT: StepKind.llm_call, TOOL: StepKind.tool_call, AGENT: StepKind.message}.get(op or "")


def agent_of(record: SpanRecord) -> str | None:
    attrs = record.attributes
    for name in (AGENT_NAME, "agent.name", "graph.node.name"):
        if attrs.get(name):
            return str(attrs[name])
    return None


def _error_of(record: SpanRecord) -> str | None:
    if record.status != "error":
        return None
    if record.status_message:
        return record.status_message
    for event in record.events:
        if event.get("name") == "exception":
            a = event.get("attributes", {})
            return ": ".join(str(x) for x in (a.get("exception.type"), a.get("exception.message")) if x) or "error"
    return str(record.attributes.get("error.type") or "error")


def _seconds(ns: int) -> float:
    return ns / 1e9


def span_to_step(record: SpanRecord, *, source: str = "spans", label: str | int | None = None, agent: str | None = None) -> Step | None:
    """The step a span stands for, or None (workflow spans, chains, HTTP spans, ...).

    `agent` is the fallback agent name (e.g. from an ancestor span) when the
    span names none itself. Bad attribute values raise InputError naming
    `source`, `label` (default: the span id) and the attribute.
    """
    try:
        return _span_to_step(record, agent)
    except _Bad as exc:
        raise InputError(source, label if label is not None else f"span {record.span_id}", exc.field, str(exc)) from None
    except ValidationError as exc:
        raise from_validation_error(source, label if label is not None else f"span {record.span_id}", exc) from None


def _span_to_step(record: SpanRecord, fallback_agent: str | None) -> Step | None:
    attrs = record.attributes
    op = record.operation
    if op in (WORKFLOW, CHAIN, None) and STEP_KIND not in attrs:
        return None
    kind = _kind_of(record, op)
    if kind is None:
        return None

    inputs = messages_of(record, "input")
    outputs = messages_of(record, "output")
    metadata = _json_attr(attrs, STEP_METADATA) or {}
    if not isinstance(metadata, dict):
        raise _Bad(STEP_METADATA, "must be a JSON object")
    metadata = dict(metadata)
    if inputs is not None:
        metadata["input_messages"] = inputs
    if outputs is not None:
        metadata["output_messages"] = outputs

    if CONTENT in attrs:
        content = str(attrs[CONTENT])
    elif outputs is not None:
        content = messages_text(outputs)
    elif attrs.get("output.value") is not None and op != TOOL:
        content = str(attrs["output.value"])
    else:
        content = ""

    error = _error_of(record)
    lessons = attrs.get(LESSONS) or []
    if isinstance(lessons, str):
        lessons = maybe_json(lessons)
        lessons = lessons if isinstance(lessons, list) else [lessons]
    media_raw = _json_attr(attrs, MEDIA) or []
    if not isinstance(media_raw, list):
        raise _Bad(MEDIA, "must be a JSON list of media objects")
    try:
        media = [Media.model_validate(m) for m in media_raw]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise _Bad(MEDIA, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None

    # An agent span is a container: it is a step only when it says something
    # itself (its output, an error, lessons or media it was shown).
    if op == AGENT and STEP_KIND not in attrs and not (content or error or lessons or media):
        return None

    tool_name = tool_arguments = tool_result = None
    if kind in (StepKind.tool_call, StepKind.tool_result) or op == TOOL:
        tool_name = attrs.get(TOOL_NAME) or attrs.get("tool.name") or (record.name.split(" ", 1)[1] if record.name.startswith(TOOL + " ") else record.name)
        raw_args = attrs.get(TOOL_ARGUMENTS, attrs.get("tool.parameters", attrs.get("input.value")))
        tool_arguments = maybe_json(raw_args)
        raw_result = attrs.get(TOOL_RESULT, attrs.get("output.value"))
        tool_result = maybe_json(raw_result)

    usage = None
    token_in = attrs.get(INPUT_TOKENS, attrs.get("llm.token_count.prompt"))
    token_out = attrs.get(OUTPUT_TOKENS, attrs.get("llm.token_count.completion"))
    cost = attrs.get(COST_USD)
    if token_in is not None or token_out is not None or cost is not None:
        try:
            usage = Usage(input_tokens=int(token_in or 0), output_tokens=int(token_out or 0), cost_usd=float(cost or 0.0))
        except (TypeError, ValueError):
            raise _Bad(INPUT_TOKENS if token_in is not None else COST_USD, "token counts must be integers and cost a number") from None

    model = attrs.get(RESPONSE_MODEL) or attrs.get(REQUEST_MODEL) or attrs.get("llm.model_name")
    started_ns = record.start_ns
    started_at = None if attrs.get(NO_START) else _seconds(started_ns)
    ended_at = None if attrs.get(NO_END) else _seconds(record.end_ns)
    if op == AGENT:
        # What an agent says is said when it returns: place the step at the
        # span's end, after the steps of its own children.
        metadata.setdefault("span_started_at", started_at)
        started_at = ended_at
    span_id = attrs[ORIGINAL_SPAN_ID] or None if ORIGINAL_SPAN_ID in attrs else record.span_id
    parent_id = attrs[ORIGINAL_PARENT_ID] or None if ORIGINAL_PARENT_ID in attrs else record.parent_id

    return Step(
        index=0,
        agent=agent_of(record) or fallback_agent or str(record.resource.get("service.name") or "agent"),
        kind=kind,
        content=content,
        media=media,
        tool_name=str(tool_name) if tool_name is not None else None,
        tool_arguments=tool_arguments,
        tool_result=tool_result,
        error=error,
        model=str(model) if model else None,
        native_id=str(attrs[NATIVE_ID]) if attrs.get(NATIVE_ID) is not None else None,
        span_id=span_id,
        parent_span_id=parent_id,
        started_at=started_at,
        ended_at=ended_at,
        usage=usage,
        lessons=[str(x) for x in lessons],
        metadata=metadata,
    )


# -- trace headers -----------------------------------------------------------
def _model_attr(record: SpanRecord, name: str, model: type, source: str, label: str | int | None) -> Any:
    try:
        value = _json_attr(record.attributes, name)
    except _Bad as exc:
        raise InputError(source, label, exc.field, str(exc)) from None
    if value is None:
        return None
    try:
        if model is list:
            if not isinstance(value, list):
                raise InputError(source, label, name, "must be a JSON list")
            return [AgentInfo.model_validate(a) for a in value]
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(source, label, name + "." + ".".join(str(p) for p in first["loc"]), first["msg"]) from None


def is_header_span(record: SpanRecord) -> bool:
    return record.operation == WORKFLOW or TRACE_TASK in record.attributes


def header_from_record(record: SpanRecord, trace_id: str, *, source: str = "spans", label: str | int | None = None) -> Trace:
    """The trace header (task, agents, outcome, source, ...) a workflow/root span describes."""
    label = label if label is not None else f"span {record.span_id}"
    attrs = record.attributes
    task = _model_attr(record, TRACE_TASK, Task, source, label)
    if task is None:
        query = messages_text([m for m in (messages_of(record, "input") or []) if not isinstance(m, dict) or m.get("role", "user") == "user"])
        task = Task(query=query or str(attrs.get("input.value") or ""))
    outcome = _model_attr(record, TRACE_OUTCOME, Outcome, source, label)
    if outcome is None and record.status == "error":
        outcome = Outcome(success=False, evaluator="span status", detail=_error_of(record))
    src = _model_attr(record, TRACE_SOURCE, Source, source, label) or default_source(record)
    gold = _model_attr(record, TRACE_GOLD, GoldLabel, source, label)
    agents = _model_attr(record, TRACE_AGENTS, list, source, label) or []
    try:
        metadata = _json_attr(attrs, TRACE_METADATA) or {}
    except _Bad as exc:
        raise InputError(source, label, exc.field, str(exc)) from None
    return Trace(
        id=trace_id,
        schema_version=str(attrs.get(SCHEMA_VERSION_ATTR) or "1"),
        task=task,
        agents=agents,
        outcome=outcome,
        source=src,
        gold=gold,
        created_at=_seconds(record.start_ns),
        metadata=metadata,
    )


def default_source(record: SpanRecord) -> Source:
    openinference = any(k.startswith(("openinference.", "llm.", "input.value")) for k in record.attributes)
    framework = record.resource.get("service.name") or "otel"
    return Source(framework=str(framework), format="openinference" if openinference else "otlp")


def placeholder_header(trace_id: str, records: list[SpanRecord]) -> Trace:
    """A header for spans whose workflow/root span has not arrived (yet)."""
    first = min(records, key=lambda r: r.start_ns)
    return Trace(id=trace_id, task=Task(query=""), source=default_source(first), created_at=_seconds(first.start_ns))


# -- grouping ----------------------------------------------------------------
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


def _ancestor_agents(records: list[SpanRecord]) -> dict[str, str | None]:
    """For each span, the nearest ancestor agent (for spans that name none themselves)."""
    by_id = {r.span_id: r for r in records}
    found: dict[str, str | None] = {}
    for r in records:
        seen = set()
        parent = by_id.get(r.parent_id or "")
        name = None
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            name = agent_of(parent) if parent.operation in (AGENT, CHAT, TOOL, STEP, CHAIN) else None
            if name:
                break
            parent = by_id.get(parent.parent_id or "")
        found[r.span_id] = name
    return found


def _root(records: list[SpanRecord]) -> SpanRecord | None:
    ids = {r.span_id for r in records}
    headers = [r for r in records if is_header_span(r)]
    if headers:
        return min(headers, key=lambda r: r.start_ns)
    roots = [r for r in records if r.parent_id is None or r.parent_id not in ids]
    return min(roots, key=lambda r: r.start_ns) if len(roots) == 1 and roots[0].parent_id is None else None


def _steps_of(records: list[SpanRecord], source: str, labels: Mapping[int, str | int] | None) -> list[tuple[SpanRecord, Step]]:
    agents = _ancestor_agents(records)
    out = []
    for r in records:
        label = labels.get(id(r)) if labels else None
        step = span_to_step(r, source=source, label=label, agent=agents.get(r.span_id))
        if step is not None:
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
        pairs = sorted(_steps_of(group, source, labels), key=_order_key)
        steps = [step.model_copy(update={"index": i}) for i, (_, step) in enumerate(pairs)]
        try:
            traces.append(Trace.model_validate({**header.model_dump(), "steps": [s.model_dump() for s in steps]}))
        except ValidationError as exc:
            raise from_validation_error(source, label if label is not None else f"trace {trace_id}", exc) from None
    return traces


@dataclass
class IngestPlan:
    """What `ingest` will write, worked out without writing: per trace, its header (or None) and its steps."""

    traces: list[tuple[str, list[SpanRecord], Trace | None, list[Any]]]

    @property
    def trace_ids(self) -> list[str]:
        return [trace_id for trace_id, *_ in self.traces]


def plan_ingest(store: Any, records: Iterable[SpanRecord], *, source: str = "spans") -> IngestPlan:
    """Map spans to headers and steps, and serialise the steps for `store` (no reads, no writes).

    Raises InputError on the first bad span. This is the costly part of
    ingest; kept apart so a server can do it outside its write lock.
    """
    plans = []
    for trace_id, group in group_by_trace(records).items():
        root = next((r for r in group if is_header_span(r)), None)
        if root is None:
            root = next((r for r in group if r.parent_id is None and r.operation in (AGENT, CHAIN)), None)
        header = header_from_record(root, trace_id, source=source) if root is not None else None
        steps = [step for _, step in _steps_of(group, source, None)]
        plans.append((trace_id, group, header, store.prepare_steps(steps)))
    return IngestPlan(plans)


def write_ingest(store: Any, plan: IngestPlan) -> list[str]:
    """Write an `IngestPlan` in one transaction: all of it lands, or none. Returns the trace ids touched."""
    with store.transaction():
        for trace_id, group, header, steps in plan.traces:
            if header is not None:
                if header.outcome is None and store.has_trace(trace_id):
                    # Only the outcome: reading the whole run here would make ingest cost grow with the run.
                    header.outcome = store.get_outcome(trace_id)
                store.begin_trace(header)
            elif not store.has_trace(trace_id):
                store.begin_trace(placeholder_header(trace_id, group))
            store.add_steps(trace_id, steps)
    return plan.trace_ids


def ingest(store: Any, records: Iterable[SpanRecord], *, source: str = "spans") -> list[str]:
    """Write spans into a store as they arrive (live tracer, HTTP server).

    Each record becomes a step (idempotent by span id). A trace's header is
    written from its workflow/root span when that arrives, and from a
    placeholder before then, so steps are never orphaned and survive a crash
    mid-run. Every record is converted before anything is written: a bad span
    raises InputError and the batch writes nothing. The writes are one
    transaction (`store.transaction()`), so a process killed mid-batch leaves
    none of it either. Cost is linear in the batch, whatever the size of the
    runs it adds to. Returns the trace ids touched.
    """
    return write_ingest(store, plan_ingest(store, records, source=source))
