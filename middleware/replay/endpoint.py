"""An OpenAI-compatible chat endpoint that records, replays and injects.

Any agent framework, in any language, takes part by pointing its OpenAI base
URL at the proxy (`http://127.0.0.1:PORT/v1`, or `.../agent/<name>/v1` to name
the agent making the calls). Every chat completion goes through one
`replay.Session`, so the proxy shares its record/replay rules with the rest of
faultlens:

- **record**: each request is forwarded upstream (any litellm model) and the
  request/response pair is appended to the recording;
- **replay**: each request is answered from the recording, byte for byte; a
  request that differs from the recorded one is *drift*: the client gets a 409
  and the drift is listed in `GET /proxy/status`;
- **inject**: calls before *t* are replayed, call *t* is answered by an
  override (an error of a chosen mode, made by the caller), and later calls go
  upstream live. This is warm-start error injection for a user's own agents.

Responses are kept as full (non-streamed) chat completions; a streaming
request gets the same completion cut into server-sent-event chunks, the same
bytes every time, so replay is exact for streaming clients too.

This module is the proxy apart from HTTP: a request's answer is an `Answer`
(status, body or stream of lines); the routes are `faultlens.server.proxy_app`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FaultlensError
from .chat_request import MAX_DEPTH, RequestRefused, agent_model, check_chat_request, safe_message, upstream_arguments
from .session import Drift, Override, Recording, Session, canonical

__all__ = ["Answer", "ChatProxy", "Upstream", "error_answer", "error_body", "litellm_upstream", "model_listing",
           "read_chat_request", "sse_chunks"]

JSON = Any
# (agent, request) -> chat completion
Upstream = Callable[[str, dict[str, Any]], dict[str, Any]]
DEFAULT_AGENT = "model"
AGENT_HEADER = "x-faultlens-agent"


@dataclass
class Answer:
    """The answer to one call of an OpenAI-compatible route, apart from HTTP: a body, a stream of SSE lines, or an error."""

    status: int = 200
    body: bytes = b""
    media_type: str = "application/json"
    stream: Iterator[str] | None = None


def litellm_upstream(model: str, **completion_kwargs: Any) -> Upstream:
    """Forward a chat request to `model` through litellm (any provider, or a local/offline one).

    `{agent}` in `model` is replaced by the calling agent's name, so each agent
    of a team can have its own model (e.g. `faultlens-demo/{agent}`).
    """
    import litellm

    def call(agent: str, request: dict[str, Any]) -> dict[str, Any]:
        response = litellm.completion(model=agent_model(model, agent), **upstream_arguments(request), **completion_kwargs)
        return response.model_dump(exclude_none=True)

    return call


@dataclass
class ChatProxy:
    """The proxy's state, apart from HTTP: one session, the upstream, the drift seen.

    `save_to`: the recording is written there (atomically) after every call, so
    a crashed framework run keeps what it did.
    """

    session: Session
    upstream: Upstream | None = None
    mode: str = "record"
    save_to: Path | None = None
    drifts: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def recorder(cls, upstream: Upstream, save_to: Path | None = None) -> ChatProxy:
        return cls(Session(), upstream, "record", save_to)

    @classmethod
    def replayer(cls, recording: Recording) -> ChatProxy:
        return cls(Session(recording, replay_until=None), None, "replay")

    @classmethod
    def injector(cls, recording: Recording, at: int, override: Override, upstream: Upstream,
                 save_to: Path | None = None) -> ChatProxy:
        if not 0 <= at < len(recording):
            raise ValueError(f"--at {at} is outside the recording's {len(recording)} calls (0..{len(recording) - 1})")
        return cls(Session(recording, replay_until=at, overrides={at: override}), upstream, "inject", save_to)

    def complete(self, agent: str, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat completion request (raises `Drift` on a replayed call that differs)."""
        with self._lock:  # a session is one ordered list of calls
            try:
                response = self.session.call("model", agent, request, lambda req: self._live(agent, req))
            except Drift as drift:
                self.drifts.append({"index": drift.index, "reason": str(drift)})
                raise
            if self.save_to is not None:
                _write_atomic(self.save_to, self.session.recorded.dumps())
            return response

    def answer(self, agent: str, body: dict[str, Any]) -> Answer:
        """The answer to one checked chat completion request (`read_chat_request`): the completion,
        streamed if asked, or the error a client's SDK understands."""
        try:
            completion = self.complete(agent, body)
        except Drift as drift:
            return error_answer(409, str(drift), "faultlens_drift", index=drift.index)
        except RequestRefused as exc:
            return error_answer(400, str(exc), "invalid_request_error", param=exc.field)
        except FaultlensError as exc:  # e.g. no error of the chosen mode fits call T: say so, never serve the original
            return error_answer(500, str(exc), type(exc).__name__)
        except Exception as exc:  # the upstream failed the live call: its message, without traceback or paths
            return error_answer(502, safe_message(str(exc)) or type(exc).__name__, "upstream_error")
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return Answer(media_type="text/event-stream", stream=sse_chunks(completion, usage))
        return Answer(body=canonical(completion).encode())

    def _live(self, agent: str, request: JSON) -> JSON:
        if self.upstream is None:
            raise Drift(len(self.session.calls), "model", None, request, "no upstream to answer a call the recording lacks")
        return _stable_ids(self.upstream(agent, request), request)

    def status(self) -> dict[str, Any]:
        s = self.session
        return {"mode": self.mode, "calls": len(s.calls), "replayed": s.replayed, "live": s.live,
                "overridden": sum(1 for c in s.calls if c.meta.get("overridden")), "drift": list(self.drifts)}


