"""The live gateway's HTTP routes (`middleware.capture.live_gateway.Gateway` behind FastAPI), and its own threads for upstream calls."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from faultlens.middleware.capture.live_gateway import Gateway
from faultlens.middleware.replay.endpoint import AGENT_HEADER, DEFAULT_AGENT, Answer, model_listing
from .answers import chat_body, to_response

__all__ = ["create_gateway_app", "gateway_router"]


def gateway_router(gateway: Gateway, models: list[str] | None = None) -> APIRouter:
    """The gateway's routes: chat completions and models at `/v1`, `/agent/<name>/v1`, `/run/<id>/v1`,
    `/run/<id>/agent/<name>/v1`, and `GET /gateway/status`. Mount it on the faultlens server
    (`faultlens gateway`) to get its token rules, the runs API and the failed-run worker with it."""
    router = APIRouter()
    listing = model_listing(models or ["faultlens-gateway"])
    calls = _UpstreamCalls(gateway.max_upstream_calls)

    async def chat(request: Request, agent: str | None, run: str | None) -> Response:
        body = await chat_body(request)
        if isinstance(body, Response):
            return body
        name = agent or request.headers.get(AGENT_HEADER) or DEFAULT_AGENT
        answer = await calls.run(request, gateway.handle, name, body, request.headers, run)
        if answer is None:  # the client went away: nobody to answer
            return Response(status_code=499)
        if answer.stream is not None:
            return StreamingResponse(calls.iterate(answer.stream), media_type="text/event-stream")
        return to_response(answer)

    @router.post("/v1/chat/completions")
    async def chat_default(request: Request) -> Response:
        return await chat(request, None, None)

    @router.post("/agent/{agent}/v1/chat/completions")
    async def chat_agent(request: Request, agent: str) -> Response:
        return await chat(request, agent, None)

    @router.post("/run/{run}/v1/chat/completions")
    async def chat_run(request: Request, run: str) -> Response:
        return await chat(request, None, run)

    @router.post("/run/{run}/agent/{agent}/v1/chat/completions")
    async def chat_run_agent(request: Request, run: str, agent: str) -> Response:
        return await chat(request, agent, run)

    @router.get("/v1/models")
    @router.get("/agent/{agent}/v1/models")
    @router.get("/run/{run}/v1/models")
    @router.get("/run/{run}/agent/{agent}/v1/models")
    def models_list(agent: str = DEFAULT_AGENT, run: str = "") -> JSONResponse:
        return JSONResponse(listing)

    @router.get("/gateway/status")
    def status() -> JSONResponse:
        return JSONResponse(gateway.status())

    return router


class _UpstreamCalls:
    """The gateway's own threads for upstream calls, at most `limit` at once.

    Upstream calls block a thread for as long as the upstream takes; on the
    server's shared thread pool, a few dozen calls held by a hanging upstream
    would leave none for health, the API or the UI. A client that goes away
    gives its slot back at once (its thread finishes on its own, within the
    upstream timeout, and the call is still recorded).
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._limiter: anyio.CapacityLimiter | None = None

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        if self._limiter is None:  # made in the event loop that uses it
            self._limiter = anyio.CapacityLimiter(self.limit)
        return self._limiter

    async def run(self, request: Request, fn: Callable[..., Answer], *args: Any) -> Answer | None:
        """`fn(*args)` on one of the gateway's threads; None if the client disconnected first."""
        answer: Answer | None = None
        async with anyio.create_task_group() as group:
            async def call() -> None:
                nonlocal answer
                answer = await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter, abandon_on_cancel=True)
                group.cancel_scope.cancel()

            async def watch() -> None:
                while not await request.is_disconnected():
                    await anyio.sleep(0.25)
                group.cancel_scope.cancel()

            group.start_soon(call)
            group.start_soon(watch)
        return answer

    async def iterate(self, lines: Iterator[str]) -> AsyncIterator[str]:
        """A stream's lines, each read on one of the gateway's threads; a client that goes away ends the stream
        (closing `lines`, which records the call) once no thread is reading it."""
        lock = threading.Lock()
        state = {"reading": False, "gone": False}

        def close() -> None:
            close_lines = getattr(lines, "close", None)
            if close_lines is not None:
                close_lines()

        def next_line() -> str | None:
            line = next(lines, None)
            with lock:
                state["reading"] = False
                gone = state["gone"]
            if gone:  # the client left while this thread waited on the upstream
                close()
            return line

        try:
            while True:
                with lock:
                    state["reading"] = True
                line = await anyio.to_thread.run_sync(next_line, limiter=self.limiter, abandon_on_cancel=True)
                if line is None:
                    break
                yield line
        finally:
            with lock:
                state["gone"] = True
                reading = state["reading"]
            if not reading:
                close()


def create_gateway_app(gateway: Gateway) -> FastAPI:
    """The gateway on its own (no runs API, no token): for tests and embedding. `faultlens gateway` mounts
    `gateway_router` on the faultlens server instead."""
    app = FastAPI(title="faultlens gateway", docs_url=None, redoc_url=None)
    app.include_router(gateway_router(gateway))
    return app
