"""POST /v1/traces: OTLP/HTTP trace export, protobuf or JSON, checked against one schema before ingest."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from faultlens.middleware.errors import InputError
from .deps import get_services
from .otlp_body import JSON, PROTOBUF, BodyError, decode_otlp, decompress, encode_response, media_type
from faultlens.middleware.otlp.protobuf import protobuf_to_records
from faultlens.middleware.otlp.schema import SchemaError, validate_export
from .ingest import IngestResult
from .services import Services

router = APIRouter(tags=["otlp"])
PATH = "/v1/traces"


@router.post(
    PATH,
    summary="OTLP/HTTP trace export (protobuf or JSON)",
    response_class=Response,
    responses={
        200: {"description": "ExportTraceServiceResponse"},
        400: {"description": "bad payload (the detail names the field); nothing stored"},
        413: {"description": "body too large"},
        415: {"description": "unsupported Content-Type or Content-Encoding"},
    },
)
async def otlp_traces(request: Request, services: Services = Depends(get_services)) -> Response:
    """Point an OpenTelemetry SDK or Collector's OTLP/HTTP exporter here.

    Spans are idempotent by span id: sending the same span twice stores it
    once. A body that cannot be read, or that does not fit the OTLP schema
    (`middleware.otlp.schema`), stores nothing.
    """
    # Requests normally reach `OtlpFastPath` first and never come here; the route is declared for
    # the OpenAPI schema, and serves an app that was built without the fast path.
    return await export_traces(services, request)


async def export_traces(services: Services, request: Request) -> Response:
    """Read, check and store one OTLP/HTTP export; the answer (200 only after the spans are committed)."""
    limit = services.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return JSONResponse({"detail": f"body of {declared} bytes is larger than the {limit}-byte limit"}, status_code=413)
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            return JSONResponse({"detail": f"body is larger than the {limit}-byte limit"}, status_code=413)
    content_encoding, content_type = request.headers.get("content-encoding"), request.headers.get("content-type")

    def read_and_ingest() -> IngestResult:
        # Off the event loop: decoding and checking a big body takes long enough to stall other requests.
        raw = decompress(bytes(body), content_encoding, limit)
        if media_type(content_type) == PROTOBUF:
            # Checked on the parsed message: its types are protobuf's (see middleware.otlp.protobuf).
            return services.ingest_records(protobuf_to_records(raw))
        payload = decode_otlp(raw, content_type)
        validate_export(payload)
        return services.ingest_payload(payload)

    try:
        result = await _run(services, read_and_ingest, len(body))
    except BodyError as exc:
        # Decoding failed before any field could be read: the body as a whole is at fault.
        return JSONResponse({"detail": exc.reason, "field": "body"}, status_code=exc.status)
    except SchemaError as exc:
        return JSONResponse({"detail": str(exc), "field": exc.field}, status_code=400)
    except InputError as exc:
        return JSONResponse({"detail": str(exc), "field": exc.field}, status_code=400)
    content, kind = encode_response(media_type(content_type) or JSON)
    return Response(content, media_type=kind, headers={"X-Faultlens-Spans": str(result.spans)})


# A body this small (about 500 spans) is stored on the event loop itself: handing it to a worker thread cost
# 0.3-0.5 ms of CPU more: 1.82 and 2.12 against 1.55 and 1.57 ms per 11-span request
# (`scripts/load_server.py --requests 2000 --spans 10 --clients 4`, same minutes). Bigger bodies go to a thread so
# that the loop keeps answering while they are decoded and stored.
INLINE_BYTES = 64 * 1024


async def _run(services: Services, ingest: Callable[[], IngestResult], size: int) -> IngestResult:
    """Run `ingest` on the loop when it is small and no threaded ingest could hold the store's write lock, else in a thread."""
    if size < INLINE_BYTES and services.threaded_ingests == 0:
        return ingest()
    services.threaded_ingests += 1
    try:
        return await run_in_threadpool(ingest)
    finally:
        services.threaded_ingests -= 1


class OtlpFastPath:
    """Pure ASGI middleware that answers `POST /v1/traces` itself, with the route's own code (`export_traces`).

    It sits inside the gatekeeping middleware (same token, loopback and
    origin checks, same headers) and skips only FastAPI's routing and
    dependency machinery, which cost an OTLP request about as much CPU as
    storing its spans. Everything else goes on to the app.
    """

    def __init__(self, app: ASGIApp, services: Services):
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == PATH:
            response = await export_traces(self.services, Request(scope, receive))
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
