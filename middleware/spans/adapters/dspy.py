"""DSPy, traced with OpenInference: a program's own module span names the agent.

DSPy's instrumentation traces every `dspy.Module` call as a CHAIN span named
`<Class>.forward`: the user's program (a `Module` subclass, e.g.
`Solver.forward`), and inside it DSPy's own modules (`ReAct.forward`,
`ChainOfThought.forward`), its predictors (`Predict(StringSignature).forward`),
adapters (`ChatAdapter.__call__`), LM calls (`LM.__call__`, LLM) and tools
(`<tool>.__call__`, TOOL). A DSPy program has no name but its class, so a
`<Class>.forward` span whose class is not one of DSPy's own modules names
the agent (`Solver` → `solver`, `MeetingPlanner` → `meeting_planner`); the
model calls and tools under it are that agent's. Left as the core reads it:
a tool's span name is `<tool>.__call__` (the instrumentation sets no
`tool.name`), its arguments `{"kwargs": {...}}` and its output the tool's
return value as a JSON string, which the core reads as the tool's text.
"""

from __future__ import annotations

import re

from ..conventions import CHAIN
from ..record import SpanRecord
from . import SpanAdapter

# DSPy's own modules (and its Module base): their spans are machinery inside a program, not agents.
DSPY_MODULES = frozenset({"Module", "Predict", "ChainOfThought", "ReAct", "CodeAct", "ProgramOfThought", "Refine",
                          "BestOfN", "Parallel", "MultiChainComparison", "KNN", "Retrieve", "RLM", "Avatar"})
_FORWARD = re.compile(r"^([A-Z][A-Za-z0-9_]*)\.a?forward$")


def agent_name(record: SpanRecord) -> str | None:
    """The agent a program's `<Class>.forward` span runs, in snake case (asked of chain spans)."""
    m = _FORWARD.match(record.name)
    if m is None or m.group(1) in DSPY_MODULES:
        return None
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", m.group(1)).lower()


ADAPTER = SpanAdapter(name="dspy", agent_names={CHAIN: agent_name})
