"""`heuristic`: offline attribution from documented signals. No model, no key.

Each signal is a small function `signal(trace, context) -> list[Hit]`: it
points at steps, with a weight, the failure mode it suggests and a note. The
step with the highest total weight is blamed (the earliest on a tie, since the
decisive error is the first one); its mode is the mode of its heaviest hit;
its agent is the agent of that step. Every hit is kept in
`details["signals"]`, and the per-step totals are the `ranking`.

Signals (weights are round numbers chosen by reasoning, not fitted to data):

| signal | fires on | weight | mode |
|---|---|---|---|
| tool_error | a step with `error` set; an argument-type error also blames the call that caused it | 3 | A.2 (bad arguments) or V.3 (environment) |
| error_words | tool results and executors' output whose text reads like a failure (error, not found, timeout, ...) | 1 | V.3, and 0.5 A.2 on the call |
| answer_origin | the first step where the (wrong) final answer's value appears | 2 (1 if it came from a tool) | R.3 numeric with arithmetic, else R.1 |
| reference_lost | with the reference answer: the first agent step after the last step that still had the correct value | 1.5 | V.1 |
| near_miss | an action whose names/numbers nearly but not exactly match the task's (Marla vs Marta) | 2.5 | A.2 in tool calls, C.2 in messages, R.4 otherwise |
| excluded_used | an action that uses what the task said to exclude ("without X", "except X") | 1.5 | R.4 |
| repeated_action | the first repeat of an identical tool call or message by the same agent | 1.5 | A.6 |
| hedging | agent text that guesses or assumes ("I assume", "probably") | 1 | R.1 |

Only decisions are blamed (`middleware.model.roles`): a hit on a tool result or on
an executor's output counts for the decision that caused it (the call, the
code; `to_decisions`), with mode A.2 or A.4 instead of V.3, except when the
tool failed on its own (an environment fault: the error reads as a timeout,
an outage, a 5xx), which stays on the tool step as V.3 and says so.

With no signal at all, the documented prior is the step that gave the final
answer, mode R.2, confidence 0, and the reason says that no signal fired.
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from faultlens.middleware.model.trace import Attribution, AttributionStatus, Cost, Step, StepKind, StepRole, Trace

from faultlens.middleware.model.roles import cause_of

from ..base import BaseAttributor
from ..registry import register
from ..steptext import (ARGUMENT_ERROR, NUMBER, action_text, answer_values, environment_fault, final_step,
                        norm, numbers, step_text)
from .llm_base import candidates_ranking


@dataclass
class Hit:
    step: int
    weight: float
    mode: str
    signal: str
    note: str


@dataclass
class Context:
    with_reference: bool


_FAILURE_WORDS = re.compile(r"\b(error|exception|traceback|failed|failure|not found|no results?|invalid|timeout|timed out|denied|unavailable|cannot|unable to)\b", re.I)
_HEDGE = re.compile(r"\b(i assume|assuming|let'?s assume|probably|i guess|i think|most likely|not sure|without (checking|verifying)|presumably)\b", re.I)
_ARITHMETIC = re.compile(r"[+*/=×÷]|\b(sum|total|difference|minus|plus|times|divided|average|multipl\w*|subtract\w*|add(ed|ing)?)\b", re.I)
_EXCLUDE = re.compile(r"\b(?:without|excluding|except|other than|not including)\s+(?:the\s+|a\s+|an\s+)?([A-Za-z][\w-]{2,})", re.I)
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z]{2,}(?:\s+[A-Z][a-zA-Z]{2,})*\b|\b\d{2,}\b")

def _answer_correct(trace: Trace, final: Step, ctx: Context) -> bool:
    """True only if the reference answer may be used (with_reference) and the final answer contains it."""
    reference = trace.task.reference_answer
    if reference is None or not ctx.with_reference:
        return False
    wanted = answer_values(reference)
    got = norm(step_text(final))
    return bool(wanted) and all(v in got for v in wanted)


# ---------------------------------------------------------------- signals


def tool_error(trace: Trace, ctx: Context) -> list[Hit]:
    hits = []
    for step in trace.steps:
        if not step.error:
            continue
        if environment_fault(step):
            hits.append(Hit(step.index, 3.0, "V.3", "tool_error", f"environment fault (the tool failed, not the call): {step.error[:120]}"))
            continue
        call = _calling_step(trace, step)
        if ARGUMENT_ERROR.search(step.error) and call is not None and call.index != step.index:
            hits.append(Hit(call.index, 3.0, "A.2", "tool_error", f"its call failed at step {step.index}: {step.error[:120]}"))
            hits.append(Hit(step.index, 1.0, "V.3", "tool_error", f"error reported: {step.error[:120]}"))
        else:
            mode = "A.2" if ARGUMENT_ERROR.search(step.error) else "V.3"
            hits.append(Hit(step.index, 3.0, mode, "tool_error", f"error: {step.error[:120]}"))
    return hits


def _calling_step(trace: Trace, step: Step) -> Step | None:
    """The tool call a result belongs to: the nearest earlier call of the same tool (or the step itself if it is a call)."""
    if step.kind == StepKind.tool_call:
        return step
    for earlier in reversed(trace.steps[: step.index]):
        if earlier.kind == StepKind.tool_call and (step.tool_name is None or earlier.tool_name == step.tool_name):
            return earlier
    return None


def error_words(trace: Trace, ctx: Context) -> list[Hit]:
    hits = []
    for step in trace.steps:
        if step.error or step.role not in (StepRole.tool_result, StepRole.executor_output):
            continue  # tool_error already covers steps with an error field; only results and executor output are read
        text = (step.content or "") + " " + (json.dumps(step.tool_result, default=str) if step.tool_result is not None else "")
        match = _FAILURE_WORDS.search(text)
        if match:
            hits.append(Hit(step.index, 1.0, "V.3", "error_words", f"tool result says {match.group(0)!r}"))
            call = _calling_step(trace, step)
            if call is not None:
                hits.append(Hit(call.index, 0.5, "A.2", "error_words", f"its result at step {step.index} says {match.group(0)!r}"))
    return hits


def answer_origin(trace: Trace, ctx: Context) -> list[Hit]:
    final = final_step(trace)
    if _answer_correct(trace, final, ctx):
        return []  # the value is right; the failure lies elsewhere (format, verification, ...)
    values = answer_values(final.content or step_text(final))
    if not values:
        return []
    task_text = norm(trace.task.query)
    hits = []
    for value in values:
        if value in task_text:
            continue  # copied from the question; its first appearance says nothing
        for step in trace.steps[: final.index]:
            text = step_text(step)
            present = value in numbers(text) if NUMBER.fullmatch(value) else value in norm(text)
            if not present:
                continue
            if step.kind == StepKind.tool_result:
                hits.append(Hit(step.index, 1.0, "V.3", "answer_origin", f"the final answer's value {value!r} first comes from this tool result"))
            else:
                numeric = bool(NUMBER.fullmatch(value))
                mode = "R.3" if numeric and _ARITHMETIC.search(action_text(step)) else "R.1"
                hits.append(Hit(step.index, 2.0, mode, "answer_origin", f"the final answer's value {value!r} first appears here"))
            break
    return hits


def reference_lost(trace: Trace, ctx: Context) -> list[Hit]:
    reference = trace.task.reference_answer
    if not ctx.with_reference or reference is None:
        return []
    final = final_step(trace)
    if _answer_correct(trace, final, ctx):
        return []
    wanted = answer_values(reference)
    if not wanted:
        return []
    last_seen = None
    for step in trace.steps[: final.index]:
        text = step_text(step)
        numeric = bool(NUMBER.fullmatch(wanted[0]))
        if (wanted[0] in numbers(text)) if numeric else (wanted[0] in norm(text)):
            last_seen = step.index
    if last_seen is None:
        return []
    for step in trace.steps[last_seen + 1 : final.index + 1]:
        if step.kind != StepKind.tool_result:
            return [Hit(step.index, 1.5, "V.1", "reference_lost", f"the correct value {wanted[0]!r} was in step {last_seen} but is not carried forward here")]
    return []


def _task_entity_words(query: str) -> set[str]:
    """Names and numbers of the task: capitalised words not at a sentence start, and numbers of 2+ digits."""
    words: set[str] = set()
    for match in _ENTITY.finditer(query):
        before = query[: match.start()].rstrip()
        sentence_start = not before or before[-1] in ".?!:\n\"'("
        parts = match.group(0).split()
        if sentence_start and not parts[0][0].isdigit():
            parts = parts[1:]  # "Book a hotel": the capital says nothing about "Book"
        words.update(w for w in parts if len(w) >= 4 or w.isdigit())
    return words


def _near_miss(expected: str, written: str) -> bool:
    """Nearly the same spelling, but not the same word nor an inflection of it (Marta/Marla yes, Book/Booked no)."""
    a, b = expected.lower(), written.lower()
    if a == b or (a.isalpha() and (a.startswith(b) or b.startswith(a))):
        return False
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def near_miss(trace: Trace, ctx: Context) -> list[Hit]:
    words = _task_entity_words(trace.task.query)
    if not words:
        return []
    hits = []
    for step in trace.steps:
        text = action_text(step)
        if not text:
            continue
        for token in set(re.findall(r"\b[A-Za-z]{4,}\b|\b\d{2,}\b", text)):
            if token in words:
                continue
            close = [w for w in words if w[0].isdigit() == token[0].isdigit() and _near_miss(w, token)]
            if close and token[0].isupper() == close[0][0].isupper():
                mode = "A.2" if step.kind == StepKind.tool_call else ("C.2" if trace.multi_agent and step.kind == StepKind.message else "R.4")
                hits.append(Hit(step.index, 2.5, mode, "near_miss", f"writes {token!r} where the task says {close[0]!r}"))
                break
    return hits


def excluded_used(trace: Trace, ctx: Context) -> list[Hit]:
    excluded = {m.lower() for m in _EXCLUDE.findall(trace.task.query)}
    if not excluded:
        return []
    hits = []
    for step in trace.steps:
        if step.kind not in (StepKind.tool_call, StepKind.final_answer, StepKind.plan):
            continue
        words = set(re.findall(r"[a-z][\w-]+", action_text(step).lower()))
        used = excluded & words
        if used:
            hits.append(Hit(step.index, 1.5, "R.4", "excluded_used", f"uses {sorted(used)[0]!r}, which the task excludes"))
    return hits


def repeated_action(trace: Trace, ctx: Context) -> list[Hit]:
    seen: dict[tuple, int] = {}
    hits: list[Hit] = []
    for step in trace.steps:
        if step.kind == StepKind.tool_call and step.tool_name:
            key: tuple = (step.agent, "call", step.tool_name, json.dumps(step.tool_arguments, sort_keys=True, default=str))
        elif step.kind in (StepKind.message, StepKind.llm_call, StepKind.plan) and len((step.content or "").strip()) >= 20:
            key = (step.agent, "text", norm(step.content))
        else:
            continue
        if key in seen:
            first = seen[key]
            if not any(h.note.startswith(f"repeats step {first}") for h in hits):
                hits.append(Hit(step.index, 1.5, "A.6", "repeated_action", f"repeats step {first} without progress"))
        else:
            seen[key] = step.index
    return hits


def hedging(trace: Trace, ctx: Context) -> list[Hit]:
    hits = []
    for step in trace.steps:
        match = _HEDGE.search(action_text(step))
        if match:
            hits.append(Hit(step.index, 1.0, "R.1", "hedging", f"guesses: {match.group(0)!r}"))
    return hits


SIGNALS: dict[str, Callable[[Trace, Context], list[Hit]]] = {
    "tool_error": tool_error,
    "error_words": error_words,
    "answer_origin": answer_origin,
    "reference_lost": reference_lost,
    "near_miss": near_miss,
    "excluded_used": excluded_used,
    "repeated_action": repeated_action,
    "hedging": hedging,
}


def to_decisions(trace: Trace, hits: list[Hit]) -> tuple[list[Hit], int]:
    """Hits on a tool result or an executor's output count for the decision that caused it (`middleware.model.roles`).

    The one exception is an environment fault: a tool step whose error reads as
    the environment failing (timeout, 5xx, ...) keeps its V.3 hit, because the
    call was not the problem. Hits on control steps are dropped. Returns the
    hits and how many were moved.
    """
    out, moved = [], 0
    for hit in hits:
        step = trace.steps[hit.step]
        cause = cause_of(trace, hit.step)
        if step.is_decision or cause == hit.step or (hit.mode == "V.3" and environment_fault(step)):
            out.append(hit)
            continue
        if cause is None:
            continue
        moved += 1
        # What the result showed was the call's fault (A.2), or the executed code's (A.4).
        mode = ({StepRole.tool_result: "A.2", StepRole.executor_output: "A.4"}.get(step.role, hit.mode)
                if hit.mode == "V.3" else hit.mode)
        out.append(Hit(cause, hit.weight, mode, hit.signal, f"via step {hit.step} ({step.role.value}): {hit.note}"))
    return out, moved


def signal_weights(trace: Trace, with_reference: bool = False) -> dict[int, float]:
    """Every signal's hits, moved to the decisions they are about, summed per step (the `learned` model reads these)."""
    hits, _ = to_decisions(trace, [hit for signal in SIGNALS.values() for hit in signal(trace, Context(with_reference=with_reference))])
    totals: dict[int, float] = defaultdict(float)
    for hit in hits:
        totals[hit.step] += hit.weight
    return dict(totals)


