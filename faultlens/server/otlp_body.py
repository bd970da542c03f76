"""Reading an OTLP/HTTP request body: size limit, decompression, the JSON encoding, the response.

A JSON body becomes the OTLP JSON dict of an `ExportTraceServiceRequest`
(lowerCamelCase keys, hex trace and span ids, integer enums), which
`middleware.otlp.convert.otlp_json_to_records` reads; a protobuf body is read
straight into span records (`middleware.otlp.protobuf`). (The protobuf → OTLP JSON walk the
tests compare those two paths with is a test oracle: tests/faultlens/server/otlp_oracle.py.)
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from google.protobuf import json_format

from faultlens.middleware.otlp.schema import BodyError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo Content-Encoding (gzip/deflate), never producing more than `limit` bytes."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise BodyError(415, f"unsupported Content-Encoding {encoding!r}; use gzip, deflate or none")
    if encoding == "deflate":
        return _inflate(body, zlib.MAX_WBITS, encoding, limit, members=False)
    return _inflate(body, 16 + zlib.MAX_WBITS, encoding, limit, members=True)


def _inflate(data: bytes, wbits: int, encoding: str, limit: int, *, members: bool) -> bytes:
    """Inflate every member of `data` (gzip allows several back to back, as `gzip.decompress` reads them).

    Anything after the last complete stream that is not another gzip member is
    an error: a body whose tail we did not read would be acknowledged but not stored.
    """
    out = bytearray()
    while True:
        # wbits: 16+MAX for a gzip header, MAX for zlib-wrapped deflate.
        inflater = zlib.decompressobj(wbits)
        try:
            out += inflater.decompress(data, limit + 1 - len(out))
        except zlib.error as exc:
            raise BodyError(400, f"body is not valid {encoding}: {exc}") from None
        if len(out) > limit or inflater.unconsumed_tail:
            # A small compressed body may inflate to gigabytes; the limit applies to what we would parse.
            raise BodyError(413, f"decompressed body is larger than the {limit}-byte limit")
        if not inflater.eof:
            raise BodyError(400, f"body is truncated {encoding} data")
        data = inflater.unused_data
        if not data:
            return bytes(out)
        if not (members and data[:2] == b"\x1f\x8b"):
            raise BodyError(400, f"body has {len(data)} byte(s) of trailing data after the {encoding} stream")


def _no_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity, which JSON does not have and no response could echo.
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body, parse_constant=_no_constant)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN
        raise BodyError(400, f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BodyError(400, "body is not valid JSON: it nests too deeply") from None
    if not isinstance(payload, dict):
        raise BodyError(400, f"body must be a JSON object with 'resourceSpans', not {type(payload).__name__}")
    return payload


def decode_otlp(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The OTLP JSON dict of a (decompressed) JSON /v1/traces body; 415 for a Content-Type that is neither
    JSON nor protobuf. A protobuf body is read straight into span records (`middleware.otlp.protobuf.protobuf_to_records`)."""
    kind = media_type(content_type)
    if kind == PROTOBUF:
        raise ValueError("a protobuf body is read by middleware.otlp.protobuf.protobuf_to_records, not decoded to JSON")
    if kind == JSON:
        return parse_json(body)
    raise BodyError(415, f"Content-Type must be {PROTOBUF} or {JSON}, not {content_type!r}")


def encode_response(kind: str, partial_rejected: int = 0, message: str = "") -> tuple[bytes, str]:
    """An `ExportTraceServiceResponse` in the request's encoding (OTLP/HTTP requires it)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if partial_rejected or message:
        response.partial_success.rejected_spans = partial_rejected
        response.partial_success.error_message = message
    if kind == PROTOBUF:
        return response.SerializeToString(), PROTOBUF
    return json.dumps(json_format.MessageToDict(response)).encode(), JSON
