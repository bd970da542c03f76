"""What the tracer and its instrumentations share about the run in progress.

The run entered right now lives in a context variable (each thread and
asyncio task has its own); `CallContext` says where a call made now belongs;
`Instrumentation` is all the tracer knows of an instrumentation (litellm,
LangGraph). Instrumentations read the run here rather than from the tracer,
which imports them only when asked to (`Tracer.instrument_litellm`).
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from opentelemetry import context as otel_context
from pydantic import BaseModel

if TYPE_CHECKING:
    from .tracer import Run

DEFAULT_AGENT = "main"

current_run_var: ContextVar[Run | None] = ContextVar("faultlens_run", default=None)


def active_run() -> Run | None:
    """The run entered right now in this thread or task (`with tracer.run(...)`), or None."""
    return current_run_var.get()


@dataclass
class CallContext:
    """Where a model call or a step made now belongs: its run, its agent and its parent span."""

    run: Run
    agent: str
    context: otel_context.Context
    lessons: list[str]


@runtime_checkable
class Instrumentation(Protocol):
    """What the tracer asks of an instrumentation it was given (`Tracer.add_instrumentation`)."""

    def call_context(self) -> CallContext | None:
        """Where a call made now belongs when this instrumentation knows better than the tracer
        (inside a LangGraph node: the node is the agent), else None."""
        ...

    def flush(self, run: Run, timeout: float = 5.0) -> bool:
        """Before `run` ends, in sync code: wait (bounded) until what this records for it is recorded; False if not all was."""
        ...

    async def aflush(self, run: Run, timeout: float = 5.0) -> bool:
        """The same in async code (`async with tracer.run(...)`), letting the event loop run."""
        ...


def to_text(value: Any) -> str:
    """A value as the text a step shows: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)


def returned_error(value: Any) -> str | None:
    """The error a tool *returned* (not raised), or None.

    Recognised: a dict with a non-empty `error` key; a dict or object whose
    `status` is "error"/"failed" (LangChain's ToolMessage); an object with a
    true `is_error`/`isError` (MCP's CallToolResult).
    """
    if isinstance(value, dict):
        if value.get("error") not in (None, False, ""):
            error = value["error"]
            return error if isinstance(error, str) else to_text(error)
        if str(value.get("status", "")).lower() in ("error", "failed"):
            return to_text(value.get("message") or value.get("detail") or value)
        return None
    if getattr(value, "is_error", False) is True or getattr(value, "isError", False) is True:
        return to_text(getattr(value, "content", value))
    if str(getattr(value, "status", "")).lower() in ("error", "failed"):
        return to_text(getattr(value, "content", None) or value)
    return None


