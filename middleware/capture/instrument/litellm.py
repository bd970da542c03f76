"""Record litellm completions as GenAI `chat` spans under the agent that made them.

litellm runs its success callbacks on a worker thread (sync calls) or as a
task (async calls), where the caller's context is gone. So the context is
captured in `log_pre_api_call`, which litellm runs in the caller's context,
keyed by `litellm_call_id`, and used when the call ends. Taking the entry out
also makes each call recorded once, even when litellm fires both its sync and
async success callbacks for it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from litellm.integrations.custom_logger import CustomLogger
from opentelemetry.trace import Status, StatusCode

from faultlens.middleware.spans import conventions as S
from .chat_messages import content_parts, get_field, openai_to_genai, tool_call_parts

if TYPE_CHECKING:
    from ..runstate import CallContext
    from ..tracer import Run, Tracer


def _ns(moment: Any) -> int | None:
    if isinstance(moment, datetime):
        return int(moment.timestamp() * 1e9)
    if isinstance(moment, (int, float)):
        return int(moment * 1e9)
    return None


class LiteLLMInstrumentation(CustomLogger):
    """A litellm callback recording each completion made inside a faultlens run as a `chat` span.

    One instance serves every instrumented tracer (litellm keeps only one
    callback per class); a call belongs to the tracer whose run it is made in.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tracers: weakref.WeakSet[Tracer] = weakref.WeakSet()
        self._pending: dict[str, CallContext] = {}  # started, not yet claimed by a success/failure callback
        self._claimed: dict[str, CallContext] = {}  # being recorded
        self._recorded: OrderedDict[str, None] = OrderedDict()  # recent call ids, so no call is recorded twice
        self._lock = threading.Condition()

    def pending(self, run_id: str | None = None) -> int:
        """How many calls (of one run, or all) have started but are not recorded yet."""
        with self._lock:
            return sum(1 for c in [*self._pending.values(), *self._claimed.values()] if run_id is None or c.run.id == run_id)

    def wait(self, run_id: str | None = None, timeout: float = 5.0) -> bool:
        """Block until the calls of a run are recorded (litellm logs sync calls on a worker thread)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: not any(run_id is None or c.run.id == run_id for c in [*self._pending.values(), *self._claimed.values()]), timeout
            )

    async def await_recorded(self, run_id: str | None = None, timeout: float = 5.0) -> bool:
        """In async code: let litellm's logging worker run until the calls of a run are recorded."""
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        deadline = asyncio.get_running_loop().time() + timeout
        while self.pending(run_id):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout=min(left, 0.5))
            except asyncio.TimeoutError:
                pass
            await asyncio.sleep(0.005)
        return True

    # -- the tracer's side (runstate.Instrumentation) ---------------------------
    def call_context(self) -> CallContext | None:
        """litellm knows nothing of where a call belongs (it asks the tracers): always None."""
        return None

    def flush(self, run: Run, timeout: float = 5.0) -> bool:
        """In sync code, wait (bounded) until `run`'s calls are recorded: litellm records sync calls on a worker thread.

        Inside a running event loop (a sync `with` in async code) it returns at
        once: blocking there would stop the loop that records async calls.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.wait(run.id, timeout=timeout)
        return False

    async def aflush(self, run: Run, timeout: float = 5.0) -> bool:
        return await self.await_recorded(run.id, timeout=timeout)

    # -- litellm's side --------------------------------------------------------
    def caller_context(self) -> CallContext | None:
        """Where a call made now belongs: the first instrumented tracer with a run here."""
        for tracer in list(self.tracers):
            here = tracer.call_context()
            if here is not None:
                return here
        return None

    def log_pre_api_call(self, model: str, messages: Any, kwargs: dict[str, Any]) -> None:
        here = self.caller_context()
        call_id = kwargs.get("litellm_call_id")
        if here is not None and call_id:
            with self._lock:
                self._pending[call_id] = here

    def _take(self, kwargs: dict[str, Any]) -> CallContext | None:
        call_id = kwargs.get("litellm_call_id") or ""
        with self._lock:
            if call_id in self._recorded or call_id in self._claimed:
                return None
            here = self._pending.pop(call_id, None)
            if here is None:
                # Some providers (litellm CustomLLM handlers that do not call
                # logging_obj.pre_call) skip the pre-call hook; litellm runs the
                # callback in a copy of the caller's context, so look there.
                here = self.caller_context()
            if here is not None:
                self._claimed[call_id] = here
            return here

    def _done(self, kwargs: dict[str, Any]) -> None:
        call_id = kwargs.get("litellm_call_id") or ""
        with self._lock:
            self._claimed.pop(call_id, None)
            self._recorded[call_id] = None
            while len(self._recorded) > 10_000:
                self._recorded.popitem(last=False)
            self._lock.notify_all()

    def log_success_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        if kwargs.get("stream") and kwargs.get("complete_streaming_response") is None and type(response_obj).__name__ != "ModelResponse":
            return  # a streamed call is recorded once, when the whole response is known (not per chunk)
        here = self._take(kwargs)
        if here is not None:
            try:
                self._record(here, kwargs, kwargs.get("complete_streaming_response") or response_obj, start_time, end_time, None)
            finally:
                self._done(kwargs)

    async def async_log_success_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.log_success_event(kwargs, response_obj, start_time, end_time)

    def log_failure_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        here = self._take(kwargs)
        if here is not None:
            try:
                self._record(here, kwargs, None, start_time, end_time, kwargs.get("exception") or response_obj)
            finally:
                self._done(kwargs)

    async def async_log_failure_event(self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.log_failure_event(kwargs, response_obj, start_time, end_time)

    def _record(self, here: CallContext, kwargs: dict[str, Any], response: Any, start_time: Any, end_time: Any, error: Any) -> None:
        model = kwargs.get("model") or "unknown"
        attributes: dict[str, Any] = {
            S.OPERATION: S.CHAT,
            S.REQUEST_MODEL: model,
            S.CONVERSATION_ID: here.run.id,
            S.AGENT_NAME: here.agent,
            S.INPUT_MESSAGES: json.dumps(openai_to_genai(kwargs.get("messages") or kwargs.get("input")), ensure_ascii=False, default=str),
        }
        provider = kwargs.get("custom_llm_provider") or (kwargs.get("litellm_params") or {}).get("custom_llm_provider")
        if provider:
            attributes[S.PROVIDER] = str(provider)
        if here.lessons:
            attributes[S.LESSONS] = here.lessons
        if response is not None:
            if get_field(response, "model"):
                attributes[S.RESPONSE_MODEL] = str(get_field(response, "model"))
            output = []
            finish_reasons = []
            for choice in get_field(response, "choices", None) or []:
                message = get_field(choice, "message") or get_field(choice, "delta") or {}
                output.append({"role": get_field(message, "role") or "assistant", "parts": content_parts(get_field(message, "content")) + tool_call_parts(get_field(message, "tool_calls"))})
                finish_reasons.append(str(get_field(choice, "finish_reason") or ""))
            attributes[S.OUTPUT_MESSAGES] = json.dumps(output, ensure_ascii=False, default=str)
            attributes["gen_ai.response.finish_reasons"] = finish_reasons
            usage = get_field(response, "usage")
            if usage is not None:
                attributes[S.INPUT_TOKENS] = int(get_field(usage, "prompt_tokens", 0) or 0)
                attributes[S.OUTPUT_TOKENS] = int(get_field(usage, "completion_tokens", 0) or 0)
        cost = kwargs.get("response_cost")
        if cost is not None:
            attributes[S.COST_USD] = float(cost)
        span = here.run.tracer.otel.start_span(f"{S.CHAT} {model}", context=here.context, attributes=attributes, start_time=_ns(start_time))
        if error is not None:
            if isinstance(error, BaseException):
                span.record_exception(error)
            span.set_attribute("error.type", type(error).__name__ if isinstance(error, BaseException) else "error")
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)))
        span.end(end_time=_ns(end_time))


_instance: LiteLLMInstrumentation | None = None
_instance_lock = threading.Lock()


def instrument(tracer: Tracer) -> LiteLLMInstrumentation:
    """Record the litellm calls made inside `tracer`'s runs (idempotent)."""
    import litellm

    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = LiteLLMInstrumentation()
        _instance.tracers.add(tracer)
        if _instance not in litellm.callbacks:
            litellm.callbacks.append(_instance)
        return _instance


def uninstrument(tracer: Tracer) -> None:
    """Stop recording for `tracer`; the callback leaves litellm when no tracer needs it."""
    import litellm

    with _instance_lock:
        if _instance is None:
            return
        _instance.tracers.discard(tracer)
        if len(_instance.tracers) == 0:
            for name in ("callbacks", "success_callback", "failure_callback", "_async_success_callback", "_async_failure_callback", "input_callback"):
                registered = getattr(litellm, name, None)
                while isinstance(registered, list) and _instance in registered:
                    registered.remove(_instance)
