"""The environments by name. Every package in `injectors/envs/` is imported on
first use, and registers its environment with `@register`, so a new environment
is a new package (the modules beside them are what the environments share)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING

from faultlens.middleware.errors import ConfigError, UnknownName

from ..sim import serve_environments

if TYPE_CHECKING:
    from .base import Environment

_REGISTRY: dict[str, type[Environment]] = {}
_INSTANCES: dict[str, Environment] = {}
_discovered = False
_PACKAGE = __name__.rsplit(".", 1)[0]


def register(cls: type[Environment]) -> type[Environment]:
    """Class decorator: make `cls` available as `get(cls.name)`."""
    if not cls.name:
        raise ConfigError(f"{cls.__qualname__} has no `name`")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.ispkg and not info.name.startswith("_"):
            importlib.import_module(f"{_PACKAGE}.{info.name}")


def names(include_frameworks: bool = False) -> list[str]:
    """Names of the registered environments, sorted.

    Environments on a real agent framework (`Environment.framework`, an
    optional extra) are listed only with `include_frameworks=True`; without it
    the list is our own environments. The bundled benchmark is built from all.
    """
    _discover()
    return sorted(n for n, cls in _REGISTRY.items() if include_frameworks or cls.framework is None)


def get(name: str) -> Environment:
    """The environment called `name` (one shared instance per process).

    The package named as the environment is imported first, alone: a program that runs one environment (a replay
    lab team, an injection worker) does not import every framework, and a broken neighbour does not stop it.
    """
    if name not in _REGISTRY and name.isidentifier() and (Path(__file__).parent / name / "__init__.py").is_file():
        importlib.import_module(f"{_PACKAGE}.{name}")
    if name not in _REGISTRY:
        _discover()
    if name not in _REGISTRY:
        raise UnknownName(f"unknown environment {name!r}; known: {', '.join(sorted(_REGISTRY)) or '(none)'}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _REGISTRY[name]()
    return _INSTANCES[name]


# The simulated agents (`faultlens-sim/<env>`) find each environment's policy here.
serve_environments(get, names)
