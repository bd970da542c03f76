"""Reflection at run time: put an agent's lessons into its prompt and record which ones it saw.

For litellm-based agents:

    messages = with_lessons(messages, agent="reader", task=question, memory=memory)
    response = litellm.completion(model=..., messages=messages)

or, in one call, `completion(agent=..., task=..., memory=..., model=..., messages=...)`.

For LangGraph nodes, decorate the node; inside it `with_lessons(messages)` needs
no arguments:

    @node_with_lessons("reader", memory=memory, task="question")
    def reader(state): ...

Either way the ids of the lessons shown are set on the current OpenTelemetry
span as the attribute ``faultlens.lessons``; the faultlens tracer copies it to
the recorded `Step.lessons`, which is how outcomes are credited to lessons
(`record_trace_outcome`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace as otel_trace

from faultlens.middleware.model.trace import Lesson, Trace
from faultlens.middleware.errors import ConfigError, NotFound
from faultlens.middleware.model.taxonomy import get_mode, is_mode

from .memory import BaseLessonMemory
from .reflect import ALL_AGENTS

LESSONS_ATTRIBUTE = "faultlens.lessons"

LESSONS_HEADER = "Lessons from earlier runs (follow one when its situation matches yours):"

_default_memory: BaseLessonMemory | None = None


def set_default_memory(memory: BaseLessonMemory | None) -> None:
    """The memory `with_lessons` and `node_with_lessons` use when none is passed."""
    global _default_memory
    _default_memory = memory


def _memory(memory: BaseLessonMemory | None) -> BaseLessonMemory:
    if memory is not None:
        return memory
    if _default_memory is None:
        raise ConfigError("no lesson memory given and no default set (feedback.hooks.set_default_memory)")
    return _default_memory


@dataclass
class NodeLessons:
    agent: str
    task: str
    lessons: list[Lesson] = field(default_factory=list)


_current: contextvars.ContextVar[NodeLessons | None] = contextvars.ContextVar("faultlens_node_lessons", default=None)


def current_lessons() -> NodeLessons | None:
    """The lessons retrieved for the LangGraph node running now (inside `node_with_lessons`), if any."""
    return _current.get()


def format_lesson(lesson: Lesson) -> str:
    """One lesson as a prompt line. The bracketed header is stable, so a program can read it back."""
    mode = f"{lesson.mode} {get_mode(lesson.mode).name}" if is_mode(lesson.mode) else "general"
    who = "every agent" if lesson.agent == ALL_AGENTS else lesson.agent
    return f"- [lesson {lesson.id} | for {who} | {mode}] When: {lesson.situation}. Mistake: {lesson.mistake} Instead: {lesson.advice}"


def lessons_block(lessons: Sequence[Lesson]) -> str:
    """The text added to a system prompt ("" when there are no lessons)."""
    if not lessons:
        return ""
    return "\n".join([LESSONS_HEADER, *(format_lesson(lesson) for lesson in lessons)])


_LINE = re.compile(r"^- \[lesson (?P<id>[^ |]+) \| for (?P<agent>[^|]+?) \| (?P<mode>[^\]]+)\]", re.M)


def parse_lessons_block(text: str) -> list[dict[str, str | None]]:
    """Read back the lessons shown in a prompt: id, addressee and mode code (None for a general lesson)."""
    out = []
    for m in _LINE.finditer(text or ""):
        mode = m["mode"].split(" ", 1)[0]
        out.append({"id": m["id"], "agent": m["agent"].strip(), "mode": mode if is_mode(mode) else None})
    return out


def current_step_span(tracer: Any = None) -> Any:
    """The span of the step being made now: the faultlens tracer's idea of it when a run is active.

    Inside a LangGraph node traced by the tracer's callback handler, the node's
    span is not OpenTelemetry's current span (LangChain callbacks do not attach
    it), so the tracer is asked (`Tracer.call_context`): `tracer` if given,
    else the tracer of the run entered with `with tracer.run(...)`. Elsewhere
    it is the current span.
    """
    if tracer is None:
        from faultlens.middleware.capture.tracer import current_tracer

        tracer = current_tracer()
    if tracer is not None:
        here = tracer.call_context()
        if here is not None:
            return otel_trace.get_current_span(here.context)
    return otel_trace.get_current_span()


def record_lessons(lesson_ids: Sequence[str], span: Any = None, *, tracer: Any = None) -> None:
    """Add lesson ids to ``faultlens.lessons`` on `span` (default: `current_step_span(tracer)`), keeping any already there."""
    if not lesson_ids:
        return
    span = span if span is not None else current_step_span(tracer)
    if not span.is_recording():
        return
    existing = list((getattr(span, "attributes", None) or {}).get(LESSONS_ATTRIBUTE) or [])
    span.set_attribute(LESSONS_ATTRIBUTE, list(dict.fromkeys([*existing, *lesson_ids])))


def with_lessons(
    messages: Sequence[dict[str, Any]],
    *,
    agent: str | None = None,
    task: str | None = None,
    memory: BaseLessonMemory | None = None,
    lessons: Sequence[Lesson] | None = None,
    k: int | None = None,
    record: bool = True,
    tracer: Any = None,
) -> list[dict[str, Any]]:
    """`messages` with the agent's lessons for `task` appended to the system prompt (one is added if absent).

    Lessons come from `lessons` if given, else from the enclosing
    `node_with_lessons` when `agent` is omitted, else from `memory` (or the
    default memory). The input list is not modified. With `record`, the ids
    shown are set on the current span.
    """
    if lessons is None:
        node = current_lessons()
        if agent is None and node is not None:
            lessons = node.lessons
        else:
            if agent is None or task is None:
                raise ConfigError("with_lessons needs agent and task (or must run inside node_with_lessons)")
            lessons = _memory(memory).retrieve(agent, task, k)
    out = [dict(m) for m in messages]
    block = lessons_block(lessons)
    if not block:
        return out
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content'].rstrip()}\n\n{block}"
    else:
        out.insert(0, {"role": "system", "content": block})
    if record:
        record_lessons([lesson.id for lesson in lessons], tracer=tracer)
    return out


def completion(*, agent: str, task: str, messages: Sequence[dict[str, Any]], memory: BaseLessonMemory | None = None, k: int | None = None, **kwargs: Any) -> Any:
    """`litellm.completion` with the agent's lessons in the system prompt."""
    import litellm

    return litellm.completion(messages=with_lessons(messages, agent=agent, task=task, memory=memory, k=k), **kwargs)