class Heuristic(BaseAttributor):
    """Offline attribution from the signals above; see the module docstring."""

    name = "heuristic"

    def __init__(self, with_reference: bool = False, signals: list[str] | None = None, **ignored: Any):
        unknown = [s for s in (signals or []) if s not in SIGNALS]
        if unknown:
            raise ValueError(f"unknown heuristic signal(s) {unknown}; known: {', '.join(SIGNALS)}")
        self.with_reference = with_reference
        self.signals = list(signals or SIGNALS)
        # Options meant for LLM methods (model, budget, ...) do not apply; they are listed in the output, not dropped silently.
        self.ignored = sorted(ignored)

    def attribute(self, trace: Trace) -> Attribution:
        started = time.monotonic()
        details: dict[str, Any] = {"with_reference": self.with_reference}
        if self.ignored:
            details["ignored_options"] = self.ignored
        if not trace.steps:
            return Attribution(trace_id=trace.id, method=self.name, backend="heuristic", status=AttributionStatus.error, error="the trace has no steps to attribute", details=details)
        ctx = Context(with_reference=self.with_reference)
        hits, moved = to_decisions(trace, [hit for name in self.signals for hit in SIGNALS[name](trace, ctx)])
        details["signals"] = [asdict(h) for h in hits]
        if moved:
            details["moved_to_cause"] = moved
        totals: dict[int, float] = defaultdict(float)
        for hit in hits:
            totals[hit.step] += hit.weight
        if not totals:
            final = final_step(trace)
            step, agent, mode, confidence = final.index, final.agent, "R.2", 0.0
            reason = "no signal fired; prior: the step that gave the final answer"
            details["prior"] = True
            ranking = candidates_ranking(trace, [(final.index, 0.0, "prior")])
        else:
            best = min(totals, key=lambda s: (-totals[s], s))
            top = max((h for h in hits if h.step == best), key=lambda h: h.weight)
            reason = "; ".join(f"{h.signal}: {h.note}" for h in hits if h.step == best)
            step, agent, mode, confidence = best, trace.steps[best].agent, top.mode, round(totals[best] / sum(totals.values()), 4)
            ranking = candidates_ranking(trace, [(s, w, "; ".join(h.signal for h in hits if h.step == s)) for s, w in totals.items()])
            # Earliest-first among equal totals, as the decisive error is the first one.
            ranking.sort(key=lambda c: (-c.score, c.step))
        return Attribution(
            trace_id=trace.id, method=self.name, backend="heuristic", status=AttributionStatus.ok, ranking=ranking,
            cost=Cost(seconds=round(time.monotonic() - started, 4)), details=details, prompt_version="heuristic/v1",
            step=step, agent=agent, mode=mode, confidence=confidence, reason=reason,
        )


register("heuristic", Heuristic)
