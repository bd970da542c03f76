"""The failure mode a verified correction points at: what the corrected step changed, read with the taxonomy.

When a rerun shows that replacing step t by a new text makes the run succeed,
the difference between the two texts says what was wrong, better than a
classifier that sees the failing step alone. `mode_of_correction` reads the
difference as a person would:

| the step | what the correction did | mode |
|---|---|---|
| a tool call | called another tool | A.1 wrong tool/action |
| a tool call | same tool, other arguments | A.2 wrong tool parameters |
| a model call's tool calls (`[tool_call] name({...})`) | another tool / other arguments | A.1 / A.2 |
| a model call's tool calls | the same calls, other text beside them; other arguments of a handoff | read as a message (rows below) |
| a plan | brought back words or numbers the task states | R.4 task misunderstanding |
| a plan | anything else | PL.1 ineffective plan |
| a final answer | wrote a value the earlier steps had already worked out | A.4 output format/syntax error |
| a message (several agents) | restored a value its inputs held (a number or a name) | C.2 communication failure |
| a message (one agent) | restored a value its inputs held (a number or a name) | V.1 context/memory loss |
| a message or answer | changed numbers no input holds, or the words around them | R.3 numerical/calculation error |
| anything else | | None (the caller keeps its own mode) |

Inputs are the task, the steps before t and the messages step t's model call
was given (`metadata["input_messages"]`, recorded by the gateway and read from
GenAI and OpenInference spans): a value a tool returned reaches the next call
as a message, not always as a step. Tokens are lower-cased words of three
letters or more and numbers (with their sign; thousands separators dropped).
What the correction changed is read position by position (a diff of the two
token sequences), so a value the step also states elsewhere still counts as
changed where the correction put it.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from faultlens.middleware.model.trace import Step, StepKind, Trace
from faultlens.middleware.spans.messages import messages_text

__all__ = ["mode_of_correction"]

# A trial keeps its regenerated text cut to this many characters (`Trial.regenerated`, in `faultlens.rerun.trial`
# and `replay.rerunners`): a correction that long may end mid-word and leave out the rest of the step.
KEPT = 300
_TOKEN = re.compile(r"-?\d[\d,]*(?:\.\d+)?|[a-z]{3,}")
_NUMBER = re.compile(r"-?\d")


def _token_list(text: str) -> list[str]:
    return [t.replace(",", "") for t in _TOKEN.findall(text.lower())]


def _tokens(text: str) -> set[str]:
    return set(_token_list(text))


def _changed(old: str, new: str, cut: bool = False) -> tuple[set[str], set[str]]:
    """(tokens the correction put in, tokens it took out), where the two token sequences differ. `cut`: `new` was
    cut short, so its last token may be a piece of one and the old text's tail past it is not taken out."""
    a, b = _token_list(old), _token_list(new)
    if cut:
        b = b[:-1]
    added: set[str] = set()
    removed: set[str] = set()
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if cut and op == "delete" and i2 == len(a):
            continue
        if op != "equal":
            removed.update(a[i1:i2])
            added.update(b[j1:j2])
    return added, removed


def _given(step: Step) -> str:
    """The text of the messages the step's model call was given, when the trace recorded them."""
    messages = step.metadata.get("input_messages") if isinstance(step.metadata, dict) else None
    return messages_text(messages) if isinstance(messages, list) else ""


# A tool call as a gateway-recorded step renders it (`spans.messages._part_text`). The closing parenthesis may be
# missing: a re-run's regenerated text is kept cut to a few hundred characters.
_GATEWAY_CALL = re.compile(r"^\[tool_call\] ([^\s(]+)\((.*?)\)?$", re.M)


def _gateway_calls(text: str) -> list[tuple[str, str]]:
    """(tool, arguments) of each tool call a gateway-recorded call's text renders."""
    return [(m.group(1).lower(), m.group(2)) for m in _GATEWAY_CALL.finditer(text)]


def _same_arguments(before: str, after: str) -> bool:
    # A prefix is the same arguments cut short (the regenerated text's cut), not a correction.
    return before == after or (bool(after) and len(after) < len(before) and before.startswith(after))


# The frameworks' handoff tools (`handoff`, `transfer_to_agent`, `transfer_to_<agent>`): control passes to another
# agent and the arguments are the brief it gets, so a value changed in them was passed on, not a tool misused. An
# agent called as a tool (`ask_calculator`) answers back to its caller: its arguments are a tool call's.
_HANDOFF = re.compile(r"handoff|transfer|delegate")


def _tool_call_mode(original: str, corrected: str, cut: bool = False) -> str | None:
    """A.1 when the correction called other tools, A.2 when the same tools with other arguments; None when the
    step's tool calls stayed as they were (the change is in the text beside them), only a handoff's arguments
    changed, or either side called none. `cut`: the correction's last call may be cut short."""
    before, after = _gateway_calls(original), _gateway_calls(corrected)
    if not before or not after:
        return None
    last = len(after) - 1
    if any(b != a and not (cut and i == last and b.startswith(a))
           for i, ((b, _), (a, _)) in enumerate(zip(before[: len(after)], after))) or len(after) > len(before):
        return "A.1"
    changed = [name for (name, b), (_, a) in zip(before, after) if not _same_arguments(b, a)]
    return "A.2" if any(not _HANDOFF.search(name) for name in changed) else None


def _tool_name(text: str) -> str | None:
    match = re.search(r"^Action:\s*(\S+)", text, re.M)
    return match.group(1).lower() if match else None


def mode_of_correction(trace: Trace, step: int, corrected: str) -> str | None:
    """The mode that turning `trace.steps[step]` into `corrected` fixed, or None when the change says nothing."""
    original = trace.steps[step]
    cut = len(corrected) >= KEPT
    added, removed = _changed(original.content, corrected, cut)
    if not added and not removed:
        return None
    inputs = _tokens(trace.task.query)
    task_words = set(inputs)
    for earlier in trace.steps[:step]:
        inputs |= _tokens(earlier.content)
    inputs |= _tokens(_given(original))
    numbers_added = {t for t in added if _NUMBER.match(t)}
    if _gateway_calls(original.content) and _gateway_calls(corrected):
        called = _tool_call_mode(original.content, corrected, cut)
        if called is not None:
            return called
    elif original.kind == StepKind.tool_call or original.tool_name:
        before, after = original.tool_name or _tool_name(original.content), _tool_name(corrected)
        return "A.1" if before and after and before.lower() != after else "A.2"
    if original.kind == StepKind.plan:
        return "R.4" if added & task_words else "PL.1"
    if original.kind == StepKind.final_answer and numbers_added and numbers_added <= inputs:
        return "A.4"
    if original.kind in (StepKind.message, StepKind.final_answer, StepKind.llm_call):
        if added and added <= inputs:
            return "C.2" if trace.multi_agent else "V.1"
        if numbers_added:  # a new number no input holds, or a known one in a computation the correction rewrote
            return "R.3"
    return None
