"""The live gateway: an OpenAI-compatible endpoint that forwards every call upstream and records it as a step of a run.

The live mode of the proxy (`middleware.replay.endpoint` records, replays and injects;
this forwards and records). Any framework, in any language, takes part by
pointing its OpenAI base URL at it; nothing else in the program changes. This
module is the gateway apart from HTTP (each call's answer is an
`endpoint.Answer`); its routes are in `faultlens.server.gateway_routes`.

- **forward**: each chat completion goes to the upstream (any litellm model,
  `{agent}` replaced by the calling agent's name), streamed back as it arrives
  when the client asks for a stream. An upstream error reaches the client
  with the upstream's status and body, unchanged.
- **record**: each call becomes one `llm_call` step of a run (agent, the
  messages sent, the reply and its tool calls, usage, latency, error), in the
  tracer's trace model (the step fields `spans.mapping.span_to_step` gives an LLM
  span). Steps are written by a background writer, redacted by the store; a
  store that is down never fails a call: the step waits in a bounded queue
  and is written when the store is back, or is dropped and counted.
- **runs**: a call with a W3C `traceparent` header belongs to the run of that
  trace id (the id the OTLP ingest gives the OpenInference spans of the same
  trace, so the gateway's steps and the spans join in one run); otherwise
  the run id is the path's (`/run/<id>/agent/<name>/v1`) or the header
  `X-Faultlens-Run`'s; otherwise the gateway's default run.
- **lessons at the door**: with a `lessons` provider, the lessons it returns
  for (agent, task) are added to the system message in one marked block
  (`LESSONS_BEGIN` ... `LESSONS_END`) before the call is forwarded, and the
  step records their ids. Only the system message's text changes: a
  request's tools, response format and every other field are forwarded as
  sent. The provider decides which agents get lessons (`feedback.gateway_lessons`:
  none until enabled).

The task of a run (what lessons are retrieved for) is the `X-Faultlens-Task`
header if sent, else the first user message of the run's first call.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .instrument.chat_messages import content_parts, openai_to_genai, tool_call_parts
from ..model.trace import AgentInfo, Source, Step, StepKind, Task, Trace, Usage
from ..replay.chat_request import RequestRefused, dropped_fields, forwarded
from ..replay.gateway_calls import LESSONS_BEGIN, LESSONS_END
from ..replay.endpoint import Answer, error_body
from faultlens.middleware.spans.messages import messages_text
from .step_writer import PendingWrite, StepWriter
from .upstream import GatewayUpstream, UpstreamError

__all__ = [
    "LESSONS_BEGIN",
    "LESSONS_END",
    "Gateway",
    "LessonsShown",
    "completion_text",
    "inject_lessons",
    "parse_traceparent",
]

log = logging.getLogger(__name__)

JSON = Any
RUN_HEADER = "x-faultlens-run"
TASK_HEADER = "x-faultlens-task"
FRAMEWORK = "gateway"
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class LessonsShown:
    """What a lessons provider gives for one call: the ids shown and the text of the block."""

    ids: list[str]
    text: str


LessonsProvider = Callable[[str, str], LessonsShown | None]  # (agent, task) -> lessons to show, or None


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def inject_lessons(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """`messages` with `text` added to the system message as one marked block (a system message is
    put first if there is none). The input is not modified; nothing but that message's text changes."""
    block = f"{LESSONS_BEGIN}\n{text}\n{LESSONS_END}"
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") in ("system", "developer"):
            content = message.get("content")
            if isinstance(content, list):  # list-of-parts content: the block is one more text part
                message["content"] = [*content, {"type": "text", "text": block}]
            else:
                message["content"] = f"{_text_of(content)}\n\n{block}" if content else block
            return out
    return [{"role": "system", "content": block}, *out]


