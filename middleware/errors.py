"""The errors faultlens raises on purpose: one tree under `FaultlensError`.

Every error a user can cause or fix derives from `FaultlensError`, so a caller
(the CLI, the server) catches one class and prints its message. Where a caller
may already rely on a built-in class, the error derives from it too:

    FaultlensError
    ├── InputError (ValueError)       bad input: names the source, the record and the field
    ├── FieldError (ValueError)       one field of a record cannot be read (callers add source and record)
    ├── ConfigError (ValueError)      a call or setting that cannot work as given
    ├── NotFound (KeyError)           nothing stored or registered under this name
    │   ├── TraceNotFound             (middleware.store)
    │   └── UnknownName               an unknown method, environment, reflector, ...
    └── the packages' own:            NotRerunnable, LLMError, BudgetExceeded, ParseError (ValueError),
                                      ModelMissingError, Drift, TestTraceError, UnsafeBind, ...
"""

from __future__ import annotations

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
