"""Every exception class our modules define derives from `FaultlensError`, so a caller catches one class.

Walks the installed package (each module imported, as a user's import would),
not the source, so a class built or re-bound at import time counts too. A
module whose optional dependency is missing is skipped; any other import error
fails the test.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType

import pytest

from faultlens.middleware.errors import FaultlensError, extra_for

# The folders installed under `faultlens.` from elsewhere (pyproject.toml's package-dir): an editable
# install maps them, so walking `faultlens`'s own folder does not reach them.
ROOTS = ("faultlens", "faultlens.middleware", "faultlens.attributors", "faultlens.injectors",
         "faultlens.feedback", "faultlens.benchmark")

# Exception classes allowed outside the tree, each with the reason: none.
ALLOWED: dict[str, str] = {}


def _import(name: str) -> ModuleType | None:
    """The module, or None when an optional dependency (one an extra brings) is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if extra_for(exc.name) is None:
            raise
        return None


def _walk(package: ModuleType) -> Iterator[ModuleType]:
    yield package
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = _import(info.name)
        if module is None:
            continue
        if info.ispkg:
            yield from _walk(module)
        else:
            yield module


def _modules() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for root in ROOTS:
        for module in _walk(importlib.import_module(root)):
            found.setdefault(module.__name__, module)
    return found


def _exceptions(module: ModuleType) -> Iterator[type[BaseException]]:
    for value in vars(module).values():
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
            yield value


@pytest.fixture(scope="module")
def exceptions() -> dict[str, type[BaseException]]:
    return {f"{cls.__module__}.{cls.__qualname__}": cls for module in _modules().values() for cls in _exceptions(module)}


def test_the_walk_reaches_every_root_and_the_errors_defined_in_them(exceptions):
    # Guards the walk itself: an empty or partial walk would pass the tree check vacuously.
    for name in ("faultlens.middleware.errors.FaultlensError", "faultlens.middleware.otlp.schema.SchemaError",
                 "faultlens.middleware.otlp.schema.BodyError", "faultlens.middleware.capture.upstream.UpstreamError",
                 "faultlens.attributors.llm.LLMError", "faultlens.benchmark.runner.RunInterrupted",
                 "faultlens.injectors.proxy_mistakes.NoErrorForMode", "faultlens.server.auth.UnsafeBind"):
        assert name in exceptions


def test_every_exception_derives_from_faultlens_error(exceptions):
    outside = sorted(name for name, cls in exceptions.items() if not issubclass(cls, FaultlensError) and name not in ALLOWED)
    assert outside == [], f"derive these from faultlens.middleware.errors.FaultlensError: {outside}"


def test_the_allowed_list_names_only_classes_that_exist_outside_the_tree(exceptions):
    # An entry that no longer exists or has joined the tree is stale: the list may only shrink.
    for name in ALLOWED:
        assert name in exceptions and not issubclass(exceptions[name], FaultlensError), name
