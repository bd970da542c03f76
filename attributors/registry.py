"""Attributors by name. Built-in methods register themselves; third-party
packages add theirs through the `faultlens.attributors` entry-point group
(the entry point names a factory taking keyword options)."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from faultlens.middleware.errors import FaultlensError

from .base import Attributor

Factory = Callable[..., Attributor]
_factories: dict[str, Factory] = {}


def register(name: str, factory: Factory | None = None):
    """Register a factory under `name`; usable as a decorator."""

    def add(f: Factory) -> Factory:
        _factories[name] = f
        return f

    return add(factory) if factory is not None else add


def _load_builtins() -> None:
    # Importing the methods module registers the built-in attributors.
    from . import learned, methods  # noqa: F401


def names() -> list[str]:
    _load_builtins()
    return sorted(set(_factories) | {ep.name for ep in entry_points(group="faultlens.attributors")})


def parse_options(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`["k=5", "base=heuristic"]` -> `{"k": 5, "base": "heuristic"}` (what `--option KEY=VALUE` gives).

    Values that read as JSON (numbers, true/false, null, lists) are parsed; anything else stays a string.
    """
    import json

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


def get(name: str, **options: Any) -> Attributor:
    """An attributor by name, e.g. get("heuristic") or get("all_at_once", model="openai/gpt-4o-mini")."""
    _load_builtins()
    if name not in _factories:
        for ep in entry_points(group="faultlens.attributors"):
            if ep.name == name:
                _factories[name] = ep.load()
    if name not in _factories:
        raise FaultlensError(f"unknown attribution method {name!r}; available: {', '.join(names())}")
    return _factories[name](**options)
