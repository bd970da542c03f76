"""faultlens middleware: the trace model, the tracer, the store, import/export, the CLI."""

from .errors import FaultlensError, InputError
from .jsonl import load_jsonl, read_jsonl, write_jsonl
from .model.trace import (
    SCHEMA_VERSION,
    AgentInfo,
    Attribution,
    AttributionStatus,
    Candidate,
    Cost,
    GoldLabel,
    Lesson,
    Media,
    Outcome,
    Source,
    Step,
    StepKind,
    StepRole,
    Task,
    Trace,
    Usage,
)
from .store.redact import redact
from .sources import load_traces
from .store.sqlite import SQLiteStore, Store, TraceNotFound, open_store
from .capture.tracer import Run, Tracer

__all__ = [
    "SCHEMA_VERSION",
    "AgentInfo",
    "Attribution",
    "AttributionStatus",
    "Candidate",
    "Cost",
    "FaultlensError",
    "GoldLabel",
    "InputError",
    "Lesson",
    "Media",
    "Outcome",
    "SQLiteStore",
    "Source",
    "Step",
    "StepKind",
    "StepRole",
    "Store",
    "Task",
    "Trace",
    "TraceNotFound",
    "Usage",
    "load_jsonl",
    "load_traces",
    "open_store",
    "read_jsonl",
    "redact",
    "Run",
    "Tracer",
    "write_jsonl",
]
