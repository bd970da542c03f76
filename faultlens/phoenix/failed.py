"""Which runs failed, as Phoenix knows it: a root span with status ERROR, an annotation the user names, or listed trace ids.

    rule = FailureRule.parse(["correctness=incorrect"], trace_ids=["4bf9..."])
    verdicts = rule.judge(phoenix, project, runs)    # {run id: why it failed}, for the runs that did

Each way counts on its own (any one makes a run failed):

* a root span of the run has status ERROR (unless `status_error=False`);
* `NAME=LABEL` (`--failed-if`, repeatable): an annotation named NAME with
  label LABEL on one of the run's Phoenix traces or on its root span (where
  Phoenix's evaluations of a whole run go). `NAME<0.5` and `NAME>=...`
  compare the annotation's score instead;
* `p_failed>0.7` (any bound, not `=`): the failure detector's probability
  that the run failed (`attributors.detect`, computed by the sync from the
  run's stored trace, never from an annotation) passes the bound;
* the run's Phoenix trace id is one of `trace_ids`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.errors import ConfigError

from .state import RunState

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}
_CONDITION = re.compile(r"^\s*([^=<>!]+?)\s*(<=|>=|<|>|=)\s*(.+?)\s*$")
P_FAILED = "p_failed"  # the condition name that reads the detector's probability, not an annotation


@dataclass(frozen=True)
class Condition:
    """One `--failed-if`: an annotation name, and its label (`=`) or a bound on its score."""

    name: str
    op: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Condition:
        m = _CONDITION.match(text)
        if not m:
            raise ConfigError(f"--failed-if {text!r}: write NAME=LABEL (e.g. correctness=incorrect) or NAME<SCORE (e.g. correctness<0.5)")
        name, op, value = m.groups()
        if op != "=":
            try:
                float(value)
            except ValueError:
                raise ConfigError(f"--failed-if {text!r}: {op} compares scores, and {value!r} is not a number") from None
        if name == P_FAILED and (op == "=" or not 0.0 <= float(value) <= 1.0):
            raise ConfigError(f"--failed-if {text!r}: p_failed is the detector's probability; bound it with < <= > >= "
                              f"and a number from 0 to 1 (e.g. p_failed>0.7)")
        return cls(name, op, value)

    @property
    def detector(self) -> bool:
        """Whether this condition reads the detector's `p_failed` rather than an annotation."""
        return self.name == P_FAILED

    def passes(self, p_failed: float) -> bool:
        """Whether a run's `p_failed` meets this (detector) condition."""
        return _OPS[self.op](p_failed, float(self.value))

    def matches(self, annotation: Mapping[str, Any]) -> bool:
        if self.detector or annotation.get("name") != self.name:
            return False
        result = annotation.get("result") or {}
        if self.op == "=":
            return result.get("label") is not None and str(result["label"]) == self.value
        score = result.get("score")
        return score is not None and _OPS[self.op](float(score), float(self.value))

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.value}"


@dataclass
class FailureRule:
    conditions: list[Condition] = field(default_factory=list)
    trace_ids: frozenset[str] = frozenset()
    status_error: bool = True

    @classmethod
    def parse(cls, failed_if: Iterable[str] = (), *, trace_ids: Iterable[str] = (), status_error: bool = True) -> FailureRule:
        return cls([Condition.parse(text) for text in failed_if], frozenset(t.strip().lower() for t in trace_ids if t.strip()), status_error)

    @property
    def names(self) -> list[str]:
        """The annotation names the conditions read (not `p_failed`, which no annotation gives)."""
        return sorted({c.name for c in self.conditions if not c.detector})

    @property
    def uses_detector(self) -> bool:
        return any(c.detector for c in self.conditions)

    def detector_passes(self, p_failed: float) -> Condition | None:
        """The first `p_failed` condition the probability meets, or None."""
        return next((c for c in self.conditions if c.detector and c.passes(p_failed)), None)

    def judge(self, phoenix: Any, project: str, runs: Mapping[str, RunState], p_failed: Mapping[str, float] | None = None) -> dict[str, str]:
        """{run id: why} for each of `runs` that failed (one look-up of trace and one of root-span annotations per 100 runs).

        `p_failed`: the detector's probability per run, for `p_failed` conditions (a run without one is not judged by them)."""
        failed: dict[str, str] = {}
        for run_id, run in runs.items():
            listed = sorted(self.trace_ids.intersection(run.traces))
            errored = [span for span, status in run.roots.items() if status == "error"]
            if listed:
                failed[run_id] = f"trace {listed[0]} is listed (--trace-id)"
            elif self.status_error and errored:
                failed[run_id] = f"root span {errored[0]} has status ERROR"
        for run_id in runs:
            hit = None if run_id in failed or run_id not in (p_failed or {}) else self.detector_passes((p_failed or {})[run_id])
            if hit is not None:
                failed[run_id] = f"the detector's p_failed {(p_failed or {})[run_id]:.2f} meets {hit} (--failed-if)"
        rest = {run_id: run for run_id, run in runs.items() if run_id not in failed}
        if not self.names or not rest:
            return failed
        by_trace = _index(phoenix.trace_annotations(project, [t for run in rest.values() for t in run.traces], self.names), "trace_id")
        by_span = _index(phoenix.span_annotations(project, [s for run in rest.values() for s in run.roots], self.names), "span_id")
        for run_id, run in rest.items():
            why = self._first_match(run, by_trace, by_span)
            if why is not None:
                failed[run_id] = why
        return failed

    def _first_match(self, run: RunState, by_trace: Mapping[str, list[dict]], by_span: Mapping[str, list[dict]]) -> str | None:
        for where, key, index in [("trace", t, by_trace) for t in run.traces] + [("root span", s, by_span) for s in run.roots]:
            for annotation in index.get(key, []):
                for condition in self.conditions:
                    if condition.matches(annotation):
                        return f"{where} {key} is annotated {condition} (--failed-if)"
        return None


def _index(annotations: Sequence[Mapping[str, Any]], key: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for annotation in annotations:
        if annotation.get(key):
            found.setdefault(str(annotation[key]).lower(), []).append(dict(annotation))
    return found
