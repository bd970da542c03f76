"""Where the gateway forwards a call: any litellm model (`{agent}` replaced), or a function; upstream errors as status and body."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, Protocol


from ..errors import FaultlensError
from ..replay.chat_request import agent_model, safe_message, upstream_arguments
from ..replay.endpoint import error_body, sse_chunks

log = logging.getLogger("faultlens.middleware.capture.live_gateway")


class UpstreamError(FaultlensError):
    """The upstream refused or failed a call: its HTTP status and body, passed back to the client as they are."""

    def __init__(self, status: int, body: bytes, media_type: str = "application/json"):
        super().__init__(f"upstream answered {status}: {body[:200].decode('utf-8', 'replace')}")
        self.status = status
        self.body = body
        self.media_type = media_type


class GatewayUpstream(Protocol):
    """Where the gateway forwards calls: a whole completion, or its stream of chunks."""

    def complete(self, agent: str, request: dict[str, Any]) -> dict[str, Any]: ...

    def stream(self, agent: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]: ...


def upstream_error(exc: BaseException) -> UpstreamError:
    """A litellm (or other) exception as the status and body the client gets.

    litellm keeps the provider's HTTP response on the exception when there was
    one: its status and bytes are passed on unchanged. Otherwise the body is an
    OpenAI-style error object built from the exception (status 502 when it
    names none: the gateway could not get an answer).
    """
    if type(exc).__name__ == "Timeout":  # litellm's (status 408): for a gateway, the upstream timed out
        message = "the upstream did not answer in time (the gateway's --upstream-timeout)"
        return UpstreamError(504, json.dumps(error_body(message, "upstream_timeout", code=504)).encode())
    response = getattr(exc, "response", None)
    content = getattr(response, "content", None) if response is not None else None
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None) or 502
    if isinstance(content, bytes) and content:
        media = (getattr(response, "headers", None) or {}).get("content-type", "application/json")
        return UpstreamError(int(status), content, media)
    message = safe_message(str(getattr(exc, "message", None) or exc)) or type(exc).__name__
    return UpstreamError(int(status), json.dumps(error_body(message, type(exc).__name__, code=int(status))).encode())


DEFAULT_TIMEOUT = 30.0  # seconds; litellm's own default (600 s) would let a hanging upstream hold a call for ten minutes


class LiteLLMUpstream:
    """Forward to `model` through litellm (any provider, or a local/offline one); `{agent}` in it is the caller's name.

    timeout: seconds an upstream call may take before it fails (504 to the client). One client call is
    one upstream request: no retries (the client's SDK retries if it wants to), never the client's to set.
    """

    def __init__(self, model: str, *, timeout: float = DEFAULT_TIMEOUT, **completion_kwargs: Any):
        self.model = model
        self.kwargs = {"max_retries": 0, **completion_kwargs, "timeout": timeout}

    def _model(self, agent: str) -> str:
        # An agent name substituted into the model cannot pick another provider or add a path (raises RequestRefused).
        return agent_model(self.model, agent)

    def complete(self, agent: str, request: dict[str, Any]) -> dict[str, Any]:
        import litellm

        model = self._model(agent)
        try:
            response = litellm.completion(model=model, **upstream_arguments(request), **self.kwargs)
        except Exception as exc:
            raise upstream_error(exc) from exc
        return response.model_dump(exclude_none=True)

    def stream(self, agent: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        import litellm

        model = self._model(agent)
        try:
            chunks = litellm.completion(model=model, **upstream_arguments(request), stream=True,
                                        stream_options={"include_usage": True}, **self.kwargs)
        except Exception as exc:
            raise upstream_error(exc) from exc

        def each() -> Iterator[dict[str, Any]]:
            try:
                for chunk in chunks:
                    yield chunk.model_dump(exclude_none=True)
            except Exception as exc:
                raise upstream_error(exc) from exc

        return each()


class CallableUpstream:
    """An upstream given as a function `(agent, request) -> chat completion` (tests, simulated agents);
    a stream is the completion cut into chunks (`proxy.sse_chunks`)."""

    def __init__(self, call: Callable[[str, dict[str, Any]], dict[str, Any]]):
        self.call = call

    def complete(self, agent: str, request: dict[str, Any]) -> dict[str, Any]:
        return self.call(agent, request)

    def stream(self, agent: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        completion = self.call(agent, request)
        return (json.loads(line[len("data: "):]) for line in sse_chunks(completion, include_usage=True)
                if line.startswith("data: {"))


# -- lessons --------------------------------------------------------------------