async def acompletion(*, agent: str, task: str, messages: Sequence[dict[str, Any]], memory: BaseLessonMemory | None = None, k: int | None = None, **kwargs: Any) -> Any:
    """`litellm.acompletion` with the agent's lessons in the system prompt."""
    import litellm

    return await litellm.acompletion(messages=with_lessons(messages, agent=agent, task=task, memory=memory, k=k), **kwargs)


def _task_text(state: Any, task: str | Callable[[Any], str]) -> str:
    if callable(task):
        return task(state)
    value = state.get(task) if isinstance(state, dict) else getattr(state, task, None)
    if value is None:
        raise NotFound(f"node_with_lessons: the graph state has no {task!r} field to read the task from")
    return str(value)


def node_with_lessons(
    agent: str,
    *,
    memory: BaseLessonMemory | None = None,
    task: str | Callable[[Any], str] = "task",
    k: int | None = None,
    tracer: Any = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a LangGraph node: retrieve `agent`'s lessons for the task in the state before it runs.

    `task` is the state key holding the task text, or a function of the state.
    The lessons are recorded on the current span and available inside the node
    through `current_lessons()` and argument-less `with_lessons(messages)`.
    The node's signature is kept, so LangGraph still passes `config` if it asks for it.
    Pass the `tracer` whose `langgraph_handler()` traces the graph when the
    graph is invoked outside `with tracer.run(...)`.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def enter(state: Any) -> contextvars.Token:
            text = _task_text(state, task)
            lessons = _memory(memory).retrieve(agent, text, k)
            record_lessons([lesson.id for lesson in lessons], tracer=tracer)
            return _current.set(NodeLessons(agent, text, lessons))

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
                token = enter(state)
                try:
                    return await fn(state, *args, **kwargs)
                finally:
                    _current.reset(token)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(state: Any, *args: Any, **kwargs: Any) -> Any:
            token = enter(state)
            try:
                return fn(state, *args, **kwargs)
            finally:
                _current.reset(token)

        return wrapper

    return decorate


def lesson_ids_of(trace: Trace) -> list[str]:
    """Every lesson id shown anywhere in a run, once each, in order of first showing."""
    return list(dict.fromkeys(lesson_id for step in trace.steps for lesson_id in step.lessons))


def record_trace_outcome(memory: BaseLessonMemory, trace: Trace) -> list[Lesson]:
    """Credit a finished run's outcome to the lessons its steps were shown. Returns the updated lessons."""
    if trace.outcome is None:
        raise ConfigError(f"trace {trace.id} has no outcome yet")
    return memory.record_outcome(lesson_ids_of(trace), trace.outcome.success)
