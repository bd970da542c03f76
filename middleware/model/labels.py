"""A person's label of a failed run: which step decided it, whose it was, and why.

Labels are what `learned` trains on (`faultlens train --dataset store:PATH`):
it carries over to a system only once it has seen labelled runs of that
system (docs/real-traces.md, "How many labelled runs"). `label_for` checks a
label against its trace before anything is stored; `Store.set_gold` stores it.
"""

from __future__ import annotations

from ..errors import InputError
from .trace import GoldLabel, StepRole, Trace
from .roles import cause_of
from .taxonomy import BY_CODE, CODES


def label_for(trace: Trace, step: int, agent: str | None = None, mode: str | None = None,
              reason: str | None = None) -> GoldLabel:
    """The gold label of `trace` blaming `step` (its agent unless `agent` is given), checked against the trace.

    Raises `InputError` naming the trace and the field for a run recorded as succeeded, a step out of range, an
    agent that takes no part in the run, or a failure mode not in the taxonomy."""
    where = f"trace {trace.id}"
    if trace.outcome is not None and trace.outcome.success:
        raise InputError(where, None, "outcome", "the run succeeded; only a failed run has a decisive error to label")
    if not 0 <= step < len(trace.steps):
        raise InputError(where, None, "step", f"no step {step}; the run has steps 0 to {len(trace.steps) - 1}")
    participants = list(dict.fromkeys([s.agent for s in trace.steps] + [a.name for a in trace.agents]))
    if agent is not None and agent not in participants:
        raise InputError(where, None, "agent", f"{agent!r} takes no part in this run; its agents: {', '.join(participants)}")
    code = None
    if mode is not None:
        code = mode.strip().upper()
        if code not in BY_CODE:
            raise InputError(where, None, "mode", f"unknown failure mode {mode!r}; known codes: {', '.join(CODES)}")
    blamed = trace.steps[step]
    return GoldLabel(step=step, agent=agent or blamed.agent, mode=code, reason=reason or None)


def decision_behind(trace: Trace, step: int) -> int | None:
    """For a label on a step that is no decision (a tool result, an executor's output): the decision it is about.

    `learned` ranks decisions only, so a label on the result teaches it nothing about which step to blame; the
    decision that caused it is the one to label. None when the step is a decision or nothing caused it."""
    blamed = trace.steps[step]
    if blamed.role == StepRole.decision:
        return None
    cause = cause_of(trace, step)
    return cause if cause is not None and cause != step else None
