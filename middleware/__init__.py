"""faultlens middleware: the trace model, the tracer, the store, import/export, the CLI's helpers.

The names below are imported on first use (PEP 562), so that
`from faultlens.middleware import Tracer` loads the tracer and what it needs,
not the store's or the importers' dependencies as well.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it
_EXPORTS = {
    "FaultlensError": ".errors", "InputError": ".errors",
    "load_jsonl": ".jsonl", "read_jsonl": ".jsonl", "write_jsonl": ".jsonl",
    **{name: ".model.trace" for name in (
        "SCHEMA_VERSION", "AgentInfo", "Attribution", "AttributionStatus", "Candidate", "Cost", "GoldLabel", "Lesson",
        "Media", "Outcome", "Source", "Step", "StepKind", "StepRole", "Task", "Trace", "Usage")},
    "redact": ".store.redact",
    "load_traces": ".sources",
    "SQLiteStore": ".store.sqlite", "Store": ".store.sqlite", "TraceNotFound": ".store.sqlite", "open_store": ".store.sqlite",
    "Run": ".capture.tracer", "Tracer": ".capture.tracer",
}

__all__ = [
    "AgentInfo", "Attribution", "AttributionStatus", "Candidate", "Cost", "FaultlensError", "GoldLabel",
    "InputError", "Lesson", "Media", "Outcome", "Run", "SCHEMA_VERSION", "SQLiteStore", "Source", "Step",
    "StepKind", "StepRole", "Store", "Task", "Trace", "TraceNotFound", "Tracer", "Usage", "load_jsonl",
    "load_traces", "open_store", "read_jsonl", "redact", "write_jsonl",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from .capture.tracer import Run, Tracer
    from .errors import FaultlensError, InputError
    from .jsonl import load_jsonl, read_jsonl, write_jsonl
    from .model.trace import (SCHEMA_VERSION, AgentInfo, Attribution, AttributionStatus, Candidate, Cost, GoldLabel, Lesson, Media,
                              Outcome, Source, Step, StepKind, StepRole, Task, Trace, Usage)
    from .sources import load_traces
    from .store.redact import redact
    from .store.sqlite import SQLiteStore, Store, TraceNotFound, open_store
