"""The failure taxonomy for injection: the shared modes plus applicability checks.

The definitions live in `middleware.model.taxonomy` (attributors may not import
injectors); this module re-exports them and adds what injection needs: whether
a mode can be injected at a concrete step of a concrete trace.
"""

from __future__ import annotations

from faultlens.middleware.model.trace import Step, Trace
from faultlens.middleware.model.taxonomy import BY_CODE, CATEGORIES, CODES, MODES, FailureMode, get_mode, is_mode, taxonomy_text

__all__ = ["BY_CODE", "CATEGORIES", "CODES", "MODES", "FailureMode", "applicable", "applicable_modes", "get_mode",
           "is_mode", "not_applicable", "taxonomy_text"]


def applicable(mode: FailureMode | str, step: Step, trace: Trace) -> bool:
    """Whether `mode` can be injected at `step` of `trace`.

    The step's kind must be one the mode applies to, and the mode's need must be
    met: "media" → the step (or the task) carries images/frames; "tool" → the
    step calls a tool; "multi_agent" → the trace has more than one agent and the
    step is addressed between agents (a message, plan or answer of one agent
    that another agent reads).
    """
    mode = get_mode(mode) if isinstance(mode, str) else mode
    if step.kind not in mode.applies_to:
        return False
    if mode.needs == "media":
        return bool(step.media or trace.task.attachments)
    if mode.needs == "tool":
        return step.tool_name is not None
    if mode.needs == "multi_agent":
        return len({a.name for a in trace.agents if a.role != "tool"}) > 1 and step.tool_name is None
    return True


def not_applicable(env_name: str | None) -> dict[str, str]:
    """The modes an environment declares not applicable (code -> reason); empty for unknown environments."""
    from . import envs  # imported here: the environments import this module

    if not env_name or env_name not in envs.names(include_frameworks=True):
        return {}
    return dict(envs.get(env_name).not_applicable)


def applicable_modes(step: Step, trace: Trace) -> list[str]:
    """The modes that can be injected at `step`, minus those the trace's environment declares not applicable."""
    skip = not_applicable(trace.source.benchmark if trace.source else None)
    return [m.code for m in MODES if m.code not in skip and applicable(m, step, trace)]
