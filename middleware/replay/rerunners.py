"""Re-running a failed run with one step changed: the `Rerunner` interface and its registry.

Counterfactual attribution (the `counterfactual` attributor) needs agents
it can put back on the same task. A rerunner does one *trial*: it replays the
failed run exactly up to step t, regenerates step t (re-samples the agent, or
uses a given replacement text), lets the run continue with everything the
change did not touch held fixed, evaluates the task, and says whether the
failure became a success.

Where rerunners come from:

- the bundled environments register one through the `faultlens.rerunners`
  entry-point group (`injectors.rerun:EnvironmentRerunner`), so the
  attributors that use rerunners never import the injectors;
- your own agent: `register_rerun("my-agent", fn)`, where
  `fn(trace, step, replacement)` re-runs it and returns the new `Trace` (with
  its outcome) or just whether it succeeded. It is used for traces whose
  `source.benchmark` is "my-agent", or those your `matches(trace)` accepts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Trace

__all__ = ["NotRerunnable", "Rerunner", "Trial", "register_rerun", "register_rerunner", "rerunner_for", "rerunners"]


class NotRerunnable(FaultlensError):
    """This trace cannot be re-run (its agents, task or settings are unknown, or it no longer replays).

    `trial`, when set, is the trial that found it out (a drift, a timeout, an upstream that failed).
    """

    def __init__(self, message: str, trial: Trial | None = None):
        super().__init__(message)
        self.trial = trial


# A trial keeps this much of its regenerated step: enough for a long message (a Magentic-One orchestrator's ledger)
# to show what the correction changed (`attributors.methods.correction`), short enough to store every trial.
REGENERATED_KEPT = 2000


@dataclass
class Trial:
    """One rerun with step `step` regenerated, and what came of it."""

    step: int
    success: bool
    changed: bool | None = None  # did the regenerated step differ from the recorded one (None: unknown)
    regenerated: str | None = None  # the new content of the step, its first REGENERATED_KEPT characters
    live_calls: int | None = None  # calls made anew after the change (the rest were replayed or reused)
    seconds: float = 0.0
    detail: str = ""
    outcome: str | None = None  # success, failure, crash, unchanged, or why the trial shows nothing (drift, timeout, ...)
    # False: the program was not re-run (a new draw of the step gave the recorded reply, so the run would fail as
    # recorded); such a trial is one model call, not counted as a rerun.
    reran: bool | None = None
    control: bool | None = None  # True: the step kept as recorded and the rest drawn anew (does the run still fail?)
    # A control's: did every call drawn anew give its recorded reply (the run failed exactly as recorded, by no chance)?
    as_recorded: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}


@runtime_checkable
class Rerunner(Protocol):
    name: str

    def can_rerun(self, trace: Trace) -> bool: ...

    def rerun(self, trace: Trace, step: int, replacement: str | None = None) -> Trial:
        """Replay `trace` up to `step`, regenerate it (or put `replacement` there), continue and evaluate.

        A rerunner may also offer `control(trace, step) -> Trial`: the run re-run with `step` as recorded and every
        later call drawn anew. `counterfactual` then confirms a step only if its control still fails: a run that
        succeeds with the step unchanged failed by a later chance, not by that step.

        Raises `NotRerunnable` when the trace cannot be re-run at all.
        """
        ...


RerunFn = Callable[[Trace, int, "str | None"], "Trace | bool"]


class CallableRerunner:
    """A rerunner made from a plain function (see `register_rerun`)."""

    def __init__(self, name: str, fn: RerunFn, matches: Callable[[Trace], bool] | None = None):
        self.name, self.fn = name, fn
        self.matches = matches or (lambda trace: trace.source.benchmark == name)

    def can_rerun(self, trace: Trace) -> bool:
        return bool(self.matches(trace))

    def rerun(self, trace: Trace, step: int, replacement: str | None = None) -> Trial:
        started = time.monotonic()
        result = self.fn(trace, step, replacement)
        seconds = round(time.monotonic() - started, 4)
        if isinstance(result, bool):
            return Trial(step=step, success=result, seconds=seconds)
        if not isinstance(result, Trace):
            raise FaultlensError(f"rerun function {self.name!r} returned {type(result).__name__}; expected a Trace or a bool")
        if result.outcome is None:
            raise FaultlensError(f"rerun function {self.name!r} returned a trace without an outcome; "
                                 "evaluate the task and set trace.outcome")
        new = result.steps[step].content if step < len(result.steps) else None
        return Trial(step=step, success=result.outcome.success, seconds=seconds,
                     changed=None if new is None else new != trace.steps[step].content,
                     regenerated=None if new is None else new[:REGENERATED_KEPT])


_rerunners: dict[str, Rerunner] = {}
_loaded = False


def register_rerunner(rerunner: Rerunner) -> Rerunner:
    """Add a rerunner object (anything with `name`, `can_rerun` and `rerun`)."""
    _rerunners[rerunner.name] = rerunner
    return rerunner


def register_rerun(name: str, fn: RerunFn, matches: Callable[[Trace], bool] | None = None) -> Rerunner:
    """Make your agent re-runnable: `fn(trace, step, replacement)` re-runs it with step `step` regenerated
    (or replaced by `replacement`) and returns the new Trace with its outcome, or whether it succeeded."""
    return register_rerunner(CallableRerunner(name, fn, matches))


def rerunners() -> list[Rerunner]:
    """Every registered rerunner: those registered in this process, then the entry points'."""
    global _loaded
    if not _loaded:
        _loaded = True
        for ep in entry_points(group="faultlens.rerunners"):
            if ep.name not in _rerunners:
                _rerunners[ep.name] = ep.load()()
    return list(_rerunners.values())


def rerunner_for(trace: Trace) -> Rerunner | None:
    """The first rerunner that can re-run `trace`, or None."""
    return next((r for r in rerunners() if r.can_rerun(trace)), None)
