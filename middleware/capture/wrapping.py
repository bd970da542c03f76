"""What the tracer's decorators wrap a function with: its arguments as a dict, a span around each call, values as span JSON."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel

from faultlens.middleware.spans import conventions as S
from .runstate import returned_error


# `json.dumps(value, ensure_ascii=False, default=str)`, its encoder built once: dumps builds one per call
# when given options, about a microsecond on the agent's thread for every tool call.
_encode_attribute = json.JSONEncoder(ensure_ascii=False, default=str).encode
_encode_messages = json.JSONEncoder(ensure_ascii=False).encode


def to_json(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return _encode_attribute(value)


def text_messages(role: str, text: str) -> str:
    """A GenAI-convention message list holding one text part, as the JSON string spans carry."""
    return _encode_messages([{"role": role, "parts": [{"type": "text", "content": text}]}])


def bound_arguments(signature: inspect.Signature, args: tuple, kwargs: dict) -> dict[str, Any]:
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError:
        return {"args": list(args), "kwargs": kwargs}
    return {k: v for k, v in bound.arguments.items() if k not in ("self", "cls")}


def argument_binder(signature: inspect.Signature) -> Callable[[tuple, dict], dict[str, Any]]:
    """`bound_arguments` for one signature, with a fast path for the common call.

    `Signature.bind_partial` costs about as much as starting a span; a call
    with positional arguments only, to a function without *args, binds the
    same way by zipping names and values.
    """
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = list(signature.parameters)
    if not all(p.kind in plain for p in signature.parameters.values()):
        return lambda args, kwargs: bound_arguments(signature, args, kwargs)
    skip = [i for i, name in enumerate(names) if name in ("self", "cls")]

    def bind(args: tuple, kwargs: dict) -> dict[str, Any]:
        if kwargs or len(args) > len(names):
            return bound_arguments(signature, args, kwargs)
        bound = dict(zip(names, args))
        for i in skip:
            bound.pop(names[i], None)
        return bound

    return bind


class ToolSpan:
    """One tool call's span for `wrap_in_span`, as a plain context manager: a generator-based
    one costs about a microsecond more on the agent's thread, for every tool call."""

    __slots__ = ("_scope", "_span")

    def __init__(self, scope: AbstractContextManager[Any]):
        self._scope = scope

    def __enter__(self) -> Callable[[Any], None]:
        self._span = self._scope.__enter__()
        return self.finish

    def finish(self, result: Any) -> None:
        span = self._span
        span.set_attribute(S.TOOL_RESULT, to_json(result))
        error = returned_error(result)
        if error is not None:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, error))

    def __exit__(self, *exc_info: Any) -> bool | None:
        return self._scope.__exit__(*exc_info)


def wrap_in_span(func: Callable[..., Any], span_for: Callable[[tuple, dict], Any]) -> Any:
    """Wrap a sync or async function so each call runs inside `span_for(args, kwargs)`,
    which yields a `finish(result)` callback for what the result says."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with span_for(args, kwargs) as finish:
                result = await func(*args, **kwargs)
                finish(result)
                return result

        return async_wrapper

    @functools.wraps(func)
    def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
        with span_for(args, kwargs) as finish:
            result = func(*args, **kwargs)
            finish(result)
            return result

    return sync_wrapper
