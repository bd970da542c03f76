"""Failure patterns: attributed failed runs grouped by who failed, how, and the evidence's signature, with their trend and lesson.

One verdict per run is a lead; what a team acts on is what keeps failing. A
*pattern* is the group of attributed failed runs that share

- the blamed **agent**,
- the **failure mode** of the verdict,
- the **signature** of the evidence: what kind of slip the verdict's evidence
  names (`attributors.evidence`: a failed lookup left unsaid, a repeated call,
  a value no step gave, ...) and which tool the blamed step used, else the
  blamed step's kind.

Each pattern carries its count, its share of the failed runs, first and last
seen, a per-day count, three example runs, the lesson most often drawn from
its runs, and that lesson's measured effect: the failure rate of the runs
where the agent took part after the lesson existed, shown it against not shown
it (counts beside; "too few runs" below `MIN_RUNS` on either side).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from faultlens.middleware.model.trace import Attribution, AttributionStatus, Lesson, Step, Trace
from faultlens.middleware.store import Store

__all__ = ["MIN_RUNS", "LessonEffect", "Pattern", "find_patterns", "latest_verdict", "pattern_key", "signature_of"]

MIN_RUNS = 5  # runs on each side (shown the lesson / not) below which an effect is "too few runs"
EXAMPLES = 3


@dataclass
class LessonEffect:
    """Failure rates of comparable runs shown the lesson and not shown it (None when too few runs)."""

    lesson_id: str
    shown_runs: int
    shown_failed: int
    unshown_runs: int
    unshown_failed: int

    @property
    def enough(self) -> bool:
        return self.shown_runs >= MIN_RUNS and self.unshown_runs >= MIN_RUNS

    @property
    def shown_rate(self) -> float | None:
        return self.shown_failed / self.shown_runs if self.shown_runs else None

    @property
    def unshown_rate(self) -> float | None:
        return self.unshown_failed / self.unshown_runs if self.unshown_runs else None

    def sentence(self) -> str:
        if not self.enough:
            return f"too few runs ({self.shown_runs} shown it, {self.unshown_runs} not; {MIN_RUNS} each needed)"
        return (f"failure rate {self.shown_rate:.0%} of {self.shown_runs} runs shown it against "
                f"{self.unshown_rate:.0%} of {self.unshown_runs} not shown it")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "enough": self.enough, "shown_rate": self.shown_rate, "unshown_rate": self.unshown_rate,
                "sentence": self.sentence()}


@dataclass
class Pattern:
    key: str
    agent: str
    mode: str | None
    signature: str
    runs: list[str] = field(default_factory=list)  # newest first
    first_seen: float = 0.0
    last_seen: float = 0.0
    per_day: dict[str, int] = field(default_factory=dict)  # "YYYY-MM-DD" -> runs
    share: float = 0.0  # of the failed runs considered
    suspected: int = 0  # runs not (yet) confirmed as failed
    lesson: Lesson | None = None
    effect: LessonEffect | None = None
    reason: str = ""  # a verdict's sentence, as an example of the pattern

    @property
    def count(self) -> int:
        return len(self.runs)

    @property
    def examples(self) -> list[str]:
        return self.runs[:EXAMPLES]

    def title(self) -> str:
        mode = self.mode or "mode unknown"
        return f"{self.agent} · {mode} · {self.signature}"

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "agent": self.agent, "mode": self.mode, "signature": self.signature, "count": self.count,
                "share": round(self.share, 4), "first_seen": self.first_seen, "last_seen": self.last_seen, "per_day": self.per_day,
                "examples": self.examples, "suspected": self.suspected, "reason": self.reason,
                "lesson": None if self.lesson is None else {"id": self.lesson.id, "advice": self.lesson.advice, "created_at": self.lesson.created_at},
                "effect": None if self.effect is None else self.effect.as_dict()}


def signature_of(trace: Trace, attribution: Attribution) -> str:
    """What kind of slip the verdict names: its first evidence's kind, and the blamed step's tool (else the step's kind)."""
    def at(index: object) -> Step | None:
        return trace.steps[index] if isinstance(index, int) and 0 <= index < len(trace.steps) else None

    step = at(attribution.step)
    found = attribution.details.get("evidence") if isinstance(attribution.details, dict) else None
    first = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
    # The tool the slip is about: the blamed step's, else that of the step the evidence points at (a failed lookup).
    shown = [at(i) for i in first.get("steps") or []]
    tool = (step.tool_name if step is not None else None) or next((s.tool_name for s in shown if s is not None and s.tool_name), None)
    where = tool or (step.kind.value if step is not None else "no step")
    return f"{first['kind']}:{where}" if first.get("kind") else where


def pattern_key(agent: str, mode: str | None, signature: str) -> str:
    return f"{agent}|{mode or '-'}|{signature}"


def _day(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d")


def latest_verdict(store: Store, trace_id: str) -> Attribution | None:
    """The run's latest usable verdict (a person's label counts as one: it is stored as an attribution too)."""
    usable = [a for a in store.attributions(trace_id) if a.status == AttributionStatus.ok and a.agent and a.step is not None]
    return usable[-1] if usable else None


def find_patterns(store: Store, *, since: float | None = None, suspected: Iterable[str] = (), lessons: list[Lesson] | None = None,
                  now: float | None = None) -> list[Pattern]:
    """The store's failure patterns, most runs first. `suspected`: ids of runs with no outcome that are treated as failed."""
    failed = store.list_traces(status="failed", limit=None)
    ids = [s.id for s in failed if since is None or s.created_at >= since]  # when the run happened, not when it was stored
    suspected_ids = [i for i in dict.fromkeys(suspected) if i not in set(ids)]
    groups: dict[str, Pattern] = {}
    verdicts: dict[str, list[str]] = defaultdict(list)  # pattern key -> its runs' verdict ids (what lessons point at)
    considered = 0
    for trace_id in [*ids, *suspected_ids]:
        attribution = latest_verdict(store, trace_id)
        if attribution is None:
            continue
        trace = store.get_trace(trace_id)
        considered += 1
        signature = signature_of(trace, attribution)
        key = pattern_key(attribution.agent or "?", attribution.mode, signature)
        pattern = groups.get(key)
        if pattern is None:
            pattern = groups[key] = Pattern(key, attribution.agent or "?", attribution.mode, signature, reason=attribution.reason or "")
        seen = trace.created_at or attribution.created_at
        pattern.runs.append(trace_id)
        pattern.first_seen = min(pattern.first_seen or seen, seen)
        pattern.last_seen = max(pattern.last_seen, seen)
        pattern.per_day[_day(seen)] = pattern.per_day.get(_day(seen), 0) + 1
        pattern.suspected += trace_id in suspected_ids
        verdicts[key].append(attribution.id)
    all_lessons = lessons if lessons is not None else store.lessons(include_retired=True)
    by_attribution: dict[str, list[Lesson]] = defaultdict(list)
    for lesson in all_lessons:
        if lesson.attribution_id:
            by_attribution[lesson.attribution_id].append(lesson)
    patterns = sorted(groups.values(), key=lambda p: (-p.count, -p.last_seen, p.key))
    for pattern in patterns:
        pattern.share = pattern.count / considered if considered else 0.0
        pattern.per_day = dict(sorted(pattern.per_day.items()))
        drawn = [lesson for attribution_id in verdicts[pattern.key] for lesson in by_attribution.get(attribution_id, [])
                 if lesson.agent == pattern.agent]
        if drawn:
            # The lesson most shown (a merged lesson stands for its near-duplicates), the oldest on a tie.
            pattern.lesson = max(drawn, key=lambda lesson: (lesson.shown, lesson.merged, -lesson.created_at))
    _effects(store, [p for p in patterns if p.lesson is not None])
    return patterns


def _effects(store: Store, patterns: list[Pattern]) -> None:
    """Each pattern's lesson effect, over the runs with an outcome in which the pattern's agent took part after the lesson existed."""
    if not patterns:
        return
    earliest = min(p.lesson.created_at for p in patterns if p.lesson is not None)
    runs = []  # (created, agents, failed, lessons shown): each run read once
    for summary in store.list_traces(limit=None):
        if summary.success is not None and summary.created_at >= earliest:
            shown = {lesson_id for step in store.get_trace(summary.id).steps for lesson_id in step.lessons}
            runs.append((summary.created_at, set(summary.agents), not summary.success, shown))
    for pattern in patterns:
        lesson = pattern.lesson
        assert lesson is not None
        counts = {True: [0, 0], False: [0, 0]}
        for created, agents, failed, shown in runs:
            if created >= lesson.created_at and pattern.agent in agents:
                side = counts[lesson.id in shown]
                side[0] += 1
                side[1] += failed
        pattern.effect = LessonEffect(lesson.id, counts[True][0], counts[True][1], counts[False][0], counts[False][1])


def since_days(days: float, now: float | None = None) -> float:
    """The timestamp `days` ago."""
    return (now if now is not None else time.time()) - days * 86400
