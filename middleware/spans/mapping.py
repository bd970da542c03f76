"""The span -> step mapping: what step (if any) one span stands for, and the trace header a workflow/root span describes.

Pure: no store, no framework. The live tracer's span processor, the OTLP
importer and the HTTP server each first turn a span into a `SpanRecord`
(`spans.record`); from there `span_to_step` decides what step it is. The
attribute names are in `spans.conventions`, message parsing in
`spans.messages`; what a framework does its own way comes from its adapter
(`spans.adapters.hooks()`). A step's agent, when the span names none, is
that of the nearest span above it that does (`spans.tree`), and `ingest`
writes steps into a store (docs/capture-frameworks.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ..errors import FieldError, InputError, from_validation_error
from ..model.trace import AgentInfo, GoldLabel, Media, Outcome, Source, Step, StepKind, StepRole, Task, Trace, Usage, default_role
from ..store.step_json import json_text
from .adapters import hooks
from .conventions import (
    AGENT, AGENT_NAME, CHAIN, CHAT, CONTENT, COST_USD, INPUT_TOKENS, LESSONS, MEDIA, NATIVE_ID, NO_END, NO_START, OI_AGENT_NAME, OI_COMPLETION_TOKENS,
    OI_GRAPH_NODE_ID, OI_GRAPH_NODE_NAME, OI_INPUT_VALUE, OI_MODEL_NAME, OI_OUTPUT_MIME_TYPE, OI_OUTPUT_VALUE, OI_PROMPT_TOKENS, OI_TOOL_NAME,
    OI_TOOL_PARAMETERS, ORIGINAL_PARENT_ID, ORIGINAL_SPAN_ID, OUTPUT_TOKENS, REQUEST_MODEL, RESPONSE_MODEL, SCHEMA_VERSION_ATTR, STEP_KIND, STEP_METADATA,
    STEP_ROLE, TOOL, TOOL_ARGUMENTS, TOOL_NAME, TOOL_RESULT, TRACE_AGENTS, TRACE_GOLD, TRACE_METADATA, TRACE_OUTCOME, TRACE_SOURCE, TRACE_TASK, WORKFLOW,
)
from .messages import has_flattened_messages, input_value_text, json_attr, maybe_json, messages_of, messages_text
from .record import SpanRecord

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


def plain_output(record: SpanRecord) -> str | None:
    """A span's `output.value` when it is text a person reads, not a JSON document."""
    value = record.attributes.get(OI_OUTPUT_VALUE)
    if value is None or str(record.attributes.get(OI_OUTPUT_MIME_TYPE, "")).endswith("json"):
        return None
    text = str(value).strip()
    return text if text and isinstance(maybe_json(text), str) else None


def _tool_arguments(attrs: Mapping[str, Any]) -> tuple[Any, Any]:
    """(arguments, declared parameters) of a TOOL span.

    `tool.parameters` holds the call's arguments in some instrumentations and
    the tool's schema in others, so `input.value` is preferred. A framework
    that wraps a call its own way unwraps it in its adapter (`call_arguments`).
    """
    parameters = maybe_json(attrs.get(OI_TOOL_PARAMETERS))
    raw = attrs.get(TOOL_ARGUMENTS, attrs.get(OI_INPUT_VALUE, attrs.get(OI_TOOL_PARAMETERS)))
    arguments = maybe_json(raw)
    for unwrap in hooks().call_arguments:
        arguments = unwrap(arguments, parameters)
    return arguments, parameters


def named_agent(record: SpanRecord) -> str | None:
    """The agent name a span carries, as written (a framework's helper agents included)."""
    attrs = record.attributes
    for name in (AGENT_NAME, OI_AGENT_NAME, OI_GRAPH_NODE_NAME):
        if attrs.get(name):
            return str(attrs[name])
    op = record.operation
    if op == AGENT and attrs.get(OI_GRAPH_NODE_ID):
        return str(attrs[OI_GRAPH_NODE_ID])
    # Spans that name their agent by their shape (a span name, a team's span), as each framework's adapter reads it.
    for agent_name in hooks().agent_names.get(op or "", ()):
        found = agent_name(record)
        if found is not None:
            return found
    return None


def agent_of(record: SpanRecord) -> str | None:
    """The agent a span names itself (None: its agent is its nearest ancestor's)."""
    name = named_agent(record)
    return None if name is None or name in hooks().helper_agents else name


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
        raise read_error(exc, source, label if label is not None else f"span {record.span_id}", "a step") from None


def valid_step_fields(fields: Mapping[str, Any]) -> bool:
    """Whether `Step` takes these values (from `_step_fields`) as they are: those an attribute or status can give as any type."""
    return (
        type(fields["agent"]) is str
        and type(fields["content"]) is str
        and all(value is None or type(value) is str for value in (fields["span_id"], fields["parent_span_id"], fields["error"]))
        and all(type(key) is str for key in fields["metadata"])
    )


def read_error(exc: Exception, source: str, where: str | int, what: str) -> InputError:
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
    if attrs.get(OI_OUTPUT_VALUE) is not None:
        return str(attrs[OI_OUTPUT_VALUE])
    return ""


