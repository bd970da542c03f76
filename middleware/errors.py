"""Errors that tell the user which input, which record and which field is wrong."""

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


def from_validation_error(source: str, record: str | int | None, error: ValidationError) -> InputError:
    """Turn pydantic's first complaint into an InputError naming the field path."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or None
    return InputError(source, record, field, first["msg"])
