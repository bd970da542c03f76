"""The failure mode a verified correction points at: what the corrected step changed, read with the taxonomy.

When a rerun shows that replacing step t by a new text makes the run succeed,
the difference between the two texts says what was wrong, better than a
classifier that sees the failing step alone. `mode_of_correction` reads the
difference as a person would:

| the step | what the correction did | mode |
|---|---|---|
| a tool call | called another tool | A.1 wrong tool/action |
| a tool call | same tool, other arguments | A.2 wrong tool parameters |
| a plan | brought back words or numbers the task states | R.4 task misunderstanding |
| a plan | anything else | PL.1 ineffective plan |
| a final answer | wrote a value the earlier steps had already worked out | A.4 output format/syntax error |
| a message (several agents) | restored a value its inputs held | C.2 communication failure |
| a message (one agent) | restored a value its inputs held | V.1 context/memory loss |
| a message or answer | changed numbers no input holds | R.3 numerical/calculation error |
| anything else | | None (the caller keeps its own mode) |

Inputs are the task and the steps before t. Tokens are lower-cased words of
three letters or more and numbers (with their sign; thousands separators dropped).
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind, Trace

__all__ = ["mode_of_correction"]

_TOKEN = re.compile(r"-?\d[\d,]*(?:\.\d+)?|[a-z]{3,}")
_NUMBER = re.compile(r"-?\d")


def _tokens(text: str) -> set[str]:
    return {t.replace(",", "") for t in _TOKEN.findall(text.lower())}


def _tool_name(text: str) -> str | None:
    match = re.search(r"^Action:\s*(\S+)", text, re.M)
    return match.group(1).lower() if match else None


def mode_of_correction(trace: Trace, step: int, corrected: str) -> str | None:
    """The mode that turning `trace.steps[step]` into `corrected` fixed, or None when the change says nothing."""
    original = trace.steps[step]
    old, new = _tokens(original.content), _tokens(corrected)
    added = new - old
    if not added and not (old - new):
        return None
    inputs = _tokens(trace.task.query)
    task_words = set(inputs)
    for earlier in trace.steps[:step]:
        inputs |= _tokens(earlier.content)
    numbers_added = {t for t in added if _NUMBER.match(t)}
    if original.kind == StepKind.tool_call or original.tool_name:
        before, after = original.tool_name or _tool_name(original.content), _tool_name(corrected)
        return "A.1" if before and after and before.lower() != after else "A.2"
    if original.kind == StepKind.plan:
        return "R.4" if added & task_words else "PL.1"
    if original.kind == StepKind.final_answer and numbers_added and numbers_added <= inputs:
        return "A.4"
    if original.kind in (StepKind.message, StepKind.final_answer, StepKind.llm_call):
        if numbers_added and numbers_added <= inputs:
            return "C.2" if trace.multi_agent else "V.1"
        if numbers_added:
            return "R.3"
    return None
