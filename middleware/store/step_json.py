"""A step as the store keeps it: its JSON, secrets redacted, written straight from the step's fields.

Every capture path stores a step through `stored_fields`: the tracer's
exporter and the server from the values `ingest.plan.plan_ingest` maps a span to,
without building a `Step`; `traces import`, `save_trace` and `add_steps`
through `store.protocol.prepare_steps`, which reads a `Step`'s values
(`stored_step`). The stored text is byte for byte what
``json.dumps(redact(step.model_dump(mode="json")), ensure_ascii=False,
sort_keys=True)`` gives (tests/middleware/store/test_step_json.py keeps that as the
reference and compares both with Hypothesis), but without dumping the model
to a dict, walking the whole dict to redact it and sorting its keys: the
top-level keys are fixed, so each field is redacted as `redact` would treat
it under its key, and encoded in its place in a fixed, sorted template. Only
the free-form fields (tool arguments and result, metadata, media) go through
the generic JSON conversion, redaction walk and encoder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic_core import to_jsonable_python

from ..model.trace import Media, Step, default_role
from .ids import StoredId, stored_id
from .redact import redact, redact_id, redact_text


class PreparedStep(NamedTuple):
    """A step serialised and redacted for storage (`stored_step`), ready to write."""

    key: StoredId
    started_at: float | None
    agent: StoredId
    kind: str
    error: int
    data: str


# What `json.dumps(value, ensure_ascii=False, sort_keys=True)` writes, without building its encoder on
# every call (a third of its cost for a small value): the C encoder json.dumps itself runs, made once
# (json.encoder.c_make_encoder, which the stdlib's typing stubs leave out; None without the C module, and then
# the Python encoder). No cycle check: what it encodes comes out of `to_jsonable_python`, `redact` or a JSON
# parser, none of which makes a cycle.
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
_encode_str: Any = json.encoder.encode_basestring  # what that encoder writes a str with (C when available)
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encoder = _make_encoder(None, _ENCODER.default, _encode_str, None, ": ", ", ", True, False, True) if _make_encoder is not None else None
# And with `default=str`, as a tool's result is written as a step's text.
_TEXT_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)
_c_text_encoder = _make_encoder(None, str, _encode_str, None, ": ", ", ", True, False, True) if _make_encoder is not None else None


def _encode(value: Any) -> str:
    return "".join(_c_encoder(value, 0)) if _c_encoder is not None else _ENCODER.encode(value)


def json_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)` for a value parsed from JSON or span attributes (no cycles)."""
    if type(value) is str:
        return _encode_str(value)
    return "".join(_c_text_encoder(value, 0)) if _c_text_encoder is not None else _TEXT_ENCODER.encode(value)


# The template in `stored_fields` writes these fields, in this (sorted) order; it relies on what
# tests/middleware/store/test_step_json.py checks: they are the model's fields, redaction leaves no
# key and no enum value changed and finds no key secret, and exactly the id fields are `ID_KEYS`.
_TEMPLATE_FIELDS = ("agent", "content", "ended_at", "error", "index", "kind", "lessons", "media", "metadata", "model", "native_id",
                    "parent_span_id", "role", "span_id", "started_at", "tool_arguments", "tool_name", "tool_result", "usage")
_ID_FIELDS = ("agent", "native_id", "parent_span_id", "span_id")
_MEDIA = {"media"}


def _any(value: Any, key: str) -> str:
    """A free-form field (`Any` or a dict of them) as pydantic's JSON mode gives it, redacted under `key`, encoded."""
    if value is None:
        return "null"
    if type(value) is str:
        return _encode_str(redact_text(value))
    if type(value) is dict and not value:
        return "{}"
    return _encode(redact(to_jsonable_python(value, inf_nan_mode="null"), key))


def _float(value: float | None) -> str:
    # pydantic's JSON mode writes a float that is not finite as null (inf - inf and nan - nan are nan, not 0).
    return "null" if value is None or value - value != 0.0 else float.__repr__(value)


def stored_step(step: Step) -> PreparedStep:
    """`step` redacted and serialised for storage (see the module's docstring for what it equals)."""
    # (a pydantic model keeps its fields' values in its __dict__)
    return stored_fields(step.__dict__)


def stored_fields(fields: Mapping[str, Any]) -> PreparedStep:
    """A step given as its fields' values (what a valid `Step` holds), redacted and serialised for storage.

    `ingest.plan.plan_ingest` calls this with the values it mapped from a span, which
    it checked the way `Step` would (`spans.valid_step_fields`), without building the model.
    """
    kind = fields["kind"].value
    role = fields["role"]
    agent = stored_id(fields["agent"])
    usage, media, lessons, error = fields["usage"], fields["media"], fields["lessons"], fields["error"]
    span_id, parent_id, native_id, model, tool_name = fields["span_id"], fields["parent_span_id"], fields["native_id"], fields["model"], fields["tool_name"]
    index, started_at = fields["index"], fields["started_at"]
    # (role is written only where it differs from the role the kind implies: `Step._role_when_needed`)
    role_part = "" if role == default_role(kind) else f', "role": {_encode_str(role.value)}'
    data = (
        f'{{"agent": {_encode_str(agent)}, "content": {_encode_str(redact_text(fields["content"]))}, "ended_at": {_float(fields["ended_at"])}, '
        f'"error": {"null" if error is None else _encode_str(redact_text(error))}, "index": {int.__repr__(index)}, "kind": {_encode_str(kind)}, '
        f'"lessons": {_encode([redact_text(s) for s in lessons]) if lessons else "[]"}, '
        f'"media": {_media(media) if media else "[]"}, '
        f'"metadata": {_any(fields["metadata"], "metadata")}, "model": {"null" if model is None else _encode_str(redact_text(model))}, '
        f'"native_id": {"null" if native_id is None else _encode_str(redact_id(native_id))}, '
        f'"parent_span_id": {"null" if parent_id is None else _encode_str(redact_id(parent_id))}{role_part}, '
        f'"span_id": {"null" if span_id is None else _encode_str(redact_id(span_id))}, "started_at": {_float(started_at)}, '
        f'"tool_arguments": {_any(fields["tool_arguments"], "tool_arguments")}, '
        f'"tool_name": {"null" if tool_name is None else _encode_str(redact_text(tool_name))}, '
        f'"tool_result": {_any(fields["tool_result"], "tool_result")}, '
        f'"usage": {"null" if usage is None else _encode({"cost_usd": _finite(usage.cost_usd), "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens})}}}'
    )
    key = stored_id(span_id if span_id else f"#{index}")
    return PreparedStep(key, started_at, agent, kind, int(error is not None), data)


def _media(media: list[Media]) -> str:
    # As pydantic dumps them inside a step (it writes a Media's infinite float as null only there).
    return _encode(redact(Step.model_construct(media=media).model_dump(mode="json", include=_MEDIA)["media"], "media"))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
