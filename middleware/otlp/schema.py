"""The one schema an OTLP/HTTP trace export must satisfy before anything of it is stored.

`validate_export(payload)` checks the decoded body (protobuf and JSON both
arrive as the OTLP JSON dict) against pydantic models of
`ExportTraceServiceRequest`: every field's type, enum values, integer ranges
(int64 attribute values, uint64 nanosecond times, which also keeps every time
inside what `datetime` can show), finite doubles, ids of the right length,
strings that are valid Unicode (a lone surrogate such as "\\ud800" cannot be
encoded as UTF-8 and would fail half-way through a write), and how deeply
attribute values nest. Unknown fields are ignored, as OTLP asks of receivers.

A failure raises `SchemaError` naming the first bad field as a path into the
body (`resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano`); the server
answers 400 with it and stores nothing.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Collection
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ..errors import FaultlensError

# Nanosecond times are fixed64 in the protobuf: at most 2**64-1 ns, which is
# 2554-07-21 and well inside datetime's range, so every accepted time renders.
MAX_NANOS = 2**64 - 1
INT64 = (-(2**63), 2**63 - 1)
# How deeply arrayValue/kvlistValue may nest inside one attribute value.
MAX_VALUE_DEPTH = 32
_STATUS_CODES: set[int | str] = {0, 1, 2, "STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}
_SPAN_KINDS: set[int | str] = {0, 1, 2, 3, 4, 5} | {f"SPAN_KIND_{k}" for k in ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")}


def not_one_of(value: Any, allowed: Collection[Any], what: str) -> str:
    """The message for an enum value outside `allowed` (shared with the protobuf reader, `protobuf`)."""
    return f"{value!r} is not a {what}; expected one of {sorted(map(str, allowed))}"


STATUS_CODES: frozenset[int | str] = frozenset(_STATUS_CODES)
SPAN_KINDS: frozenset[int | str] = frozenset(_SPAN_KINDS)


class SchemaError(FaultlensError, ValueError):
    """An export that does not fit the schema: `field` is the path of the first bad value."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class BodyError(FaultlensError, ValueError):
    """A request body faultlens will not accept as a whole (not decompressible, not decodable); `status` is the HTTP status to answer with."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"is not valid Unicode (a lone surrogate at character {exc.start})") from None
    return value


def _integer(value: Any, low: int, high: int, what: str) -> int:
    # JSON writes 64-bit integers as strings or numbers; a bool or a fraction is neither.
    if isinstance(value, bool):
        raise ValueError(f"must be {what}, not a boolean")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"must be {what}, not {value!r}")
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.lstrip("-").isdigit()) or len(text) > 21:
            raise ValueError(f"must be {what}, not {value[:40]!r}")
        value = int(text)
    elif not isinstance(value, int):
        raise ValueError(f"must be {what}, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{value} is out of range for {what} ({low}..{high})")
    return value


def _nanos(value: Any) -> int:
    return _integer(value, 0, MAX_NANOS, "a time in nanoseconds since the epoch")


def _int64(value: Any) -> int:
    return _integer(value, *INT64, "a 64-bit integer")


def _uint32(value: Any) -> int:
    return _integer(value, 0, 2**32 - 1, "a count")


def _double(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value!r}")
    return float(value)


def _id(nbytes: int, required: bool):
    def check(value: Any) -> str:
        if value is None or value == "":
            if required:
                raise ValueError("is missing")
            return ""
        if not isinstance(value, str):
            raise ValueError(f"must be a {nbytes}-byte id as a hex string, not {type(value).__name__}")
        if len(value) == nbytes * 2:
            try:
                bytes.fromhex(value)
                return value
            except ValueError:
                pass
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != nbytes:
            raise ValueError(f"{value[:40]!r} is not a {nbytes}-byte id in hex or base64")
        return value

    return check


def _one_of(allowed: set, what: str):
    def check(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, str)) or value not in allowed:
            raise ValueError(not_one_of(value, allowed, what))
        return value

    return check


Text = Annotated[str, BeforeValidator(_text)]
Nanos = Annotated[int, BeforeValidator(_nanos)]
Int64 = Annotated[int, BeforeValidator(_int64)]
UInt32 = Annotated[int, BeforeValidator(_uint32)]
Double = Annotated[float, BeforeValidator(_double)]
TraceId = Annotated[str, BeforeValidator(_id(16, True))]
SpanId = Annotated[str, BeforeValidator(_id(8, True))]
ParentId = Annotated[str, BeforeValidator(_id(8, False))]
StatusCode = Annotated[int | str, BeforeValidator(_one_of(_STATUS_CODES, "status code"))]
SpanKind = Annotated[int | str, BeforeValidator(_one_of(_SPAN_KINDS, "span kind"))]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=False, populate_by_name=True)


class ArrayValue(_Model):
    values: list[AnyValue] = Field(default_factory=list)


class KeyValueList(_Model):
    values: list[KeyValue] = Field(default_factory=list)


class AnyValue(_Model):
    stringValue: Text | None = None
    boolValue: Annotated[bool, Field(strict=True)] | None = None
    intValue: Int64 | None = None
    doubleValue: Double | None = None
    arrayValue: ArrayValue | None = None
    kvlistValue: KeyValueList | None = None
    bytesValue: Annotated[str, BeforeValidator(lambda v: _base64(v))] | None = None

    @model_validator(mode="after")
    def _one_kind_and_shallow(self) -> AnyValue:
        kinds = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(kinds) > 1:
            raise ValueError(f"holds {len(kinds)} kinds of value ({', '.join(kinds)}); an AnyValue holds one")
        if _depth(self) > MAX_VALUE_DEPTH:
            raise ValueError(f"nests more than {MAX_VALUE_DEPTH} levels of arrayValue/kvlistValue")
        return self


def _base64(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a base64 string, not {type(value).__name__}")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64") from None
    return value


def _depth(value: AnyValue) -> int:
    # Children were validated first (and checked against the limit), so this
    # recursion is bounded by MAX_VALUE_DEPTH + 1.
    if value.arrayValue is not None:
        return 1 + max((_depth(v) for v in value.arrayValue.values), default=0)
    if value.kvlistValue is not None:
        return 1 + max((_depth(kv.value) for kv in value.kvlistValue.values), default=0)
    return 0


class KeyValue(_Model):
    key: Text
    value: AnyValue = Field(default_factory=AnyValue)


Attributes = list[KeyValue]


class Status(_Model):
    code: StatusCode = 0
    message: Text = ""


class Event(_Model):
    timeUnixNano: Nanos = 0
    name: Text = ""
    attributes: Attributes = Field(default_factory=list)
    droppedAttributesCount: UInt32 = 0


class Link(_Model):
    traceId: TraceId
    spanId: SpanId
    traceState: Text = ""
    attributes: Attributes = Field(default_factory=list)
    droppedAttributesCount: UInt32 = 0


class Span(_Model):
    traceId: TraceId
    spanId: SpanId
    parentSpanId: ParentId = ""
    traceState: Text = ""
    name: Text
    kind: SpanKind = 1
    startTimeUnixNano: Nanos = 0
    endTimeUnixNano: Nanos = 0
    attributes: Attributes = Field(default_factory=list)
    droppedAttributesCount: UInt32 = 0
    events: list[Event] = Field(default_factory=list)
    droppedEventsCount: UInt32 = 0
    links: list[Link] = Field(default_factory=list)
    droppedLinksCount: UInt32 = 0
    status: Status = Field(default_factory=Status)


class Scope(_Model):
    name: Text = ""
    version: Text = ""
    attributes: Attributes = Field(default_factory=list)


class ScopeSpans(_Model):
    scope: Scope = Field(default_factory=Scope)
    spans: list[Span] = Field(default_factory=list)
    schemaUrl: Text = ""


class Resource(_Model):
    attributes: Attributes = Field(default_factory=list)
    droppedAttributesCount: UInt32 = 0


class ResourceSpans(_Model):
    resource: Resource = Field(default_factory=Resource)
    scopeSpans: list[ScopeSpans] = Field(default_factory=list, validation_alias=AliasChoices("scopeSpans", "scope_spans"))
    schemaUrl: Text = ""


class ExportTraceServiceRequest(_Model):
    resourceSpans: list[ResourceSpans] = Field(validation_alias=AliasChoices("resourceSpans", "resource_spans"))


ArrayValue.model_rebuild()
KeyValueList.model_rebuild()


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "str", "float", "bool") or str(part).startswith("function-"):
            continue  # pydantic's names for union members and validator layers, not fields of the body
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def validate_export(payload: Any) -> ExportTraceServiceRequest:
    """Check an OTLP JSON export against the schema; raise SchemaError naming the first bad field."""
    if not isinstance(payload, dict):
        raise SchemaError("body", f"must be a JSON object with 'resourceSpans', not {type(payload).__name__}")
    try:
        return ExportTraceServiceRequest.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        message = first["msg"].removeprefix("Value error, ")
        raise SchemaError(_path(first["loc"]), message) from None
    except RecursionError:
        raise SchemaError("body", "nests too deeply") from None
