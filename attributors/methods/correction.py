"""The failure mode a verified correction points at: what the corrected step changed, read with the taxonomy.

When a rerun shows that replacing step t by a new text makes the run succeed,
the difference between the two texts says what was wrong, better than a
classifier that sees the failing step alone. `mode_of_correction` reads the
difference as a person would:

| the step | what the correction did | mode |
|---|---|---|
| a tool call | called another tool | A.1 wrong tool/action |
| any step but a plan (a tool call's arguments, a handoff's brief, a message, an answer) | put back only numbers in place of slips of them (below) | R.3 numerical/calculation error |
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

The rows are read top down. A number is a *slip* of the one the correction
put back when it is that number rounded to fewer decimal places (1.0807
written 1.1), that number with two neighbouring digits swapped where it is an
operand of a calculation (`6 * 12.46` for `6 * 12.64`), or when the number put
back is what the step's agent's own calculation gave (a tool call of its own
whose arguments are arithmetic answered 711.68; the step wrote 716.18): a
number miscalculated, whether it sits in a tool call's arguments, a handoff's
brief or a message. No slip: a wrong number its inputs held (another input
value swapped in was passed on or used wrongly), a number one off (a
neighbouring year, another day or booking), digits swapped in a figure stated
outside a calculation (a report line, an assignment, an answer) or another
agent's result restated wrongly (passed on wrongly: C.2), a plan's numbers
(what to do).

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

import json
import re
from difflib import SequenceMatcher
from typing import Any

from faultlens.middleware.model.trace import Step, StepKind, Trace
from faultlens.middleware.replay.rerunners import REGENERATED_KEPT
from faultlens.middleware.spans.messages import messages_text

__all__ = ["mode_of_correction"]

_TOKEN = re.compile(r"-?\d[\d,]*(?:\.\d+)?|[a-z]{3,}")
_NUMBER = re.compile(r"-?\d")


def _token_list(text: str) -> list[str]:
    return [t.replace(",", "") for t in _TOKEN.findall(text.lower())]


def _tokens(text: str) -> set[str]:
    return set(_token_list(text))


def _blocks(old: str, new: str, cut: bool = False) -> list[tuple[list[str], list[str]]]:
    """(tokens taken out, tokens put in) of each place where the two token sequences differ. `cut`: `new` was cut
    short, so its last token may be a piece of one and the old text's tail past it is not taken out."""
    a, b = _token_list(old), _token_list(new)
    if cut:
        b = b[:-1]
    return [(a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if op != "equal" and not (cut and op == "delete" and i2 == len(a))]


def _given(step: Step) -> str:
    """The text of the messages the step's model call was given, when the trace recorded them."""
    messages = step.metadata.get("input_messages") if isinstance(step.metadata, dict) else None
    return messages_text(messages) if isinstance(messages, list) else ""


# An arithmetic expression: numbers joined by an operator (a minus needs spaces around it: `2026-05-14` is a date).
_ARITHMETIC = re.compile(r"\d\s*[*/+×]\s*[\d(]|\d\s+-\s+[\d(]")


def _calls_and_responses(messages: list[Any]) -> tuple[dict[str, tuple[str | None, str]], dict[str, str]]:
    """({call id: (the calling message's name, its arguments)}, {call id: the response}) of GenAI-parts and OpenAI
    shaped messages."""
    calls: dict[str, tuple[str | None, str]] = {}
    responses: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        name = message.get("name")
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                calls[str(part.get("id"))] = (name, json.dumps(part.get("arguments"), default=str))
            elif isinstance(part, dict) and part.get("type") == "tool_call_response":
                responses[str(part.get("id"))] = json.dumps(part.get("response"), default=str)
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                calls[str(call.get("id"))] = (name, str((call.get("function") or {}).get("arguments", "")))
        if message.get("role") == "tool" and message.get("tool_call_id") is not None:
            responses[str(message["tool_call_id"])] = str(message.get("content", ""))
    return calls, responses


def _computed(step: Step) -> set[str]:
    """The numbers the step's own agent had computed: what a tool call of its own (a message of its model, unnamed or
    named as the step's agent) whose arguments are arithmetic answered, its operands aside."""
    messages = step.metadata.get("input_messages") if isinstance(step.metadata, dict) else None
    if not isinstance(messages, list):
        return set()
    calls, responses = _calls_and_responses(messages)
    out: set[str] = set()
    for call_id, (name, arguments) in calls.items():
        if name in (None, step.agent) and call_id in responses and _ARITHMETIC.search(arguments):
            out |= {t for t in _tokens(responses[call_id]) if _NUMBER.match(t)} - _tokens(arguments)
    return out


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def _rounded(wrong: str, right: str) -> bool:
    """`wrong` is `right` rounded to fewer decimal places: a precision lost (1.0807 written 1.1)."""
    places = _decimals(wrong)
    return places < _decimals(right) and abs(float(wrong) - float(right)) <= 0.5 * 10 ** -places + 1e-9


def _transposed(wrong: str, right: str) -> bool:
    """`wrong` is `right` with two neighbouring digits swapped, its sign and decimal point in place (711.68 written
    716.18)."""
    if re.sub(r"\d", "0", wrong) != re.sub(r"\d", "0", right):
        return False
    a, b = re.sub(r"\D", "", wrong), re.sub(r"\D", "", right)
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    return len(differ) == 2 and differ[1] == differ[0] + 1 and a[differ[0]] == b[differ[1]] and a[differ[1]] == b[differ[0]]


def _operand(text: str, number: str) -> bool:
    """`number` stands in `text` as an operand of arithmetic: an operator on one side of it, or a bracket that is no
    call's (`range(34, ...)` is not arithmetic)."""
    for m in re.finditer(rf"(?<![\d.]){re.escape(number)}(?![\d]|\.\d)", text):
        before, after = text[max(0, m.start() - 4): m.start()], text[m.end(): m.end() + 4]
        if re.search(r"([\d)]\s*[*/+×]|[\d)]\s+-|(?<!\w)\()\s*$", before) or re.match(r"\s*([*/+×]|-\s)\s*[\d(]|\s*\)", after):
            return True
    return False


def _numerical_slip(blocks: list[tuple[list[str], list[str]]], text: str, inputs: set[str], computed: set[str]) -> bool:
    """Every change the correction made to `text` put a number back in place of a slip of it: the wrong number is the
    right one rounded, or with two digits swapped where it is an operand of a calculation, or the right one is what
    the agent's own calculation gave; and the wrong number is none its inputs held (a value swapped for another input
    value was passed on or used wrongly)."""
    pairs: list[tuple[str, str]] = []
    for out, put in blocks:
        if len(out) != len(put):
            return False
        for wrong, right in zip(out, put):
            if wrong == right:
                continue
            if not (_NUMBER.match(wrong) and _NUMBER.match(right)):
                return False
            pairs.append((wrong, right))
    return bool(pairs) and all(
        wrong not in inputs and (_rounded(wrong, right) or right in computed or (_transposed(wrong, right) and _operand(text, wrong)))
        for wrong, right in pairs)


# A tool call as a gateway-recorded step renders it (`spans.messages._part_text`). The closing parenthesis may be
# missing: a re-run's regenerated text is kept cut (`REGENERATED_KEPT`).
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
    # A trial keeps its regenerated text cut to REGENERATED_KEPT characters: one that long may end mid-word and
    # leave out the rest of the step.
    cut = len(corrected) >= REGENERATED_KEPT
    blocks = _blocks(original.content, corrected, cut)
    if not blocks:
        return None
    added = {t for _, put in blocks for t in put}
    inputs = _tokens(trace.task.query)
    task_words = set(inputs)
    for earlier in trace.steps[:step]:
        inputs |= _tokens(earlier.content)
    inputs |= _tokens(_given(original))
    numbers_added = {t for t in added if _NUMBER.match(t)}
    # A plan's numbers say what to do, not what was computed: its rows below read it.
    slipped = original.kind != StepKind.plan and _numerical_slip(blocks, original.content, inputs, _computed(original))
    if _gateway_calls(original.content) and _gateway_calls(corrected):
        called = _tool_call_mode(original.content, corrected, cut)
        if called == "A.1" or (called is not None and not slipped):
            return called
    elif original.kind == StepKind.tool_call or original.tool_name:
        before, after = original.tool_name or _tool_name(original.content), _tool_name(corrected)
        if before and after and before.lower() != after:
            return "A.1"
        return "R.3" if slipped else "A.2"
    if slipped:
        return "R.3"
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
