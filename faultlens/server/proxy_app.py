"""The proxy's HTTP app (`faultlens proxy`): the routes in front of a `middleware.replay.endpoint.ChatProxy`."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from faultlens.middleware.replay.endpoint import AGENT_HEADER, DEFAULT_AGENT, ChatProxy, model_listing
from .answers import chat_body, to_response

__all__ = ["create_proxy_app"]


def create_proxy_app(proxy: ChatProxy, models: list[str] | None = None) -> FastAPI:
    """The HTTP face of `proxy`: `/v1/chat/completions`, `/v1/models`, and the same under `/agent/<name>/v1`."""
    app = FastAPI(title="faultlens proxy", docs_url=None, redoc_url=None)
    model_list = model_listing(models or ["faultlens-proxy"])

    async def chat(request: Request, agent: str) -> Response:
        body = await chat_body(request)
        if isinstance(body, Response):
            return body
        return to_response(proxy.answer(agent, body))

    @app.get("/v1/models")
    @app.get("/agent/{agent}/v1/models")
    def list_models(agent: str = DEFAULT_AGENT) -> JSONResponse:
        return JSONResponse(model_list)

    @app.post("/v1/chat/completions")
    async def chat_default(request: Request) -> Response:
        return await chat(request, request.headers.get(AGENT_HEADER, DEFAULT_AGENT))

    @app.post("/agent/{agent}/v1/chat/completions")
    async def chat_agent(request: Request, agent: str) -> Response:
        return await chat(request, agent)

    @app.get("/proxy/status")
    def status() -> JSONResponse:
        return JSONResponse(proxy.status())

    return app
