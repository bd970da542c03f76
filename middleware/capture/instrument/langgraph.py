"""Record a LangGraph graph's nodes, tools and chat-model calls as faultlens spans.

    handler = tracer.langgraph_handler()
    graph.invoke(state, config={"callbacks": [handler]})

Each node is an `invoke_agent <node>` span (the agent is the node's name,
from the `langgraph_node` metadata), each tool an `execute_tool` span and each
LangChain chat-model call a `chat` span. Parents are set explicitly from
LangChain's `parent_run_id`, never from the ambient OpenTelemetry context: under
`ainvoke` callbacks run in other tasks, where the ambient context is wrong.
`GraphBubbleUp` (interrupts, `Command` to a parent graph) is control flow: the
node's span ends without an error.

litellm calls made inside a node (and tools decorated with `tracer.tool`) are
put under the node too: `Tracer.call_context` asks this handler which node is
running, from LangChain's own run context.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import trace as otel_trace
from opentelemetry.trace import Status, StatusCode

from faultlens.middleware.spans import conventions as S
from faultlens.middleware.spans.messages import maybe_json
from faultlens.middleware.model.trace import Source, Task
from ..runstate import DEFAULT_AGENT, CallContext, active_run, returned_error
from .chat_messages import openai_to_genai

if TYPE_CHECKING:
    from ..tracer import Run, Tracer


def _bubble_up(error: BaseException) -> bool:
    try:
        from langgraph.errors import GraphBubbleUp
    except ImportError:  # pragma: no cover - langgraph is a dependency
        return False
    return isinstance(error, GraphBubbleUp)


def _message_dict(message: Any) -> dict[str, Any]:
    """A LangChain message as an OpenAI-style dict."""
    role = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}.get(getattr(message, "type", ""), getattr(message, "type", "user"))
    out: dict[str, Any] = {"role": role, "content": getattr(message, "content", str(message))}
    calls = getattr(message, "tool_calls", None)
    if calls:
        out["tool_calls"] = [{"id": c.get("id"), "function": {"name": c.get("name"), "arguments": json.dumps(c.get("args"), default=str)}} for c in calls]
    if role == "tool":
        out["tool_call_id"] = getattr(message, "tool_call_id", None)
    return out


def _state_text(value: Any) -> str:
    """Node input/output as text: the messages' contents when the state holds messages, else JSON."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list) and len(value) == 1:
        return "\n".join(str(getattr(m, "content", m)) for m in value["messages"])
    if hasattr(value, "content") and hasattr(value, "type"):
        return str(value.content)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=lambda o: getattr(o, "content", str(o)))


