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

Frameworks traced with OpenInference name the agent only on their agent spans,
so a step's agent is that of the nearest span above it that names one
(`resolve_agent` over `SpanLink`s), and the run's agents and task come from
the tree too (`run_agents`, `run_task`). `ingest` keeps every span's link in
the store so that this works when children arrive before their parents, as
exporters send them (docs/capture-frameworks.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import SpanKind, StatusCode
from pydantic import ValidationError

from ..errors import FieldError, InputError, from_validation_error
from ..model.trace import AgentInfo, GoldLabel, Media, Outcome, Source, Step, StepKind, StepRole, Task, Trace, Usage, default_role
from ..store.step_json import PreparedStep, json_text, stored_fields
from ..store.protocol import TraceNotFound

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
STEP_ROLE = "faultlens.step.role"
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
AG2_RECIPIENT = "ag2.recipient.name"
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
_SPAN_KINDS = {kind: kind.name.lower() for kind in SpanKind}


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
        kind=_SPAN_KINDS.get(span.kind) or span.kind.name.lower(),
    )


# -- decoding attribute values -----------------------------------------------
def maybe_json(value: Any) -> Any:
    """Parse a JSON string when it is one; anything else comes back unchanged."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("null", "true", "false") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text or "x"):
            # json.loads(text), without its whitespace scans: `text` has none at either end.
            try:
                parsed, end = _JSON_DECODER.raw_decode(text)
            except json.JSONDecodeError:
                return value
            return parsed if end == len(text) else value
    return value


_JSON_DECODER = json.JSONDecoder()


def _json_attr(attrs: Mapping[str, Any], name: str) -> Any:
    value = attrs.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise FieldError(name, f"not valid JSON ({exc.msg} at column {exc.colno})") from None


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
            if not isinstance(node, dict):  # `a.0.message` and `a.0.message.role` both given
                raise FieldError(key, f"{key} clashes with another attribute that gives {prefix}.{m.group(1)}.{part} a plain value")
        if isinstance(node.get(last), dict):
            raise FieldError(key, f"{key} clashes with attributes nested under it")
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


def messages_of(record: SpanRecord, direction: str, *, flattened: bool | None = None) -> list[Any] | None:
    """The span's input or output messages, or None if it records none.

    flattened: whether the span has flattened message keys (`has_flattened_messages`), if the caller knows.
    """
    attrs = record.attributes
    name = INPUT_MESSAGES if direction == "input" else OUTPUT_MESSAGES
    if name in attrs:
        value = _json_attr(attrs, name)
        messages = value if isinstance(value, list) else [value]
        _check_messages(messages, name)
        return messages
    if not (has_flattened_messages(attrs) if flattened is None else flattened):
        return None
    oi = _openinference_messages(attrs, "llm.input_messages" if direction == "input" else "llm.output_messages")
    if oi:
        return oi
    legacy = _openllmetry_messages(attrs, "gen_ai.prompt" if direction == "input" else "gen_ai.completion")
    return legacy or None


def has_flattened_messages(attrs: Mapping[str, Any]) -> bool:
    """Whether any OpenInference/OpenLLMetry flattened message keys exist: one pass (most GenAI spans have none)."""
    return any(k.startswith(_FLATTENED_MESSAGE_PREFIXES) for k in attrs)


def _check_messages(messages: list[Any], name: str) -> None:
    """The shape `message_text` reads: each message a string or an object whose parts/tool_calls are lists of objects."""
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        for key in ("parts", "tool_calls"):
            items = message.get(key)
            if items is not None and not isinstance(items, list):
                raise FieldError(name, f"message {i}: {key} must be a list, not {type(items).__name__}")
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict) or not isinstance(call.get("function", {}), dict):
                raise FieldError(name, f"message {i}: each tool call must be an object with a 'function' object")


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
        if args is None:
            return f"[tool_call] {part.get('name')}()"
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
# (a dict look-up, where calling the enum costs several times as much on every span)
_STEP_KINDS = {k.value: k for k in StepKind}
_STEP_ROLES = {r.value: r for r in StepRole}


def _kind_of(record: SpanRecord, op: str | None) -> StepKind | None:
    explicit = record.attributes.get(STEP_KIND)
    if explicit is not None:
        try:
            return _STEP_KINDS[str(explicit)]
        except KeyError:
            raise FieldError(STEP_KIND, f"unknown step kind {explicit!r}; expected one of {[k.value for k in StepKind]}") from None
    return {CHAT: StepKind.llm_call, TOOL: StepKind.tool_call, AGENT: StepKind.message, CHAIN: StepKind.tool_result}.get(op or "")


def _role_of(record: SpanRecord, op: str | None, kind: StepKind) -> StepRole:
    """A tool span (execute_tool, OpenInference TOOL/RETRIEVER) is what the tool did: evidence about
    the decision that called it, not a decision itself; `faultlens.step.role` overrides."""
    explicit = record.attributes.get(STEP_ROLE)
    if explicit is not None:
        try:
            return _STEP_ROLES[str(explicit)]
        except KeyError:
            raise FieldError(STEP_ROLE, f"unknown step role {explicit!r}; expected one of {[r.value for r in StepRole]}") from None
    return StepRole.tool_result if op == TOOL else default_role(kind)


def _plain_output(record: SpanRecord) -> str | None:
    """A span's `output.value` when it is text a person reads, not a JSON document."""
    value = record.attributes.get("output.value")
    if value is None or str(record.attributes.get("output.mime_type", "")).endswith("json"):
        return None
    text = str(value).strip()
    return text if text and isinstance(maybe_json(text), str) else None


