"""The OpenAI-compatible routes' HTTP edges (the gateway's and the proxy's): a request's checked body in, an `Answer` out as a response."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from faultlens.middleware.replay.endpoint import Answer, read_chat_request

__all__ = ["chat_body", "to_response"]


async def chat_body(request: Request) -> dict[str, Any] | Response:
    """The request's chat completion body, checked, or the 400 response naming what is wrong."""
    body = read_chat_request(await request.body())
    return to_response(body) if isinstance(body, Answer) else body


def to_response(answer: Answer) -> Response:
    if answer.stream is not None:
        return StreamingResponse(answer.stream, status_code=answer.status, media_type=answer.media_type)
    return Response(answer.body, status_code=answer.status, media_type=answer.media_type)
