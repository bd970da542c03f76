"""The tracer: record live agent runs as OpenTelemetry spans and store them as steps.

    from faultlens.middleware import Tracer

    tracer = Tracer(db="runs.db")

    @tracer.tool(name="search")
    def search(query: str) -> dict: ...

    @tracer.agent(name="researcher", role="finds facts")
    def researcher(question: str) -> str: ...

    with tracer.run(task="Who wrote Dune?") as run:
        answer = researcher("Who wrote Dune?")
        run.record_outcome(success="Herbert" in answer)

Spans follow the OpenTelemetry GenAI semantic conventions (`invoke_workflow`,
`invoke_agent`, `chat`, `execute_tool`, `gen_ai.*` attributes); the run's
trace id is both the OTel trace id and `gen_ai.conversation.id`.

The work is split along OpenTelemetry's own seam: `RunContextProcessor` notes
on each starting span which run and agent it belongs to, and
`StoreSpanExporter` writes finished spans to the store as `Step`s (see
`middleware.spans`, `middleware.ingest`), behind a `BatchSpanProcessor` by default so the agent's
thread pays what the bare SDK pays (`Tracer(durability="step")` commits each
step as it ends instead; see `Tracer` for what each mode can lose). Other
exporters go beside it: `tracer.add_span_processor(...)`, or the standard
`OTEL_TRACES_EXPORTER` (`otlp`, `console`) and `OTEL_EXPORTER_OTLP_*` variables.

The tracer uses its own `TracerProvider` (not the global one unless
`set_global=True`), so it never changes what the rest of a program exports.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Status, StatusCode

from faultlens.middleware.spans import conventions as S
from ..model.trace import AgentInfo, Media, Outcome, Source, StepKind, StepRole, Task, Trace, new_id
from .runstate import DEFAULT_AGENT, CallContext, Instrumentation, to_text
from .runstate import current_run_var as _current_run
from .export import RunContextProcessor, StoreSpanExporter
from .wrapping import ToolSpan, argument_binder, text_messages, to_json, wrap_in_span

if TYPE_CHECKING:
    from ..store.protocol import Store

log = logging.getLogger("faultlens.tracer")

F = TypeVar("F", bound=Callable[..., Any])

_current_agent: ContextVar[str | None] = ContextVar("faultlens_agent", default=None)
_pending_trace_id: ContextVar[int | None] = ContextVar("faultlens_pending_trace_id", default=None)


def current_tracer() -> Tracer | None:
    """The tracer of the run entered right now (`with tracer.run(...)`), or None outside runs."""
    run = _current_run.get()
    return run.tracer if run is not None else None


def _is_hex_id(value: str, length: int) -> bool:
    return len(value) == length and all(c in "0123456789abcdef" for c in value) and int(value, 16) != 0


class _RunIdGenerator(RandomIdGenerator):
    """Gives a run's workflow span the run's id as its OTel trace id."""

    def generate_trace_id(self) -> int:
        pending = _pending_trace_id.get()
        return pending if pending is not None else super().generate_trace_id()


class Run:
    """One traced run of an agent system on one task. Use `Tracer.run(...)` to make one."""

    def __init__(self, tracer: Tracer, trace: Trace, name: str):
        self.tracer = tracer
        self.trace = trace
        self.name = name
        self.outcome: Outcome | None = None
        self.span: otel_trace.Span | None = None
        self._agents = {a.name: a for a in trace.agents}
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.trace.id

    def add_agent(self, name: str, role: str = "", description: str = "") -> None:
        with self._lock:
            known = self._agents.get(name)
            if known is None or (role and not known.role) or (description and not known.description):
                self._agents[name] = AgentInfo(name=name, role=role or (known.role if known else ""), description=description or (known.description if known else ""))
                if self.span is not None:
                    self.span.set_attribute(S.TRACE_AGENTS, to_json([a.model_dump(mode="json") for a in self._agents.values()]))

    def record_outcome(self, success: bool, score: float | None = None, detail: str | None = None, evaluator: str | None = None) -> Outcome:
        """Say how the run ended; stored at once (and again with the workflow span)."""
        self.outcome = Outcome(success=success, score=score, detail=detail, evaluator=evaluator)
        self.tracer.store.set_outcome(self.id, self.outcome)
        if self.span is not None:
            self.span.set_attribute(S.TRACE_OUTCOME, self.outcome.model_dump_json())
        return self.outcome

    # Explicit start/end, for integrations whose run does not fit a `with` block.
    def start(self) -> Run:
        trace = self.trace
        attributes = {
            S.OPERATION: S.WORKFLOW,
            S.CONVERSATION_ID: trace.id,
            S.INPUT_MESSAGES: text_messages("user", trace.task.query),
            S.TRACE_TASK: trace.task.model_dump_json(),
            S.TRACE_AGENTS: to_json([a.model_dump(mode="json") for a in trace.agents]),
            S.TRACE_SOURCE: trace.source.model_dump_json(),
            S.SCHEMA_VERSION_ATTR: trace.schema_version,
        }
        if trace.metadata:
            attributes[S.TRACE_METADATA] = to_json(trace.metadata)
        start_ns = time.time_ns()
        trace.created_at = start_ns / 1e9
        # The header goes in first so steps have a home even if the run crashes.
        self.tracer.store.begin_trace(trace)
        token = _pending_trace_id.set(int(trace.id, 16) if _is_hex_id(trace.id, 32) else None)
        try:
            # A run is a root span: its own trace, never a child of whatever is current.
            self.span = self.tracer.otel.start_span(f"{S.WORKFLOW} {self.name}", context=otel_context.Context(), attributes=attributes, start_time=start_ns)
        finally:
            _pending_trace_id.reset(token)
        self.tracer._context.watch(self.span, trace.id)
        return self

    def end(self, error: BaseException | None = None) -> None:
        if self.span is None:
            return
        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            if self.outcome is None:
                # A run that raised did not succeed; say so, and say who decided.
                self.record_outcome(False, detail=f"the run raised {type(error).__name__}: {error}", evaluator="tracer")
        self.span.end()
        self.span = None
        # A run's steps are in the store once it has ended (run listeners read them).
        self.tracer.flush_store()

    def context(self) -> otel_context.Context:
        return otel_trace.set_span_in_context(self.span) if self.span is not None else otel_context.Context()


class RunScope:
    """What `Tracer.run` returns: a sync and async context manager around one `Run`."""

    def __init__(self, tracer: Tracer, start: Callable[[], Run]):
        self._tracer, self._start = tracer, start
        self._tokens: tuple[Any, ...] = ()
        self.run: Run | None = None

    def __enter__(self) -> Run:
        run = self.run = self._start()
        self._tokens = (_current_run.set(run), otel_context.attach(run.context()), _current_agent.set(None))
        return run

    def _close(self, error: BaseException | None) -> None:
        run_token, span_token, agent_token = self._tokens
        try:
            assert self.run is not None
            self.run.end(error)
        finally:
            _current_agent.reset(agent_token)
            otel_context.detach(span_token)
            _current_run.reset(run_token)
        for listener in list(self._tracer._run_listeners):
            try:
                listener(self.run)
            except Exception:
                log.exception("run listener %r failed for run %s", listener, self.run.id)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.run is not None:
            self._tracer.flush_instrumentations(self.run)
        self._close(exc)

    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.run is not None:
            await self._tracer.aflush_instrumentations(self.run)
        self._close(exc)


Durability = Literal["batch", "step"]


class Tracer:
    """Records runs, agents, tools and model calls as GenAI-convention spans, stored as steps.

    Args:
        store: the store to write to (default: `open_store(db)`).
        db: a SQLite path or postgresql:// URL when `store` is not given
            (default `$FAULTLENS_DB` or `.faultlens/faultlens.db`).
        service_name: the OTel `service.name` resource attribute.
        set_global: also install this tracer's provider as the global one.
        env_exporters: add the exporters named by `OTEL_TRACES_EXPORTER`.
        durability: when steps reach the store.
            "batch" (default): finished spans are queued and written by a
            background thread, one transaction per batch
            (OpenTelemetry's `BatchSpanProcessor`), and flushed when a run
            ends, on `force_flush()`/`shutdown()` and at normal interpreter
            exit. A process killed before then (SIGKILL, a signal with no
            handler, `os._exit`) loses the steps not yet written: at most the
            last `schedule_delay_millis` of them, plus the batch being written.
            "step": each span is written and committed on the agent's thread
            as it ends (one transaction per step, about ten times the cost):
            a killed process keeps every step that had ended.
            In both modes the run's header (task, agents) is written when the
            run starts and an outcome when it is recorded.
        schedule_delay_millis: in "batch" mode, the longest a finished step
            waits in memory before it is written.
        max_batch_size: in "batch" mode, the most steps one transaction
            writes; a batch this big is written before the delay is up.
        max_queue_size: in "batch" mode, how many finished spans may wait; a
            program that ends spans faster than the store takes them for this
            long drops the excess (OpenTelemetry's rule; logged by the SDK).
    """

    def __init__(
        self,
        store: Store | None = None,
        db: str | Path | None = None,
        *,
        service_name: str = "faultlens",
        set_global: bool = False,
        env_exporters: bool = True,
        durability: Durability = "batch",
        schedule_delay_millis: int = 1000,
        max_batch_size: int = 4096,
        max_queue_size: int = 65536,
    ):
        if durability not in ("batch", "step"):
            raise ValueError(f"durability must be 'batch' or 'step', not {durability!r}")
        if store is None:
            from ..store.sqlite import open_store  # the store's dependencies load when a tracer opens one, not on import

            store = open_store(db)
        self.store = store
        self.durability = durability
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=_RunIdGenerator())
        self._context = RunContextProcessor()
        self.exporter = StoreSpanExporter(self.store)
        self._store_processor: SpanProcessor = (
            SimpleSpanProcessor(self.exporter)
            if durability == "step"
            else BatchSpanProcessor(self.exporter, max_queue_size=max_queue_size, schedule_delay_millis=schedule_delay_millis, max_export_batch_size=max_batch_size)
        )
        # Context first: it stamps run and agent on a starting span before anything else sees it.
        self.provider.add_span_processor(self._context)
        self.provider.add_span_processor(self._store_processor)
        if env_exporters:
            self._add_env_exporters()
        self.otel = self.provider.get_tracer("faultlens")
        if set_global:
            otel_trace.set_tracer_provider(self.provider)
        # Weak: a LangGraph handler lives as long as the graph call that was given it.
        self._instrumentations: weakref.WeakSet[Instrumentation] = weakref.WeakSet()
        self._litellm: Instrumentation | None = None
        self._run_listeners: list[Callable[[Run], None]] = []

    @property
    def errors(self) -> list[BaseException]:
        """Spans that could not be stored (each also logged)."""
        return self.exporter.errors

    def flush_store(self, timeout_millis: int = 30000) -> bool:
        """Write every finished span to the store now (other exporters are not flushed)."""
        return self._store_processor.force_flush(timeout_millis)

    # -- run listeners -----------------------------------------------------
    def on_run_end(self, listener: Callable[[Run], None]) -> Callable[[Run], None]:
        """Call `listener(run)` after each run of this tracer has ended: its spans are stored and its
        outcome (if any) recorded. Usable as a decorator; `remove_run_listener` undoes it.

        This is how a feedback loop hears about failures without wrapping your code. A listener that
        raises is logged and does not break the run that ended.
        """
        self._run_listeners.append(listener)
        return listener

    def remove_run_listener(self, listener: Callable[[Run], None]) -> None:
        if listener in self._run_listeners:
            self._run_listeners.remove(listener)

    # -- exporters ---------------------------------------------------------
    def add_span_processor(self, processor: SpanProcessor) -> None:
        """Send spans somewhere else too (any OTel SDK span processor)."""
        self.provider.add_span_processor(processor)

    def add_exporter(self, exporter: Any, *, batch: bool = True) -> None:
        self.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))

    def _add_env_exporters(self) -> None:
        for name in [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]:
            if name == "none":
                continue
            entry = name
            if name == "otlp":
                protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
                entry = "otlp_proto_grpc" if protocol == "grpc" else "otlp_proto_http"
            found = list(entry_points(group="opentelemetry_traces_exporter", name=entry))
            if not found:
                raise ValueError(f"OTEL_TRACES_EXPORTER names {name!r}, but no OpenTelemetry exporter {entry!r} is installed")
            self.add_exporter(found[0].load()(), batch=name != "console")

    def force_flush(self) -> None:
        self.provider.force_flush()

    def shutdown(self) -> None:
        """Flush exporters and remove this tracer's litellm callback."""
        self.uninstrument_litellm()
        self.provider.shutdown()

    # -- runs --------------------------------------------------------------
    def start_run(
        self,
        task: Task | str,
        agents: Sequence[AgentInfo | str] | None = None,
        source: Source | None = None,
        *,
        name: str = "run",
        trace_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Run:
        """Start a run without entering it (call `run.end()`); most code wants `with tracer.run(...)`."""
        trace = Trace(
            id=trace_id or new_id(),
            task=task if isinstance(task, Task) else Task(query=str(task)),
            agents=[a if isinstance(a, AgentInfo) else AgentInfo(name=str(a)) for a in agents or []],
            source=source or Source(),
            metadata=metadata or {},
        )
        return Run(self, trace, name).start()

    def run(
        self,
        task: Task | str,
        agents: Sequence[AgentInfo | str] | None = None,
        source: Source | None = None,
        *,
        name: str = "run",
        trace_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> RunScope:
        """Trace one run of the agent system on `task`: `with tracer.run(...) as run:`.

        Works in sync and async code (contextvars). In async code prefer
        `async with`, which also lets litellm's logging worker record the
        run's last model calls before the run is closed.
        """
        return RunScope(self, lambda: self.start_run(task, agents, source, name=name, trace_id=trace_id, metadata=metadata))

    def current_run(self) -> Run | None:
        here = self.call_context()
        return here.run if here is not None else None

    def call_context(self) -> CallContext | None:
        """The run, agent and parent span a call made right now belongs to (None outside runs).

        Inside a LangGraph node traced by our callback handler (and not inside
        a decorated agent), the node is the agent and its span the parent.
        """
        return self._call_context(with_lessons=True)

    def _call_context(self, *, with_lessons: bool) -> CallContext | None:
        # Reading the lessons off the current span costs as much as the rest of this
        # together; agent and tool spans do not carry them, so their decorators skip it.
        run = _current_run.get()
        agent = _current_agent.get()
        if agent is None and self._instrumentations:
            for instrumentation in list(self._instrumentations):
                found = instrumentation.call_context()
                if found is not None:
                    return found
        if run is None or run.tracer is not self:
            return None
        lessons: list[str] = []
        if with_lessons:
            attributes = getattr(otel_trace.get_current_span(), "attributes", None) or {}
            lessons = list(attributes.get(S.LESSONS) or [])
        return CallContext(run=run, agent=agent or DEFAULT_AGENT, context=otel_context.get_current(), lessons=lessons)

    def record_outcome(self, success: bool, score: float | None = None, detail: str | None = None, evaluator: str | None = None) -> Outcome:
        """Record the current run's outcome (see `Run.record_outcome`)."""
        run = _current_run.get()
        if run is None:
            raise RuntimeError("record_outcome() needs a current run: call it inside `with tracer.run(...)` or use run.record_outcome")
        return run.record_outcome(success, score=score, detail=detail, evaluator=evaluator)

    # -- agents and tools ----------------------------------------------------
    def agent(self, fn: F | None = None, *, name: str | None = None, role: str = "", description: str = "", output: bool = True) -> Any:
        """Decorate a sync or async function as an agent: one `invoke_agent` span per call.

        The call's arguments are the agent's input, its return value the
        agent's message (a step when not None; `output=False` when the agent
        records what it says itself, e.g. with `tracer.final_answer`); calls
        made inside (tools, litellm, other agents) nest under it.
        """

        def decorate(func: F) -> F:
            agent_name = name or func.__name__
            bind = argument_binder(inspect.signature(func))

            @contextmanager
            def span_for(args: tuple, kwargs: dict) -> Iterator[Callable[[Any], None]]:
                here = self._call_context(with_lessons=False)
                if here is not None:
                    here.run.add_agent(agent_name, role, description)
                arguments = bind(args, kwargs)
                given = next(iter(arguments.values())) if len(arguments) == 1 and isinstance(next(iter(arguments.values())), str) else arguments
                attributes = {S.OPERATION: S.AGENT, S.AGENT_NAME: agent_name, S.INPUT_MESSAGES: text_messages("user", to_text(given))}
                if description:
                    attributes[S.AGENT_DESCRIPTION] = description
                if here is not None:
                    attributes[S.CONVERSATION_ID] = here.run.id
                token = _current_agent.set(agent_name)
                # The run may come from a LangGraph handler rather than `with tracer.run`:
                # make it current so what this agent calls finds it.
                run_token = _current_run.set(here.run if here is not None else _current_run.get())
                try:
                    with self.otel.start_as_current_span(
                        f"{S.AGENT} {agent_name}", context=here.context if here is not None else None, attributes=attributes
                    ) as span:

                        def finish(result: Any) -> None:
                            if output and result is not None:
                                span.set_attribute(S.OUTPUT_MESSAGES, text_messages("assistant", to_text(result)))

                        yield finish
                finally:
                    _current_run.reset(run_token)
                    _current_agent.reset(token)

            wrapper = wrap_in_span(func, span_for)
            wrapper.faultlens_agent = agent_name
            return wrapper

        return decorate(fn) if fn is not None else decorate

    def tool(self, fn: F | None = None, *, name: str | None = None, description: str = "") -> Any:
        """Decorate a sync or async function as a tool: one `execute_tool` span per call.

        A call that raises, or that *returns* an error (see `returned_error`),
        is an error step.
        """

        def decorate(func: F) -> F:
            tool_name = name or func.__name__
            bind = argument_binder(inspect.signature(func))

            def span_for(args: tuple, kwargs: dict) -> ToolSpan:
                here = self._call_context(with_lessons=False)
                attributes = {
                    S.OPERATION: S.TOOL,
                    S.STEP_ROLE: StepRole.tool_result.value,  # what the tool did: evidence about the call, not a decision
                    S.TOOL_NAME: tool_name,
                    S.TOOL_ARGUMENTS: to_json(bind(args, kwargs)),
                }
                if description:
                    attributes["gen_ai.tool.description"] = description
                if here is not None:
                    attributes[S.CONVERSATION_ID] = here.run.id
                    attributes[S.AGENT_NAME] = here.agent
                return ToolSpan(self.otel.start_as_current_span(f"{S.TOOL} {tool_name}", context=here.context if here is not None else None, attributes=attributes))

            wrapper = wrap_in_span(func, span_for)
            wrapper.faultlens_tool = tool_name
            return wrapper

        return decorate(fn) if fn is not None else decorate

    # -- explicit steps ------------------------------------------------------
    def message(
        self,
        content: str,
        *,
        agent: str | None = None,
        kind: StepKind | str = StepKind.message,
        media: Sequence[Media] = (),
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Record one step explicitly (a message, plan, final answer or human turn) in the current run."""
        kind = StepKind(kind)
        here = self.call_context()
        if here is None:
            raise RuntimeError(f"tracer.{kind.value}() needs a current run: call it inside `with tracer.run(...)`")
        who = agent or here.agent
        attributes: dict[str, Any] = {
            S.STEP_KIND: kind.value,
            S.AGENT_NAME: who,
            S.CONVERSATION_ID: here.run.id,
            S.OUTPUT_MESSAGES: text_messages("user" if kind is StepKind.human else "assistant", content),
        }
        if media:
            attributes[S.MEDIA] = to_json([m.model_dump(mode="json", exclude_none=True) for m in media])
        if metadata:
            attributes[S.STEP_METADATA] = to_json(metadata)
        if here.lessons:
            attributes[S.LESSONS] = here.lessons
        if agent is not None and agent != here.agent:
            here.run.add_agent(agent)
        self.otel.start_span(f"{kind.value} {who}", context=here.context, attributes=attributes).end()

    def plan(self, content: str, *, agent: str | None = None, **kwargs: Any) -> None:
        self.message(content, agent=agent, kind=StepKind.plan, **kwargs)

    def final_answer(self, content: str, *, agent: str | None = None, **kwargs: Any) -> None:
        self.message(content, agent=agent, kind=StepKind.final_answer, **kwargs)

    def human(self, content: str, *, agent: str = "human", **kwargs: Any) -> None:
        self.message(content, agent=agent, kind=StepKind.human, **kwargs)

    def set_lessons(self, lesson_ids: Sequence[str]) -> None:
        """Note on the current span which lessons the agent was shown (`faultlens.lessons`)."""
        otel_trace.get_current_span().set_attribute(S.LESSONS, [str(i) for i in lesson_ids])

    def attach_media(self, *media: Media) -> None:
        """Attach images/frames to the current span's step (e.g. what an agent looked at)."""
        span = otel_trace.get_current_span()
        existing = json.loads((getattr(span, "attributes", None) or {}).get(S.MEDIA, "[]"))
        span.set_attribute(S.MEDIA, to_json(existing + [m.model_dump(mode="json", exclude_none=True) for m in media]))

    # -- instrumentations ------------------------------------------------------
    def add_instrumentation(self, instrumentation: Instrumentation) -> None:
        """Ask `instrumentation` where calls belong and flush it before each run ends (see `runstate.Instrumentation`).

        Held weakly: an instrumentation nobody else keeps is dropped.
        """
        self._instrumentations.add(instrumentation)

    def remove_instrumentation(self, instrumentation: Instrumentation) -> None:
        self._instrumentations.discard(instrumentation)

    def flush_instrumentations(self, run: Run, timeout: float = 5.0) -> bool:
        """Let every instrumentation record what it still holds of `run` (sync code); False if one could not in time."""
        return all([instrumentation.flush(run, timeout) for instrumentation in list(self._instrumentations)])

    async def aflush_instrumentations(self, run: Run, timeout: float = 5.0) -> bool:
        """`flush_instrumentations` in async code."""
        return all([await instrumentation.aflush(run, timeout) for instrumentation in list(self._instrumentations)])

    def instrument_litellm(self) -> Any:
        """Record every litellm completion made inside this tracer's runs as a `chat` step (idempotent)."""
        from .instrument.litellm import instrument

        self._litellm = instrument(self)
        self.add_instrumentation(self._litellm)
        return self._litellm

    def uninstrument_litellm(self) -> None:
        if self._litellm is None:
            return
        from .instrument.litellm import uninstrument

        uninstrument(self)
        self.remove_instrumentation(self._litellm)
        self._litellm = None

    def langgraph_handler(self, task: Task | str | None = None, source: Source | None = None) -> Any:
        """A LangChain callback handler for `config={"callbacks": [...]}` of a LangGraph graph.

        Inside `with tracer.run(...)` the graph's steps join that run; outside,
        each graph invocation is a run of its own on `task` (default: its input).
        """
        from .instrument.langgraph import LangGraphCallbackHandler

        handler = LangGraphCallbackHandler(self, task=task, source=source)
        self.add_instrumentation(handler)
        return handler