def _tool_arguments(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(arguments, declared parameters) of a TOOL span.

    `tool.parameters` holds the call's arguments in some instrumentations
    (AutoGen) and the tool's schema in others (openai-agents, smolagents), so
    `input.value` is preferred. smolagents wraps a call as
    `{"args": [...], "kwargs": {...}}`; positional arguments are named from
    the parameters when they are known.
    """
    parameters = maybe_json(attrs.get("tool.parameters"))
    raw = attrs.get(TOOL_ARGUMENTS, attrs.get("input.value", attrs.get("tool.parameters")))
    arguments = maybe_json(raw)
    if isinstance(arguments, dict) and "kwargs" in arguments and set(arguments) <= {"args", "kwargs", "sanitize_inputs_outputs"}:
        positional = list(arguments.get("args") or [])
        named = dict(arguments.get("kwargs") or {})
        names = [n for n in parameters if n not in named] if isinstance(parameters, dict) else []
        for name in names[: len(positional)]:
            named[name] = positional.pop(0)
        arguments = {**named, **({"args": positional} if positional else {})}
    return arguments, parameters


# AG2 selects the next speaker through two helper agents of its own; what they
# say is the chat manager's choice, so their spans belong to the manager above them.
_HELPER_AGENTS = frozenset({"checking_agent", "speaker_selection_agent"})
# smolagents names its agent spans `<agent name>.run` (AG2 and AutoGen use
# `<agent name>.<method>` too, but also put the name in an attribute).
_METHOD_SPAN = re.compile(r"^([A-Za-z_][\w-]*)\.[A-Za-z_]\w*$")
# AutoGen AgentChat's group chat managers: their model calls sit directly under
# the team's `<Team>.run_stream` span, with no agent span of their own.
_TEAM_MANAGERS = {"MagenticOneGroupChat": "MagenticOneOrchestrator"}


def _named_agent(record: SpanRecord) -> str | None:
    """The agent name a span carries, as written (helpers included)."""
    attrs = record.attributes
    for name in (AGENT_NAME, "agent.name", "graph.node.name"):
        if attrs.get(name):
            return str(attrs[name])
    op = record.operation
    if op == AGENT:
        if attrs.get("graph.node.id"):
            return str(attrs["graph.node.id"])
        m = _METHOD_SPAN.match(record.name)
        if m:
            return m.group(1)
    if op == CHAIN and attrs.get("participant_names"):
        team = record.name.split(".", 1)[0]
        return _TEAM_MANAGERS.get(team, f"{team}Manager")
    return None


def agent_of(record: SpanRecord) -> str | None:
    """The agent a span names itself (None: its agent is its nearest ancestor's)."""
    name = _named_agent(record)
    return None if name in _HELPER_AGENTS else name


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
    fields = step_fields(record, source=source, label=label, agent=agent)
    return None if fields is None else Step(**fields)


def step_fields(record: SpanRecord, *, source: str = "spans", label: str | int | None = None, agent: str | None = None) -> dict[str, Any] | None:
    """What `span_to_step` gives, as the field values the `Step` would hold, without building the model.

    What ingest stores (`step_json.stored_fields`) needs only the values;
    building the model costs more than the few checks it would make on them.
    The values the mapping itself produces have their field's type by
    construction; those an attribute gives as it is (span ids, a status
    message, metadata keys) are checked here (`valid_step_fields`), and
    anything else goes through `Step` after all: the same errors as
    `span_to_step`, or the values pydantic makes of them.
    """
    # try/except rather than a context manager: this runs for every span, and a generator-based
    # context manager costs more than the rest of the call's overhead together.
    try:
        fields = _step_fields(record, agent)
        if fields is None or valid_step_fields(fields):
            return fields
        return dict(Step(**fields).__dict__)
    except InputError:
        raise
    except (FieldError, ValidationError, TypeError, AttributeError, KeyError, ValueError) as exc:
        raise _read_error(exc, source, label if label is not None else f"span {record.span_id}", "a step") from None


def valid_step_fields(fields: Mapping[str, Any]) -> bool:
    """Whether `Step` takes these values (from `_step_fields`) as they are: those an attribute or status can give as any type."""
    return (
        type(fields["agent"]) is str
        and type(fields["content"]) is str
        and all(value is None or type(value) is str for value in (fields["span_id"], fields["parent_span_id"], fields["error"]))
        and all(type(key) is str for key in fields["metadata"])
    )


def _read_error(exc: Exception, source: str, where: str | int, what: str) -> InputError:
    if isinstance(exc, FieldError):
        return InputError(source, where, exc.field, str(exc))
    if isinstance(exc, ValidationError):
        return from_validation_error(source, where, exc)
    # Attribute values of a shape no reader expects (e.g. OpenInference
    # keys that clash): still the client's span, so still a named input error.
    return InputError(source, where, "attributes", f"cannot be read as {what} ({type(exc).__name__}: {exc})")


def _step_content(attrs: Mapping[str, Any], outputs: list[dict[str, Any]] | None, observation: str | None) -> str:
    """What a person reads of a step: faultlens.content, else the output messages, the observation, or output.value."""
    if CONTENT in attrs:
        return str(attrs[CONTENT])
    if outputs is not None:
        return messages_text(outputs)
    if observation is not None:
        return observation
    if attrs.get("output.value") is not None:
        return str(attrs["output.value"])
    return ""


def _lessons_attr(attrs: Mapping[str, Any]) -> list[Any]:
    lessons = attrs.get(LESSONS) or []
    if isinstance(lessons, str):
        lessons = maybe_json(lessons)
        lessons = lessons if isinstance(lessons, list) else [lessons]
    return list(lessons)


def _media_attr(attrs: Mapping[str, Any]) -> list[Media]:
    media_raw = _json_attr(attrs, MEDIA) or []
    if not isinstance(media_raw, list):
        raise FieldError(MEDIA, "must be a JSON list of media objects")
    try:
        return [Media.model_validate(m) for m in media_raw]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise FieldError(MEDIA, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def _usage_attr(attrs: Mapping[str, Any]) -> Usage | None:
    token_in = attrs.get(INPUT_TOKENS, attrs.get("llm.token_count.prompt"))
    token_out = attrs.get(OUTPUT_TOKENS, attrs.get("llm.token_count.completion"))
    cost = attrs.get(COST_USD)
    if token_in is None and token_out is None and cost is None:
        return None
    try:
        return Usage(input_tokens=int(token_in or 0), output_tokens=int(token_out or 0), cost_usd=float(cost or 0.0))
    except (TypeError, ValueError, OverflowError):  # (an infinite token count: OverflowError)
        raise FieldError(INPUT_TOKENS if token_in is not None else COST_USD, "token counts must be integers and cost a number") from None


def _step_fields(record: SpanRecord, fallback_agent: str | None) -> dict[str, Any] | None:
    attrs = record.attributes
    op = record.operation
    if op in (WORKFLOW, None) and STEP_KIND not in attrs:
        return None
    # A chain only groups (openai-agents' `turn`, `Agent workflow`), unless it
    # reports what happened in text: smolagents' `Step N` holds the observation
    # of the code it ran, which no other span records.
    observation = _plain_output(record) if op == CHAIN else None
    if op == CHAIN and STEP_KIND not in attrs and observation is None:
        return None
    kind = _kind_of(record, op)
    if kind is None:
        return None

    flattened = has_flattened_messages(attrs)
    inputs = messages_of(record, "input", flattened=flattened)
    outputs = messages_of(record, "output", flattened=flattened)
    metadata = _json_attr(attrs, STEP_METADATA) or {}
    if not isinstance(metadata, dict):
        raise FieldError(STEP_METADATA, "must be a JSON object")
    metadata = dict(metadata)
    if inputs is not None:
        metadata["input_messages"] = inputs
    if outputs is not None:
        metadata["output_messages"] = outputs

    content = _step_content(attrs, outputs, observation)
    error = _error_of(record)
    lessons = _lessons_attr(attrs)
    media = _media_attr(attrs)

    # An agent span is a container: it is a step only when it says something
    # itself (its output, an error, lessons or media it was shown), and only
    # when it is some agent's (openai-agents' root `Agent workflow` names none).
    # AG2's `<sender>.initiate_chat` (the one with `ag2.recipient.name`) is a
    # whole chat: its output is the chat's last message, which another agent said.
    if op == AGENT and STEP_KIND not in attrs and (
        not (content or error or lessons or media) or _named_agent(record) is None or (AG2_RECIPIENT in attrs and not error)
    ):
        return None

    tool_name = tool_arguments = tool_result = None
    if (kind in (StepKind.tool_call, StepKind.tool_result) and observation is None) or op == TOOL:
        tool_name = attrs.get(TOOL_NAME) or attrs.get("tool.name") or (record.name.split(" ", 1)[1] if record.name.startswith(TOOL + " ") else record.name)
        tool_arguments, parameters = _tool_arguments(attrs)
        if parameters is not None and parameters != tool_arguments:
            metadata.setdefault("tool_parameters", parameters)
        raw_result = attrs.get(TOOL_RESULT, attrs.get("output.value"))
        tool_result = maybe_json(raw_result)
        if not content and tool_result is not None and CONTENT not in attrs:
            # What a tool returned is what a person reads of a tool step.
            content = tool_result if isinstance(tool_result, str) else json_text(tool_result)

    usage = _usage_attr(attrs)

    model = attrs.get(RESPONSE_MODEL) or attrs.get(REQUEST_MODEL) or attrs.get("llm.model_name")
    started_ns = record.start_ns
    started_at = None if attrs.get(NO_START) else _seconds(started_ns)
    ended_at = None if attrs.get(NO_END) else _seconds(record.end_ns)
    if op == AGENT or observation is not None:
        # What an agent says (or a chain observes) is said when it returns:
        # place the step at the span's end, after the steps of its own children.
        metadata.setdefault("span_started_at", started_at)
        started_at = ended_at
    span_id = attrs[ORIGINAL_SPAN_ID] or None if ORIGINAL_SPAN_ID in attrs else record.span_id
    parent_id = attrs[ORIGINAL_PARENT_ID] or None if ORIGINAL_PARENT_ID in attrs else record.parent_id

    return {
        "index": 0,
        "agent": agent_of(record) or fallback_agent or str(record.resource.get("service.name") or "agent"),
        "kind": kind,
        "role": _role_of(record, op, kind),
        "content": content,
        "media": media,
        "tool_name": str(tool_name) if tool_name is not None else None,
        "tool_arguments": tool_arguments,
        "tool_result": tool_result,
        "error": error,
        "model": str(model) if model else None,
        "native_id": str(attrs[NATIVE_ID]) if attrs.get(NATIVE_ID) is not None else None,
        "span_id": span_id,
        "parent_span_id": parent_id,
        "started_at": started_at,
        "ended_at": ended_at,
        "usage": usage,
        "lessons": [str(x) for x in lessons],
        "metadata": metadata,
    }


# -- trace headers -----------------------------------------------------------
def _model_attr(record: SpanRecord, name: str, model: Any, source: str, label: str | int | None) -> Any:
    """Attribute `name` read as JSON into `model` (a pydantic model, or `list` for a list of agents)."""
    try:
        value = _json_attr(record.attributes, name)
    except FieldError as exc:
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
        raise InputError(source, label, ".".join([name, *(str(p) for p in first["loc"])]), first["msg"]) from None


def is_header_span(record: SpanRecord) -> bool:
    return record.operation == WORKFLOW or TRACE_TASK in record.attributes


def header_from_record(record: SpanRecord, trace_id: str, *, source: str = "spans", label: str | int | None = None) -> Trace:
    """The trace header (task, agents, outcome, source, ...) a workflow/root span describes.

    Raises InputError naming the span and attribute for any value it cannot read.
    """
    where = label if label is not None else f"span {record.span_id}"
    try:
        return _header_from_record(record, trace_id, source=source, label=label)
    except InputError:
        raise
    except FieldError as exc:
        raise InputError(source, where, exc.field, str(exc)) from None
    except ValidationError as exc:
        raise from_validation_error(source, where, exc) from None
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise InputError(source, where, "attributes", f"cannot be read as a trace header ({type(exc).__name__}: {exc})") from None


def _header_from_record(record: SpanRecord, trace_id: str, *, source: str, label: str | int | None) -> Trace:
    label = label if label is not None else f"span {record.span_id}"
    attrs = record.attributes
    task = _model_attr(record, TRACE_TASK, Task, source, label)
    if task is None:
        query = messages_text([m for m in (messages_of(record, "input") or []) if not isinstance(m, dict) or m.get("role", "user") == "user"])
        value = attrs.get("input.value")
        task = Task(query=query or (_input_value_text(value) or str(value) if value is not None else ""))
    outcome = _model_attr(record, TRACE_OUTCOME, Outcome, source, label)
    if outcome is None and record.status == "error":
        outcome = Outcome(success=False, evaluator="span status", detail=_error_of(record))
    src = _model_attr(record, TRACE_SOURCE, Source, source, label) or default_source(record)
    gold = _model_attr(record, TRACE_GOLD, GoldLabel, source, label)
    agents = _model_attr(record, TRACE_AGENTS, list, source, label) or []
    try:
        metadata = _json_attr(attrs, TRACE_METADATA) or {}
    except FieldError as exc:
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


@dataclass
class _RunPlan:
    """One run's share of an `IngestPlan`."""

    trace_id: str
    group: list[SpanRecord]
    root: SpanRecord | None
    header: Trace | None
    links: dict[str, SpanLink]
    # (record, step, missing, prepared): the step as its field values (`step_fields`); `missing` is the first
    # ancestor outside the batch the agent walk stopped at (None: resolved within the batch, or no agent above).
    steps: list[tuple[SpanRecord, dict[str, Any], str | None, PreparedStep]]
    # What the store held of the run when `write_ingest` began it: (stored at all, its outcome).
    before: tuple[bool, Outcome | None] = (False, None)


@dataclass
class IngestPlan:
    """What `ingest` will write, worked out without touching the store: per run, its header (or None), tree links and steps."""

    runs: list[_RunPlan]

    @property
    def trace_ids(self) -> list[str]:
        return [run.trace_id for run in self.runs]


def plan_ingest(store: Any, records: Iterable[SpanRecord], *, source: str = "spans") -> IngestPlan:
    """Map spans to headers, tree links and steps, and serialise the steps for storage (no reads, no writes).

    (`store` is not consulted: every store keeps a step as `step_json` writes it.)

    Raises InputError on the first bad span. This is the costly part of
    ingest; kept apart so a server can do it outside its write lock. A step's
    agent is resolved here as far as the batch's own spans go; `write_ingest`
    finishes the walk through the stored tree for the few that leave the batch.
    """
    runs = []
    for trace_id, group in group_by_trace(records).items():
        root = next((r for r in group if is_header_span(r)), None)
        if root is None:
            root = next((r for r in group if r.parent_id is None and r.operation in (AGENT, CHAIN)), None)
        header = header_from_record(root, trace_id, source=source) if root is not None else None
        links = {r.span_id: _read_link(r, source) for r in group}
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
            # handled when its tool arrives, see _write_run).
            if r.operation == CHAIN and repeats_a_tool(r, children.get(r.span_id, [])):
                continue
            agent, missing = resolve_agent(r.span_id, links.get)
            if agent is not None:
                step["agent"] = agent
            steps.append((r, step, missing))
        runs.append(_RunPlan(trace_id, group, root, header, links, [(r, step, missing, stored_fields(step)) for r, step, missing in steps]))
    return IngestPlan(runs)


def write_ingest(store: Any, plan: IngestPlan) -> list[str]:
    """Write an `IngestPlan` in one store transaction (`store.batch`): all of it lands, or none. Returns the trace ids touched."""
    with store.batch(plan.trace_ids):
        for run in plan.runs:
            trace_id, header = run.trace_id, run.header
            # One look-up answers whether the run is stored and its outcome (not the whole
            # run: reading it here would make ingest cost grow with the run).
            stored, outcome = run.before = _stored_outcome(store, trace_id)
            if header is not None:
                if header.outcome is None and stored:
                    header.outcome = outcome
                store.begin_trace(header)
            elif not stored:
                store.begin_trace(placeholder_header(trace_id, run.group))
            _write_run(store, run, new_run=not stored)
    return plan.trace_ids


def _stored_outcome(store: Any, trace_id: str) -> tuple[bool, Outcome | None]:
    try:
        return True, store.get_outcome(trace_id)
    except TraceNotFound:
        return False, None


def ingest(store: Any, records: Iterable[SpanRecord], *, source: str = "spans") -> list[str]:
    """Write spans into a store as they arrive (live tracer, HTTP server).

    Each record becomes a step (idempotent by span id). A trace's header is
    written from its workflow/root span when that arrives, and from a
    placeholder before then, so steps are never orphaned and survive a crash
    mid-run. Every record is converted before anything is written: a bad span
    raises InputError and the batch writes nothing. The writes are one
    transaction (`store.batch()`), so a process killed mid-batch leaves none
    of it either. Cost is linear in the batch, whatever the size of the runs
    it adds to. Returns the trace ids touched.

    Exporters send each span when it ends, children before their parents, so
    a step often arrives before the agent span it belongs to. Every span's
    place in the tree is kept (`store.save_span_links`); a step whose agent
    is not known yet is stored with the service's name and marked as waiting
    on the first missing ancestor, and is given its agent when that ancestor
    arrives (see docs/capture-frameworks.md).
    """
    return write_ingest(store, plan_ingest(store, records, source=source))


def _write_run(store: Any, run: _RunPlan, *, new_run: bool = False) -> None:
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
                step["agent"] = agent
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


def _fill_run_header(store: Any, run: _RunPlan) -> None:
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


def _may_change_run_agents(store: Any, trace_id: str, links: dict[str, SpanLink]) -> bool:
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


# -- agent identity from the span tree -----------------------------------------
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

    def row(self, waiting_on: str | None = None) -> dict[str, Any]:
        describes = {"agents": [a.model_dump(mode="json") for a in self.agents], "explicit": self.explicit} if self.agents or self.explicit else None
        # The schema accepts times up to 2**64 ns; the column is a signed 64-bit integer, and only order matters.
        start_ns = None if self.start_ns is None else min(self.start_ns, _MAX_INT64)
        return {"span_id": self.span_id, "parent_id": self.parent_id, "start_ns": start_ns, "agent": self.agent,
                "describes": json.dumps(describes, sort_keys=True) if describes else None, "task": self.task, "output": self.output,
                "waiting_on": waiting_on}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SpanLink:
        describes = json.loads(row["describes"]) if row.get("describes") else {}
        return cls(span_id=row["span_id"], parent_id=row.get("parent_id"), start_ns=int(row.get("start_ns") or 0), agent=row.get("agent"),
                   agents=tuple(AgentInfo.model_validate(a) for a in describes.get("agents", [])), explicit=bool(describes.get("explicit")), task=row.get("task"), output=row.get("output"))


def _listed(value: Any) -> list[str]:
    value = maybe_json(value)
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)] if value else []


def _described_agents(record: SpanRecord, own: str | None) -> tuple[list[AgentInfo], bool]:
    """The agents a span describes, and whether that is the run's whole list (faultlens.agents). own: `agent_of(record)`."""
    attrs = record.attributes
    if TRACE_AGENTS in attrs:
        try:
            value = _json_attr(attrs, TRACE_AGENTS)
            return [AgentInfo.model_validate(a) for a in value], True
        except (FieldError, ValidationError, TypeError):
            return [], True  # header_from_record reports the bad value
    found: list[AgentInfo] = []
    if own is not None and attrs.get(AGENT_DESCRIPTION):
        # (an agent's name alone is in SpanLink.agent)
        found.append(AgentInfo(name=own, description=str(attrs[AGENT_DESCRIPTION])))
    # smolagents lists the managed agents on the manager's span.
    for managed in _flattened(attrs, "smolagents.managed_agents"):
        if managed.get("name"):
            found.append(AgentInfo(name=str(managed["name"]), description=str(managed.get("description") or "")))
    # AutoGen AgentChat lists a team's participants on its run_stream span.
    if "participant_names" not in attrs:
        return found, False
    names, descriptions = _listed(attrs.get("participant_names")), _listed(attrs.get("participant_descriptions"))
    for i, name in enumerate(names):
        found.append(AgentInfo(name=name, description=descriptions[i] if i < len(descriptions) and descriptions[i] != "None" else ""))
    return found, False


def _first_user_text(record: SpanRecord) -> str | None:
    for message in messages_of(record, "input") or []:
        if not isinstance(message, dict) or message.get("role", "user") == "user":
            return message_text(message) or None
    value = record.attributes.get("input.value")
    return _input_value_text(value) if value is not None else None


# Keys under which frameworks put the request in a JSON `input.value`
# (smolagents and AutoGen: `task`; AG2: `message`).
_INPUT_KEYS = ("task", "message", "query", "question", "input", "prompt", "content")


def _input_value_text(value: Any) -> str | None:
    """The request an `input.value` holds: plain text, or the text under a known key / in the first user message."""
    parsed = maybe_json(value)
    if isinstance(parsed, str):
        return parsed.strip() or None
    if isinstance(parsed, dict):
        if parsed.get("role") is not None and parsed.get("content") is not None:
            return message_text(parsed) or None
        for key in _INPUT_KEYS:
            found = parsed.get(key)
            if isinstance(found, str) and found.strip():
                return found.strip()
            if isinstance(found, (dict, list)) and (text := _input_value_text(json.dumps(found))):
                return text
        return None
    if isinstance(parsed, list):
        for item in parsed:
            if isinstance(item, dict) and item.get("role", "user") == "user":
                return message_text(item) or None
            if isinstance(item, str):
                return item
    return None


def _read_link(record: SpanRecord, source: str) -> SpanLink:
    # try/except, as in span_to_step: this runs for every span.
    try:
        return link_of(record)
    except InputError:
        raise
    except (FieldError, ValidationError, TypeError, AttributeError, KeyError, ValueError) as exc:
        raise _read_error(exc, source, f"span {record.span_id}", "a span tree link") from None


def link_of(record: SpanRecord) -> SpanLink:
    own = agent_of(record)
    agents, explicit = _described_agents(record, own)
    return SpanLink(
        span_id=record.span_id,
        parent_id=record.parent_id,
        start_ns=record.start_ns,
        agent=own,
        agents=tuple(agents),
        explicit=explicit,
        task=_first_user_text(record) if record.operation == CHAT else None,
        output=_output_key(record),
    )


def _digest(text: str | None) -> str | None:
    return hashlib.sha1(text.encode()).hexdigest() if text else None


def _output_key(record: SpanRecord) -> str | None:
    """`tool:<digest>` / `chain:<digest>` of a tool's or an observing chain's text output."""
    op = record.operation
    if op not in (TOOL, CHAIN) or (op == CHAIN and STEP_KIND in record.attributes):
        return None
    digest = _digest(_plain_output(record))
    return f"{'tool' if op == TOOL else 'chain'}:{digest}" if digest else None


def repeats_a_tool(record: SpanRecord, children: Iterable[SpanLink]) -> bool:
    """A chain whose text output only repeats one of its tools' (smolagents' ToolCallingAgent `Step N`)."""
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
