"""The errors faultlens raises on purpose: one tree under `FaultlensError`.

Every error a user can cause or fix derives from `FaultlensError`, so a caller
(the CLI, the server) catches one class and prints its message. Where a caller
may already rely on a built-in class, the error derives from it too:

    FaultlensError
    ├── InputError (ValueError)       bad input: names the source, the record and the field
    ├── FieldError (ValueError)       one field of a record cannot be read (callers add source and record)
    ├── ConfigError (ValueError)      a call or setting that cannot work as given
    ├── MissingExtra (ImportError)    an optional dependency is not installed: names the extra that brings it
    ├── NotFound (KeyError)           nothing stored or registered under this name
    │   ├── TraceNotFound             (middleware.store.sqlite)
    │   └── UnknownName               an unknown method, environment, reflector, ...
    └── the packages' own:            NotRerunnable, LLMError, BudgetExceeded, ParseError (ValueError),
                                      ModelMissingError, Drift, TestTraceError, UnsafeBind, ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class FaultlensError(Exception):
    """Base class for every error faultlens raises on purpose."""


class InputError(FaultlensError, ValueError):
    """Bad input: names the source, the record in it and the field."""

    def __init__(self, source: str, record: str | int | None, field: str | None, message: str):
        self.source, self.record, self.field, self.message = source, record, field, message
        where = source
        if record is not None:
            where += f", record {record}"
        if field:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class FieldError(FaultlensError, ValueError):
    """One field of a record cannot be read; the caller, which knows the source
    and the record, turns it into an `InputError`."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class ConfigError(FaultlensError, ValueError):
    """A call or setting that cannot work as given (a missing store, a wrong argument)."""


# The optional dependencies, by the module a failed import names, and the extra (pyproject.toml) that brings each.
EXTRAS = {
    "litellm": "litellm", "tenacity": "litellm",
    "langgraph": "langgraph", "langchain_core": "langgraph",
    "fastapi": "server", "starlette": "server", "uvicorn": "server", "jinja2": "server", "httpx": "server",
    "opentelemetry.exporter": "server", "opentelemetry.proto": "server", "google.protobuf": "server",
    "psycopg": "postgres", "psycopg_pool": "postgres",
    "sklearn": "learned", "joblib": "learned", "numpy": "learned",
    "matplotlib": "plots",
    "phoenix": "phoenix",
    # The frameworks that live in a virtualenv of their own (their environments' modules import them at the top).
    "crewai": "frameworks2", "semantic_kernel": "frameworks2", "camel": "frameworks2",
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs `module` (or a package holding it), or None for a module no extra brings."""
    parts = (module or "").split(".")
    for end in range(len(parts), 0, -1):
        extra = EXTRAS.get(".".join(parts[:end]))
        if extra is not None:
            return extra
    return None


class MissingExtra(FaultlensError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the extra to install."""

    def __init__(self, extra: str, feature: str, module: str | None = None):
        self.extra, self.feature = extra, feature
        needs = f"{module}, which is not installed" if module else f"the [{extra}] extra"
        super().__init__(f"{feature} needs {needs}: pip install 'faultlens[{extra}]'", name=module)


@contextmanager
def extra_needed(feature: str) -> Iterator[None]:
    """Turn a failed import of an optional dependency inside into a `MissingExtra` naming its extra; other errors pass."""
    try:
        yield
    except ModuleNotFoundError as exc:
        extra = extra_for(exc.name)
        if extra is None:
            raise
        raise MissingExtra(extra, feature, exc.name) from exc


class NotFound(FaultlensError, KeyError):
    """Nothing is stored or registered under the name asked for.

    A KeyError, for callers that look things up by key; its message reads as a
    sentence (KeyError alone would print it quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownName(NotFound, ValueError):
    """An unknown method, environment, reflector or other registered name.

    Also a ValueError: an unknown name given as an argument is a bad value."""


def from_validation_error(source: str, record: str | int | None, error: ValidationError) -> InputError:
    """Turn pydantic's first complaint into an InputError naming the field path."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or None
    return InputError(source, record, field, first["msg"])