class LangGraphCallbackHandler(BaseCallbackHandler):
    """LangChain callbacks → faultlens spans, for `config={"callbacks": [handler]}`."""

    # Run callbacks in the caller's thread/task, in order (no executor hop for a sync handler under ainvoke).
    run_inline = True
    raise_error = False

    def __init__(self, tracer: Tracer, task: Task | str | None = None, source: Source | None = None):
        self.tracer = tracer
        self.task = task
        self.source = source
        self._lock = threading.RLock()
        self._parents: dict[UUID, UUID | None] = {}
        self._spans: dict[UUID, tuple[otel_trace.Span, str | None]] = {}  # run id → (span, agent)
        self._runs: dict[UUID, tuple[Run, bool]] = {}  # graph root → (faultlens run, whether we started it)

    # -- bookkeeping ---------------------------------------------------------
    def _root_of(self, run_id: UUID) -> UUID:
        with self._lock:
            seen = set()
            while self._parents.get(run_id) is not None and run_id not in seen:
                seen.add(run_id)
                run_id = self._parents[run_id]  # type: ignore[assignment]
            return run_id

    def _nearest(self, run_id: UUID | None) -> tuple[otel_trace.Span, str | None] | None:
        """The span of the nearest traced ancestor (or the run itself)."""
        with self._lock:
            seen = set()
            while run_id is not None and run_id not in seen:
                seen.add(run_id)
                if run_id in self._spans:
                    return self._spans[run_id]
                run_id = self._parents.get(run_id)
        return None

    def _agent_of(self, run_id: UUID | None) -> str | None:
        with self._lock:
            seen = set()
            while run_id is not None and run_id not in seen:
                seen.add(run_id)
                found = self._spans.get(run_id)
                if found is not None and found[1] is not None:
                    return found[1]
                run_id = self._parents.get(run_id)
        return None

    def _run_for(self, run_id: UUID) -> Run | None:
        entry = self._runs.get(self._root_of(run_id))
        return entry[0] if entry else None

    def _start(self, run_id: UUID, parent_run_id: UUID | None, name: str, attributes: dict[str, Any], agent: str | None) -> None:
        run = self._run_for(run_id)
        if run is None:
            return
        parent = self._nearest(parent_run_id)
        context = otel_trace.set_span_in_context(parent[0]) if parent is not None else run.context()
        attributes = {**attributes, S.CONVERSATION_ID: run.id}
        if agent is not None:
            attributes.setdefault(S.AGENT_NAME, agent)
        span = self.tracer.otel.start_span(name, context=context, attributes=attributes)
        with self._lock:
            self._spans[run_id] = (span, agent)

    def _end(self, run_id: UUID, error: BaseException | None = None, /, **attributes: Any) -> None:
        with self._lock:
            entry = self._spans.pop(run_id, None)
        if entry is None:
            return
        span = entry[0]
        for key, value in attributes.items():
            if value is not None:
                span.set_attribute(key, value)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()

    # -- the tracer's side (runstate.Instrumentation) ---------------------------
    def flush(self, run: Run, timeout: float = 5.0) -> bool:
        """Nothing to wait for: callbacks run inline (`run_inline`), so each span is ended when its callback returns."""
        return True

    async def aflush(self, run: Run, timeout: float = 5.0) -> bool:
        return True

    def call_context(self) -> CallContext | None:
        """The node running in this context, if it is one of ours (see `Tracer.call_context`)."""
        try:
            from langchain_core.runnables.config import var_child_runnable_config
        except ImportError:  # pragma: no cover
            return None
        config = var_child_runnable_config.get()
        manager = (config or {}).get("callbacks")
        if manager is None or isinstance(manager, list) or self not in getattr(manager, "handlers", []):
            return None
        parent_run_id = getattr(manager, "parent_run_id", None)
        found = self._nearest(parent_run_id)
        run = self._run_for(parent_run_id) if parent_run_id is not None else None
        if found is None or run is None:
            return None
        span, _ = found
        lessons = (getattr(span, "attributes", None) or {}).get(S.LESSONS) or []
        return CallContext(run=run, agent=self._agent_of(parent_run_id) or DEFAULT_AGENT, context=otel_trace.set_span_in_context(span), lessons=list(lessons))

    # -- chains and nodes ------------------------------------------------------
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                      tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
        name = kwargs.get("name") or (serialized or {}).get("name") or "graph"
        if parent_run_id is None:
            self._start_graph(run_id, name, inputs)
            return
        node = (metadata or {}).get("langgraph_node")
        if node is None or name != node or str(node).startswith("__"):
            return  # routers, sequences and other plumbing inside a node are not steps
        self._start(
            run_id,
            parent_run_id,
            f"{S.AGENT} {node}",
            {S.OPERATION: S.AGENT, S.AGENT_NAME: str(node), S.INPUT_MESSAGES: json.dumps([{"role": "user", "parts": [{"type": "text", "content": _state_text(inputs)}]}], ensure_ascii=False)},
            str(node),
        )
        run = self._run_for(run_id)
        if run is not None:
            run.add_agent(str(node))

    def _start_graph(self, run_id: UUID, name: str, inputs: Any) -> None:
        run = active_run()
        owned = False
        if run is None or run.tracer is not self.tracer:
            task = self.task if self.task is not None else _state_text(inputs)
            run = self.tracer.start_run(task, source=self.source or Source(framework="langgraph"), name=name)
            owned = True
        with self._lock:
            self._runs[run_id] = (run, owned)
        # The graph itself is plumbing (no GenAI operation, so no step): it groups the nodes.
        parent = otel_trace.get_current_span() if not owned else run.span
        context = otel_trace.set_span_in_context(parent) if parent is not None and parent.get_span_context().is_valid else run.context()
        span = self.tracer.otel.start_span(f"langgraph {name}", context=context, attributes={S.CONVERSATION_ID: run.id, "langgraph.graph.name": name})
        with self._lock:
            self._spans[run_id] = (span, None)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        with self._lock:
            entry = self._spans.get(run_id)
        if entry is not None and entry[1] is not None:
            self._end(run_id, **{S.OUTPUT_MESSAGES: json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": _state_text(outputs)}]}], ensure_ascii=False)})
        else:
            self._end(run_id)
        self._finish_graph(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        if _bubble_up(error):
            # An interrupt is the graph pausing, not failing: no error on the span.
            self._end(run_id, **{S.CONTENT: f"interrupted ({type(error).__name__})", "faultlens.interrupted": True})
            self._finish_graph(run_id, None)
            return
        self._end(run_id, error)
        self._finish_graph(run_id, error)

    def _finish_graph(self, run_id: UUID, error: BaseException | None) -> None:
        with self._lock:
            entry = self._runs.pop(run_id, None)
            if entry is None:
                self._parents.pop(run_id, None)
                return
            # The graph is done: forget its runs.
            for child in [k for k in self._parents if self._root_of(k) == run_id]:
                self._parents.pop(child, None)
        run, owned = entry
        if owned:
            # The other instrumentations (litellm's worker thread) record the run's last calls first.
            self.tracer.flush_instrumentations(run)
            run.end(error)

    # -- tools -------------------------------------------------------------------
    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                      tags: list[str] | None = None, metadata: dict[str, Any] | None = None, inputs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        arguments = inputs if inputs is not None else maybe_json(input_str)
        agent = (metadata or {}).get("langgraph_node") or self._agent_of(parent_run_id)
        self._start(run_id, parent_run_id, f"{S.TOOL} {name}", {S.OPERATION: S.TOOL, S.TOOL_NAME: str(name), S.TOOL_ARGUMENTS: json.dumps(arguments, ensure_ascii=False, default=str)}, agent)

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        content = getattr(output, "content", output)
        error = returned_error(output)
        if error is None and not hasattr(output, "content"):
            error = returned_error(maybe_json(output))
        with self._lock:
            entry = self._spans.get(run_id)
        if entry is not None and error is not None:
            entry[0].set_attribute("error.type", "tool_error")
            entry[0].set_status(Status(StatusCode.ERROR, error))
        self._end(run_id, **{S.TOOL_RESULT: content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)})

    def on_tool_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        if _bubble_up(error):
            self._end(run_id, **{"faultlens.interrupted": True})
            return
        self._end(run_id, error)

    # -- chat models -------------------------------------------------------------
    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: list[list[Any]], *, run_id: UUID, parent_run_id: UUID | None = None,
                      tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id
        model = (metadata or {}).get("ls_model_name") or kwargs.get("name") or (serialized or {}).get("name") or "chat_model"
        agent = (metadata or {}).get("langgraph_node") or self._agent_of(parent_run_id)
        flat = [_message_dict(m) for batch in messages for m in batch]
        attributes = {S.OPERATION: S.CHAT, S.REQUEST_MODEL: str(model), S.INPUT_MESSAGES: json.dumps(openai_to_genai(flat), ensure_ascii=False, default=str)}
        self._start(run_id, parent_run_id, f"{S.CHAT} {model}", attributes, agent)

    def on_llm_end(self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        outputs = []
        usage_in = usage_out = None
        for generation in (getattr(response, "generations", None) or [[]])[0]:
            message = getattr(generation, "message", None)
            outputs.append(_message_dict(message) if message is not None else {"role": "assistant", "content": getattr(generation, "text", "")})
            usage = getattr(message, "usage_metadata", None) if message is not None else None
            if usage:
                usage_in, usage_out = usage.get("input_tokens"), usage.get("output_tokens")
        self._end(
            run_id,
            **{S.OUTPUT_MESSAGES: json.dumps(openai_to_genai(outputs), ensure_ascii=False, default=str), S.INPUT_TOKENS: usage_in, S.OUTPUT_TOKENS: usage_out},
        )

    def on_llm_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._end(run_id, error)
