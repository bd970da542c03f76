"""Attributors by name. Built-in methods register themselves (the package's
`__init__` imports them); third-party packages add theirs through the
`faultlens.attributors` entry-point group (the entry point names a factory
taking keyword options).

`build(method, model, **options)` is the one way the CLI, the benchmark
runner, the server and the feedback loop make an attributor.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
import json
from typing import Any

from faultlens.middleware.errors import FaultlensError, UnknownName

from .base import Attributor

# What every entry point uses when no method is named (`faultlens attribute`, `serve`, `worker`, `lessons learn`,
# `FeedbackLoop`, the demo); offline, no key. A user's first verdict is on a system faultlens never saw, so the default
# is the offline method with the best mean step accuracy leave-one-system-out (`faultlens train --loso`, README):
# `blend` (learned's step scores, the heuristic's signals, a lateness term in long runs), against the heuristic that was
# the default before it, `learned` alone and every label-free baseline.
DEFAULT_METHOD = "blend"


class UnknownMethod(UnknownName):
    """No attribution method has this name."""


Factory = Callable[..., Attributor]
_factories: dict[str, Factory] = {}


def register(name: str, factory: Factory | None = None):
    """Register a factory under `name`; usable as a decorator."""

    def add(f: Factory) -> Factory:
        _factories[name] = f
        return f

    return add(factory) if factory is not None else add


def names() -> list[str]:
    return sorted(set(_factories) | {ep.name for ep in entry_points(group="faultlens.attributors")})


def parse_options(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`["k=5", "base=heuristic"]` -> `{"k": 5, "base": "heuristic"}` (what `--option KEY=VALUE` gives).

    Values that read as JSON (numbers, true/false, null, lists) are parsed; anything else stays a string.
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise FaultlensError(f"option {pair!r} is not KEY=VALUE (e.g. --option k=5)")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def factory(name: str) -> Factory:
    """The factory registered under `name` (built in, or from an entry point)."""
    if name not in _factories:
        for ep in entry_points(group="faultlens.attributors"):
            if ep.name == name:
                _factories[name] = ep.load()
    if name not in _factories:
        raise UnknownMethod(f"unknown attribution method {name!r}; available: {', '.join(names())}")
    return _factories[name]


def uses_model(name: str) -> bool:
    """Whether the method calls a model (its factory says so with `uses_model = True`, as LLM methods do)."""
    return bool(getattr(factory(name), "uses_model", False))


def get(name: str, **options: Any) -> Attributor:
    """An attributor by name with its keyword options, passed as they are, e.g. get("heuristic")."""
    return factory(name)(**options)


def build(method: str, model: str | None = None, **options: Any) -> Attributor:
    """An attributor from a method name, a model and the method's options.

    model: a litellm model string, for the methods that call a model
        (`uses_model(method)`); giving one to a method that calls none is an
        error rather than silently ignored.
    options: the method's keyword options (`with_reference=True`,
        `budget_usd=`, `k=5`, ...). Options whose value is None are left out,
        so callers pass their optional flags as they come and the method's own
        defaults apply.
    """
    kwargs = {key: value for key, value in options.items() if value is not None}
    if model is not None:
        if not uses_model(method):
            llm = ", ".join(n for n in names() if uses_model(n))
            raise FaultlensError(f"method {method!r} calls no model, so it takes no model ({model!r}); methods that do: {llm}")
        kwargs["model"] = model
    return get(method, **kwargs)
