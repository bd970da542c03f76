"""The JSON API's response models: what each /api route answers, as the OpenAPI schema at /docs shows it.

Runs, attributions, labels and lessons are the data model's own types
(`middleware.model.trace`); the rest are declared here. `extra="forbid"`:
a key a route returns but its model does not declare is an error, not
silently dropped from the answer.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from faultlens.middleware.model.trace import Attribution, GoldLabel
from faultlens.middleware.store import TraceSummary


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobOut(_Reply):
    """A failed run's job in the store's queue (`failed_runs.JobStatus`)."""

    trace_id: str
    state: str = Field(description="waiting (for spans), queued, running, done, error or dropped")
    queued_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    runs: int = 0
    attempts: int = 0
    worker: str | None = None


def _reply_from_dataclass(source: type, name: str, doc: str, **more: Any) -> type[_Reply]:
    """A reply model with `source`'s fields (types and defaults, read from the dataclass), plus `more`:
    the answer's schema follows the store's type instead of copying it field by field."""
    hints = get_type_hints(source)
    fields: dict[str, Any] = {
        f.name: (hints[f.name], f.default if f.default is not dataclasses.MISSING else ...) for f in dataclasses.fields(source)
    }
    model = create_model(name, __base__=_Reply, __doc__=doc, __module__=__name__, **fields, **more)
    return model


if TYPE_CHECKING:  # a class to the type checker, which cannot read `create_model`'s fields: routes return it by name
    class RunSummaryOut(_Reply):
        """One run in the list (`TraceSummary`), with its attribution job's state."""
else:
    RunSummaryOut = _reply_from_dataclass(TraceSummary, "RunSummaryOut", "One run in the list (`TraceSummary`), with its attribution job's state.",
                                          attribution_job=(str | None, None))


class AttributionsOut(_Reply):
    trace_id: str
    job: JobOut | None
    latest: Attribution | None
    attributions: list[Attribution]


class OutcomeOut(_Reply):
    trace_id: str
    success: bool
    queued: bool
    worker: JobOut | None = Field(default=None, description="the run's job; only for a failed run")


class RequeueOut(_Reply):
    trace_id: str
    queued: bool
    worker: JobOut


class LabelOut(_Reply):
    trace_id: str
    label: GoldLabel | None


class WorkerOut(_Reply):
    """The failed-run queue across all processes on the store, and this process's counters."""

    enabled: bool
    running: bool
    workers: int
    queued: int
    max_queue: int
    processed: int
    failed: int
    dropped: int
    states: dict[str, int]


class HealthOut(_Reply):
    ok: bool
    runs: int
    time: float


class LessonEffectOut(_Reply):
    """Failure rates of comparable runs shown a pattern's lesson and not shown it (`feedback.patterns.LessonEffect`)."""

    lesson_id: str
    shown_runs: int
    shown_failed: int
    unshown_runs: int
    unshown_failed: int
    enough: bool = Field(description="false below the floor of runs on either side: the rates say nothing yet")
    shown_rate: float | None
    unshown_rate: float | None
    sentence: str


class PatternLessonOut(_Reply):
    id: str
    advice: str
    created_at: float


class PatternOut(_Reply):
    """A recurring failure (`feedback.patterns.Pattern`): attributed failed runs of one agent, mode and evidence signature."""

    key: str = Field(description="agent|mode|signature: pass it to the runs list as ?pattern=")
    agent: str
    mode: str | None
    signature: str = Field(description="the evidence's kind and the blamed step's tool (or kind)")
    count: int
    share: float = Field(description="of the attributed failed runs considered")
    first_seen: float
    last_seen: float
    per_day: dict[str, int]
    examples: list[str]
    suspected: int
    reason: str
    lesson: PatternLessonOut | None
    effect: LessonEffectOut | None
