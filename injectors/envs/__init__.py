"""Task environments for warm-start injection, and their registry.

`get(name)` returns an environment instance, `names()` lists them. Every module
in this folder (except `base`) is imported on first use, so a new environment
is a new file with an `@register`-decorated `Environment` subclass; see
`injectors.envs.base` for the interface.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Action, Environment, Runtime, RunResult, ToolSpec, parse_action, render_action

__all__ = ["Action", "Environment", "RunResult", "Runtime", "ToolSpec", "get", "names", "parse_action", "register", "render_action"]

_REGISTRY: dict[str, type[Environment]] = {}
_INSTANCES: dict[str, Environment] = {}
_discovered = False


def register(cls: type[Environment]) -> type[Environment]:
    """Class decorator: make `cls` available as `get(cls.name)`."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no `name`")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def names(include_frameworks: bool = False) -> list[str]:
    """Names of the registered environments, sorted.

    Environments on a real agent framework (`Environment.framework`, an
    optional extra) are listed only with `include_frameworks=True`: the
    bundled benchmark is built from the others.
    """
    _discover()
    return sorted(n for n, cls in _REGISTRY.items() if include_frameworks or cls.framework is None)


def get(name: str) -> Environment:
    """The environment called `name` (one shared instance per process)."""
    _discover()
    if name not in _REGISTRY:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(sorted(_REGISTRY)) or '(none)'}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _REGISTRY[name]()
    return _INSTANCES[name]
