"""What every faultlens store is: the `Store` protocol, its result and error types, and how a `--db` value names a backend.

`sql.SQLStore` (run as `sqlite.SQLiteStore` or `postgres.PostgresStore`)
implements it; this module holds the protocol the code above it is typed
against and the summary and error types it returns. How a trace becomes rows
is `rows`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict, runtime_checkable

from ..errors import FaultlensError, NotFound
from .jobs import JobStore
from ..model.trace import AgentInfo, Attribution, GoldLabel, Lesson, Outcome, Step, Trace
from .step_json import PreparedStep

DEFAULT_DB = Path(".faultlens") / "faultlens.db"
# The version of the tables' layout (not of the Trace model: that is model.SCHEMA_VERSION).
# Each store applies its missing migrations in order when it opens.
STORE_SCHEMA_VERSION = 8
_URL_SCHEMES = ("postgresql", "postgres")


def default_db_path() -> Path:
    return Path(os.environ.get("FAULTLENS_DB") or DEFAULT_DB)


def default_db() -> str:
    """`$FAULTLENS_DB` as given (a path or a URL), else `.faultlens/faultlens.db`."""
    return os.environ.get("FAULTLENS_DB") or str(DEFAULT_DB)


def store_url(target: str | os.PathLike[str]) -> str | None:
    """The database URL `target` names, or None when it is a file path.

    A URL that went through `pathlib.Path` (as every `--db` option does) has
    lost one slash of ``postgresql://``; it is put back.
    """
    text = os.fspath(target)
    scheme, sep, rest = text.partition(":")
    if not sep or scheme.lower() not in _URL_SCHEMES:
        return None
    if rest.startswith("//"):
        return text
    if rest.startswith("/"):
        return f"{scheme}:/{rest}"
    raise FaultlensError(f"{text!r} is not a database URL: write postgresql://USER@HOST:PORT/DATABASE")


def describe(target: str | os.PathLike[str]) -> str:
    """`target` for messages: a URL without its password."""
    url = store_url(target)
    if url is None:
        return os.fspath(target)
    scheme, _, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return f"{scheme}://{userinfo}{at}{host}"


class SchemaTooNew(FaultlensError):
    def __init__(self, where: str, found: int):
        super().__init__(
            f"the store at {where} has table layout version {found}, newer than this faultlens knows "
            f"({STORE_SCHEMA_VERSION}); upgrade faultlens to use it"
        )


@dataclass(frozen=True)
class TraceSummary:
    id: str
    query: str
    success: bool | None
    n_steps: int
    agents: list[str]
    framework: str | None
    benchmark: str | None
    modality: str | None
    created_at: float
    updated_at: float
    labelled: bool = False  # a person's label (gold) is stored with the run
    p_failed: float | None = None  # the failure detector's probability, for a run scored with no outcome
    suspected: bool = False  # p_failed passed the threshold: attributed like a failed run until a person decides


class LinkRow(TypedDict):
    """A `span_links` row: one span of a run's tree (`spans.SpanLink.row`), what agents are resolved from."""

    span_id: str
    parent_id: str | None
    start_ns: int | None
    agent: str | None
    describes: str | None  # JSON: {"agents": [...], "explicit": bool}
    task: str | None
    output: str | None
    waiting_on: str | None  # the span whose agent this span's step waits for


@runtime_checkable
class Store(JobStore, Protocol):
    """What the rest of faultlens needs from a store: `SQLiteStore` (the default) and `PostgresStore`.

    The shared semantics (one test suite checks both): a step is idempotent by
    span id; `save_traces` and everything inside `batch()` land together or
    not at all; secrets are redacted before they are written; the tables
    carry a layout version and are migrated forward when the store opens.
    """

    location: str

    def batch(self, trace_ids: Iterable[str] = ()) -> AbstractContextManager[Store]: ...
    def close(self) -> None: ...
    def save_trace(self, trace: Trace) -> None: ...
    def save_traces(self, traces: Iterable[Trace]) -> int: ...
    def begin_trace(self, trace: Trace) -> None: ...
    # The header only where no run has its id (nothing stored is overwritten); True if written.
    def begin_trace_if_absent(self, trace: Trace) -> bool: ...
    def add_step(self, trace_id: str, step: Step) -> None: ...
    # A batch of steps of one run: serialised before any lock (`prepare_steps`), written in one statement.
    def prepare_steps(self, steps: Sequence[Step]) -> list[PreparedStep]: ...
    # new_run: the caller wrote the run's header in this transaction, having found no run: it has no steps yet.
    def add_steps(self, trace_id: str, steps: Sequence[Step | PreparedStep], *, new_run: bool = False) -> None: ...
    def set_outcome(self, trace_id: str, outcome: Outcome) -> None: ...
    def set_detection(self, trace_id: str, p_failed: float | None, suspected: bool) -> None: ...
    def detection(self, trace_id: str) -> tuple[float | None, bool]: ...
    # A person's label of the decisive step (`faultlens traces label`); None removes it.
    def set_gold(self, trace_id: str, gold: GoldLabel | None) -> None: ...
    def has_trace(self, trace_id: str) -> bool: ...
    def get_outcome(self, trace_id: str) -> Outcome | None: ...
    def get_trace(self, trace_id: str) -> Trace: ...
    def iter_traces(self, ids: Iterable[str] | None = None) -> Iterator[Trace]: ...
    def list_traces(self, *, status: str | None = None, agent: str | None = None, limit: int | None = 100, offset: int = 0, since: float | None = None,
                    labelled: bool | None = None) -> list[TraceSummary]: ...
    def count_traces(self) -> int: ...
    def delete_trace(self, trace_id: str) -> None: ...
    def save_attribution(self, attribution: Attribution) -> None: ...
    def attributions(self, trace_id: str) -> list[Attribution]: ...
    def save_lesson(self, lesson: Lesson) -> None: ...
    def get_lesson(self, lesson_id: str) -> Lesson: ...
    def lessons(self, *, agent: str | None = None, include_retired: bool = False) -> list[Lesson]: ...
    def schema_version(self) -> int: ...
    # The span tree a run's agents are resolved from (see `middleware.ingest`).
    def save_span_links(self, trace_id: str, rows: Iterable[LinkRow]) -> None: ...
    def span_links(self, trace_id: str, *, span_ids: list[str] | None = None, parent_id: str | None = None,
                   describing: bool = False, with_task: bool = False) -> list[LinkRow]: ...
    def first_agent_spans(self, trace_id: str, agents: list[str]) -> dict[str, str]: ...
    def steps_waiting_on(self, trace_id: str, span_ids: list[str]) -> list[tuple[str, str]]: ...
    def set_step_agents(self, trace_id: str, agents: dict[str, str], waiting: dict[str, str | None]) -> None: ...
    def delete_step(self, trace_id: str, key: str) -> None: ...
    def set_run_agents(self, trace_id: str, agents: list[AgentInfo]) -> None: ...
    def fill_run_query(self, trace_id: str, query: str) -> None: ...
    # Migration 6: span id -> OpenTelemetry trace id of a run's steps (what attributions are exported onto).
    def save_otel_trace_ids(self, trace_id: str, otel_trace_ids: Mapping[str, str]) -> None: ...
    def otel_trace_id(self, trace_id: str, span_id: str) -> str | None: ...


class TraceNotFound(NotFound):
    def __init__(self, trace_id: str):
        super().__init__(trace_id)
        self.trace_id = trace_id

    def __str__(self) -> str:
        return f"no trace with id {self.trace_id!r} in the store (try `faultlens traces list`)"