def first_user_text(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


# -- runs -----------------------------------------------------------------------

def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """(trace id, parent span id) of a W3C `traceparent` header, or None if absent or invalid (all-zero ids are invalid)."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or match[1] == "ff" or set(match[2]) == {"0"} or set(match[3]) == {"0"}:
        return None
    return match[2], match[3]


@dataclass
class CallRun:
    """Which run a call belongs to, and how that was decided."""

    id: str
    by: str  # traceparent, path, header or default
    parent_span_id: str | None = None


def resolve_run(headers: Mapping[str, str], path_run: str | None, default_run: str) -> CallRun:
    parsed = parse_traceparent(headers.get("traceparent"))
    if parsed is not None:
        return CallRun(parsed[0], "traceparent", parsed[1])
    if path_run:
        return CallRun(path_run, "path")
    if headers.get(RUN_HEADER):
        return CallRun(headers[RUN_HEADER], "header")
    return CallRun(default_run, "default")


@dataclass
class _RunInfo:
    task: str
    agents: set[str] = field(default_factory=set)


@dataclass
class Gateway:
    """Forwards chat completions to `upstream`, records each as a step, and shows agents their lessons.

    store: where steps go (any faultlens `Store`); None records nothing.
    lessons: (agent, task) -> `LessonsShown` or None (`feedback.gateway_lessons.GatewayLessons`).
    default_run: the run of calls that name none (default: a new id per gateway).
    max_upstream_calls: upstream calls in flight at once over HTTP (more wait; the server's own routes never do).
    on_stored: called with a run's id after each of its steps is stored (`StepWriter`).
    """

    upstream: GatewayUpstream
    store: Any = None
    lessons: LessonsProvider | None = None
    default_run: str = field(default_factory=lambda: f"gateway-{uuid.uuid4().hex[:12]}")
    max_pending: int = 10_000
    max_runs: int = 10_000
    max_upstream_calls: int = 64
    on_stored: Callable[[str], Any] | None = field(default=None, repr=False)
    calls: int = 0
    upstream_errors: int = 0
    lesson_errors: int = 0
    lessons_shown: int = 0
    _runs: OrderedDict[str, _RunInfo] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    writer: StepWriter | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.store is not None and self.writer is None:
            self.writer = StepWriter(self.store, max_pending=self.max_pending, on_stored=self.on_stored)

    # -- one call ---------------------------------------------------------------
    def _run_info(self, run: CallRun, agent: str, headers: Mapping[str, str], messages: list[dict[str, Any]]) -> tuple[_RunInfo, bool]:
        with self._lock:
            self.calls += 1
            info = self._runs.get(run.id)
            if info is None:
                info = self._runs[run.id] = _RunInfo(task=headers.get(TASK_HEADER) or first_user_text(messages))
                while len(self._runs) > self.max_runs:  # the oldest runs' tasks are forgotten, not the calls
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(run.id)
            new_agent = agent not in info.agents
            info.agents.add(agent)
            return info, new_agent

    def _shown(self, agent: str, task: str) -> LessonsShown | None:
        if self.lessons is None or not task:
            return None
        try:
            shown = self.lessons(agent, task)
        except Exception as exc:  # lessons are a help, never a reason to fail the call
            log.warning("gateway: no lessons for %s (%s: %s)", agent, type(exc).__name__, exc)
            with self._lock:
                self.lesson_errors += 1
            return None
        return shown if shown is not None and shown.ids else None

    def handle(self, agent: str, body: dict[str, Any], headers: Mapping[str, str], path_run: str | None = None) -> Answer:
        """Answer one chat completion request (parsed and checked: `chat_request.check_chat_request`) and record it.

        Only the allow-listed chat parameters are forwarded (and recorded); a field the gateway does
        not know is left out and named in the step's `dropped_fields`.
        """
        messages = list(body.get("messages") or [])
        run = resolve_run(headers, path_run, self.default_run)
        info, new_agent = self._run_info(run, agent, headers, messages)
        shown = self._shown(agent, info.task)
        request = forwarded(body)
        if shown is not None:
            request["messages"] = inject_lessons(messages, shown.text)
            with self._lock:
                self.lessons_shown += 1
        started = time.time()
        clock = time.perf_counter()
        recording = _Recording(self, run, agent, info, new_agent, request, shown, started, clock, dropped_fields(body))
        if body.get("stream"):
            return self._stream(agent, body, request, recording)
        try:
            completion = self.upstream.complete(agent, request)
        except RequestRefused as exc:  # e.g. an agent name that cannot be put into the upstream's model name
            return _refused(exc)
        except UpstreamError as exc:
            recording.done(None, exc)
            return Answer(exc.status, exc.body, exc.media_type)
        recording.done(completion, None)
        return Answer(200, json.dumps(completion, ensure_ascii=False).encode())

    def _stream(self, agent: str, body: dict[str, Any], request: dict[str, Any], recording: _Recording) -> Answer:
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        try:
            chunks = iter(self.upstream.stream(agent, request))
            first = next(chunks, None)
        except RequestRefused as exc:
            return _refused(exc)
        except UpstreamError as exc:  # refused before the first chunk: the client gets the status and body
            recording.done(None, exc)
            return Answer(exc.status, exc.body, exc.media_type)
        merged = _StreamMerge()

        def lines() -> Iterator[str]:
            error: UpstreamError | None = None
            try:
                chunk = first
                while chunk is not None:
                    merged.add(chunk)
                    if wants_usage or chunk.get("choices"):
                        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
                    chunk = next(chunks, None)
                recording.done(merged.completion(), None)  # before the client's last line: recorded once it has the answer
                yield "data: [DONE]\n\n"
            except UpstreamError as exc:  # failed mid-stream: what the upstream said, as the stream's last event
                error = exc
                yield f"data: {exc.body.decode('utf-8', 'replace')}\n\n"
            finally:
                # Recorded whether the stream ended, failed or the client went away.
                recording.done(merged.completion(), error)

        return Answer(200, media_type="text/event-stream", stream=lines())

    def status(self) -> dict[str, Any]:
        writer = self.writer
        return {
            "mode": "live",
            "calls": self.calls,
            "upstream_errors": self.upstream_errors,
            "lessons_shown": self.lessons_shown,
            "lesson_errors": self.lesson_errors,
            "runs": len(self._runs),
            "recorded": writer.recorded if writer else 0,
            "queued": writer.queued if writer else 0,
            "dropped": writer.dropped if writer else 0,
            "rejected": writer.rejected if writer else 0,  # (of those dropped) refused by the store for good
            "store_errors": writer.store_errors if writer else 0,
            "last_store_error": writer.last_error if writer else None,
        }

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every call so far is written to the store (or dropped)."""
        return self.writer.flush(timeout) if self.writer is not None else True

    def close(self, timeout: float = 5.0) -> None:
        if self.writer is not None:
            self.writer.close(timeout)


def _refused(exc: RequestRefused) -> Answer:
    return Answer(400, json.dumps(error_body(str(exc), "invalid_request_error", param=exc.field)).encode())


def completion_outputs(completion: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The reply messages of a chat completion as GenAI-convention messages (what a step's `output_messages` holds)."""
    outputs = []
    for choice in (completion or {}).get("choices") or []:
        message = choice.get("message") or {}
        outputs.append({"role": message.get("role") or "assistant",
                        "parts": content_parts(message.get("content")) + tool_call_parts(message.get("tool_calls"))})
    return outputs


def completion_text(completion: Mapping[str, Any] | None) -> str:
    """What the gateway records as a call's step content: the reply's text and tool calls."""
    return messages_text(completion_outputs(completion))


class _StreamMerge:
    """Chunks of a streamed completion merged back into one completion, to record it."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}
        self.content: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        if not self.head:
            self.head = {k: chunk.get(k) for k in ("id", "model", "created") if chunk.get(k) is not None}
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(str(delta["content"]))
            for call in delta.get("tool_calls") or []:
                slot = self.tool_calls.setdefault(int(call.get("index", 0)), {"id": None, "type": "function",
                                                                                "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        out = {**self.head, "object": "chat.completion",
               "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}]}
        if self.usage:
            out["usage"] = self.usage
        return out


@dataclass
class _Recording:
    """One call being made: turned into a step (once) when its answer is known."""

    gateway: Gateway
    run: CallRun
    agent: str
    info: _RunInfo
    new_agent: bool
    request: dict[str, Any]
    shown: LessonsShown | None
    started: float
    clock: float
    dropped: list[str] = field(default_factory=list)
    _done: bool = False

    def done(self, completion: dict[str, Any] | None, error: UpstreamError | None) -> None:
        if self._done:
            return
        self._done = True
        gateway = self.gateway
        if error is not None:
            with gateway._lock:
                gateway.upstream_errors += 1
        if gateway.writer is None:
            return
        try:
            step = self.step(completion, error)
        except Exception as exc:  # a reply we cannot read is still the client's answer; the step is lost and counted
            log.warning("gateway: could not record a call of %s (%s: %s)", self.agent, type(exc).__name__, exc)
            with gateway.writer._cond:
                gateway.writer.dropped += 1
            return
        header = Trace(id=self.run.id, task=Task(query=self.info.task), agents=[AgentInfo(name=self.agent)],
                       source=Source(framework=FRAMEWORK, format=FRAMEWORK), metadata={"run_from": self.run.by})
        gateway.writer.submit(PendingWrite(self.run.id, header, step, self.new_agent))

    def step(self, completion: dict[str, Any] | None, error: UpstreamError | None) -> Step:
        seconds = time.perf_counter() - self.clock
        outputs = completion_outputs(completion)
        finish = [choice.get("finish_reason") for choice in (completion or {}).get("choices") or []]
        metadata: dict[str, Any] = {"input_messages": openai_to_genai(self.request.get("messages")), "output_messages": outputs,
                                    "latency_ms": round(seconds * 1000, 3), "run_from": self.run.by,
                                    "request": {k: v for k, v in self.request.items() if k != "messages"}}
        if finish:
            metadata["finish_reasons"] = finish
        if self.dropped:
            metadata["dropped_fields"] = self.dropped
        usage = None
        raw_usage = (completion or {}).get("usage")
        if isinstance(raw_usage, dict):
            usage = Usage(input_tokens=int(raw_usage.get("prompt_tokens") or 0), output_tokens=int(raw_usage.get("completion_tokens") or 0))
        first_call = next((c for o in outputs for c in o["parts"] if c.get("type") == "tool_call"), None)
        return Step(
            index=0,
            agent=self.agent,
            kind=StepKind.llm_call,
            content=messages_text(outputs),
            tool_name=first_call.get("name") if first_call else None,
            tool_arguments=first_call.get("arguments") if first_call else None,
            error=None if error is None else f"upstream {error.status}: {error.body.decode('utf-8', 'replace')}",
            model=(completion or {}).get("model") or self.request.get("model"),
            span_id=uuid.uuid4().hex[:16],
            parent_span_id=self.run.parent_span_id,
            started_at=self.started,
            ended_at=self.started + seconds,
            usage=usage,
            lessons=list(self.shown.ids) if self.shown else [],
            metadata=metadata,
        )