def _stable_ids(response: dict[str, Any], request: JSON) -> dict[str, Any]:
    # Upstreams stamp a random id and the clock on each completion; derive both
    # from the request instead, so recording the same run twice gives the same bytes.
    digest = hashlib.sha256(canonical(request).encode()).hexdigest()
    return {**response, "id": f"chatcmpl-{digest[:24]}", "created": 0}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def sse_chunks(completion: Mapping[str, Any], include_usage: bool = False) -> Iterator[str]:
    """A full chat completion as OpenAI streaming chunks (`data: ...` lines), deterministic."""
    head = {"id": completion.get("id", ""), "object": "chat.completion.chunk",
            "created": completion.get("created", 0), "model": completion.get("model", "")}
    for choice in completion.get("choices", []):
        message = choice.get("message") or {}
        index = choice.get("index", 0)
        delta: dict[str, Any] = {"role": message.get("role", "assistant")}
        if message.get("content") is not None:
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, "id": call.get("id"), "type": call.get("type", "function"),
                                    "function": call.get("function", {})}
                                   for i, call in enumerate(message["tool_calls"])]
        yield _sse({**head, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        yield _sse({**head, "choices": [{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason", "stop")}]})
    if include_usage and completion.get("usage"):
        yield _sse({**head, "choices": [], "usage": completion["usage"]})
    yield "data: [DONE]\n\n"


def _sse(payload: Mapping[str, Any]) -> str:
    return f"data: {canonical(payload)}\n\n"


def error_answer(status: int, message: str, kind: str, **extra: Any) -> Answer:
    """An OpenAI-style error body (`error_body`) with `status`, as compact JSON."""
    return Answer(status, _compact_json(error_body(message, kind, **extra)))


def _compact_json(content: Any) -> bytes:
    # The bytes a JSON response of the server has always carried (Starlette's rendering).
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


def error_body(message: str, kind: str, **extra: Any) -> dict[str, Any]:
    """The error object OpenAI's API answers with: `{"error": {"message", "type", ...}}` (what clients' SDKs parse)."""
    return {"error": {"message": message, "type": kind, **extra}}


def model_listing(models: list[str]) -> dict[str, Any]:
    """The `/v1/models` answer naming `models`."""
    return {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "faultlens"} for m in models]}


def read_chat_request(raw: bytes) -> dict[str, Any] | Answer:
    """A chat-completion request's JSON body, checked (`chat_request.check_chat_request`), or the 400 answer naming what is wrong."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return error_answer(400, f"request body is not JSON: {exc}", "invalid_request_error")
    except RecursionError:
        return error_answer(400, f"request body is nested deeper than {MAX_DEPTH} levels", "invalid_request_error")
    try:
        return check_chat_request(body)
    except RequestRefused as exc:
        return error_answer(400, str(exc), "invalid_request_error", param=exc.field)