def _lessons_attr(attrs: Mapping[str, Any]) -> list[Any]:
    lessons = attrs.get(LESSONS) or []
    if isinstance(lessons, str):
        lessons = maybe_json(lessons)
        lessons = lessons if isinstance(lessons, list) else [lessons]
    return list(lessons)


def _media_attr(attrs: Mapping[str, Any]) -> list[Media]:
    media_raw = json_attr(attrs, MEDIA) or []
    if not isinstance(media_raw, list):
        raise FieldError(MEDIA, "must be a JSON list of media objects")
    try:
        return [Media.model_validate(m) for m in media_raw]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise FieldError(MEDIA, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def _usage_attr(attrs: Mapping[str, Any]) -> Usage | None:
    token_in = attrs.get(INPUT_TOKENS, attrs.get(OI_PROMPT_TOKENS))
    token_out = attrs.get(OUTPUT_TOKENS, attrs.get(OI_COMPLETION_TOKENS))
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
    if STEP_KIND not in attrs and any(machinery(record) for machinery in hooks().machinery):
        return None
    # A chain only groups (a `turn`, a workflow), unless it reports what
    # happened in text: an agent's `Step N` can hold the observation of the
    # code it ran, which no other span records.
    observation = plain_output(record) if op == CHAIN else None
    if op == CHAIN and STEP_KIND not in attrs and observation is None:
        return None
    kind = _kind_of(record, op)
    if kind is None:
        return None

    flattened = has_flattened_messages(attrs)
    inputs = messages_of(record, "input", flattened=flattened)
    outputs = messages_of(record, "output", flattened=flattened)
    metadata = json_attr(attrs, STEP_METADATA) or {}
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
    # when it is some agent's (a root workflow agent span can name none). One
    # that stands for a whole conversation (its adapter says) outputs the
    # conversation's last message, which another agent said.
    if op == AGENT and STEP_KIND not in attrs and (
        not (content or error or lessons or media) or named_agent(record) is None or (not error and any(whole(record) for whole in hooks().whole_conversation))
    ):
        return None

    tool_name = tool_arguments = tool_result = None
    if (kind in (StepKind.tool_call, StepKind.tool_result) and observation is None) or op == TOOL:
        tool_name = attrs.get(TOOL_NAME) or attrs.get(OI_TOOL_NAME) or (record.name.split(" ", 1)[1] if record.name.startswith(TOOL + " ") else record.name)
        tool_arguments, parameters = _tool_arguments(attrs)
        if parameters is not None and parameters != tool_arguments:
            metadata.setdefault("tool_parameters", parameters)
        raw_result = attrs.get(TOOL_RESULT, attrs.get(OI_OUTPUT_VALUE))
        tool_result = maybe_json(raw_result)
        wrapped = tool_result
        for unwrap in hooks().tool_results:
            tool_result = unwrap(tool_result)
        unwrapped = tool_result is not wrapped and outputs is None
        if (unwrapped or not content) and tool_result is not None and CONTENT not in attrs:
            # What a tool returned is what a person reads of a tool step (its text, not a framework's wrapping of it).
            content = tool_result if isinstance(tool_result, str) else json_text(tool_result)

    usage = _usage_attr(attrs)

    model = attrs.get(RESPONSE_MODEL) or attrs.get(REQUEST_MODEL) or attrs.get(OI_MODEL_NAME)
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
        value = json_attr(record.attributes, name)
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
    """Whether a span describes its run (a workflow span, or one that states the task)."""
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
        value = attrs.get(OI_INPUT_VALUE)
        # A JSON document with no request in it (a workflow's own state) states no task: the run's first
        # user message does (`tree.run_task`).
        stated = input_value_text(value) or ("" if value is None or isinstance(maybe_json(value), (dict, list)) else str(value))
        task = Task(query=query or stated)
    outcome = _model_attr(record, TRACE_OUTCOME, Outcome, source, label)
    if outcome is None and record.status == "error":
        outcome = Outcome(success=False, evaluator="span status", detail=_error_of(record))
    src = _model_attr(record, TRACE_SOURCE, Source, source, label) or default_source(record)
    gold = _model_attr(record, TRACE_GOLD, GoldLabel, source, label)
    agents = _model_attr(record, TRACE_AGENTS, list, source, label) or []
    try:
        metadata = json_attr(attrs, TRACE_METADATA) or {}
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
    """Where a run came from when its spans do not say (faultlens.source): the service and the convention."""
    openinference = any(k.startswith(("openinference.", "llm.", OI_INPUT_VALUE)) for k in record.attributes)
    framework = record.resource.get("service.name") or "otel"
    return Source(framework=str(framework), format="openinference" if openinference else "otlp")


def placeholder_header(trace_id: str, records: list[SpanRecord]) -> Trace:
    """A header for spans whose workflow/root span has not arrived (yet)."""
    first = min(records, key=lambda r: r.start_ns)
    return Trace(id=trace_id, task=Task(query=""), source=default_source(first), created_at=_seconds(first.start_ns))


