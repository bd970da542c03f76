"""Why a blamed step is wrong, in words: the evidence around it in the trace, for verdicts and lessons.

An offline method picks a step by scores; a person needs to be told what the
step says and which other steps show it wrong. `evidence(trace, step)` looks
for a few kinds of proof, each with the failure mode it points to:

| kind | the blamed step ... | mode |
|---|---|---|
| `dropped_after_failure` | leaves out an item whose tool call failed before it, without saying so | V.3 |
| `silent_after_failure` | goes on after a failed tool call without a word about the failure | V.3 |
| `own_call_failed` | is a tool call whose own result is an error | A.2 (bad arguments) or V.3 (environment) |
| `repeats` | repeats an earlier identical action of its agent | A.6 |
| `unsupported_values` | states values that neither the task, any earlier step nor the step's own recorded input gave | R.1 |

`reason(trace, step, found)` writes the verdict's sentence from them: what the
step says, the proof, and which later step built on it. Nothing here reads a
gold label or the reference answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from faultlens.middleware.model.trace import Step, StepKind, StepRole, Trace
from faultlens.middleware.model.roles import cause_of
from faultlens.middleware.model.text import one_line

from .steptext import ARGUMENT_ERROR, NUMBER, environment_fault, final_step, given_text, norm, numbers, step_text

FAILURE_WORDS = re.compile(r"\b(error|fail\w*|not found|no entry|missing|unavailable|could not|couldn'?t|unable|unknown|"
                            r"no data|no result\w*|timed? ?out)\b", re.I)
_ARITHMETIC = re.compile(r"\d\s*[-+*/×÷=]\s*\d|\b(sum|total|difference|times|divided|average|percent\w*)\b", re.I)
_QUOTE = 80


@dataclass
class Evidence:
    """One proof that a step is wrong: what kind, the mode it points to, the steps that show it, a sentence."""

    kind: str
    mode: str
    steps: list[int]
    text: str
    advice: str
    items: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _what(step: Step) -> str:
    """A step named for a person: 'the researcher's model call (step 4)'."""
    kind = {StepKind.llm_call: "model call", StepKind.tool_call: "call", StepKind.final_answer: "final answer",
            StepKind.tool_result: "tool result"}.get(step.kind, step.kind.value.replace("_", " "))
    if step.kind == StepKind.tool_call and step.tool_name:
        kind = f"{step.tool_name} call"
    return f"the {step.agent}'s {kind} (step {step.index})"


def _argument_items(step: Step) -> list[str]:
    """The values a tool call was made for: its string and number arguments."""
    args = step.tool_arguments
    values = args.values() if isinstance(args, dict) else (args if isinstance(args, list) else [args])
    return [str(v) for v in values if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()]


def step_error(step: Step) -> str | None:
    """The error a tool step reports, or None: its `error`, or a result that reads as one."""
    if step.error:
        return step.error
    if step.kind in (StepKind.tool_call, StepKind.tool_result) and isinstance(step.tool_result, dict):
        for key in ("error", "Error", "message"):
            if key in step.tool_result and (key != "message" or FAILURE_WORDS.search(str(step.tool_result[key]))):
                return str(step.tool_result[key])
    return None


def _failed_calls_before(trace: Trace, index: int) -> list[Step]:
    """Failed tool steps before `index` that another decision caused (the step's own calls are `_own_call_failed`'s)."""
    return [s for s in trace.steps[:index] if s.tool_name and step_error(s) and cause_of(trace, s.index) != index]


def _own_failed_calls(trace: Trace, step: Step) -> list[Step]:
    """The failed tool steps this decision caused: itself if it is a failed call, and the results of its calls."""
    return [s for s in trace.steps if s.tool_name and step_error(s) and (s.index == step.index or cause_of(trace, s.index) == step.index)]


def _mentions(text: str, item: str) -> bool:
    return norm(item) in norm(text) if item else False


def _dropped_after_failure(trace: Trace, step: Step) -> Evidence | None:
    text = step_text(step)
    if step.kind == StepKind.tool_call or FAILURE_WORDS.search(step.content or ""):
        return None  # a call is not a report; a step that says something failed did not hide it
    for failed in reversed(_failed_calls_before(trace, step.index)):
        missing = [i for i in _argument_items(failed) if not _mentions(text, i)]
        if not missing:
            continue
        kept = [i for s in trace.steps[:step.index] if s.tool_name == failed.tool_name and not step_error(s)
                for i in _argument_items(s) if _mentions(text, i)]
        gives = f"gives {', '.join(dict.fromkeys(kept))} only" if kept else "goes on"
        item = missing[0]
        error = one_line(step_error(failed) or "", _QUOTE)
        return Evidence(
            "dropped_after_failure", "V.3", [failed.index],
            f"{_what(step)} {gives}; {'its' if failed.agent == step.agent else 'the ' + failed.agent + chr(39) + 's'} {failed.tool_name} for {item} failed at step {failed.index} ({error}) "
            f"and the {'answer' if step.kind == StepKind.final_answer else 'step'} does not say so",
            f"When {failed.tool_name} fails for an item (here {item}), say which item is missing and retry or report "
            f"it; never leave it out of what you pass on.", [item])
    return None


def _silent_after_failure(trace: Trace, step: Step) -> Evidence | None:
    if step.kind == StepKind.tool_call or FAILURE_WORDS.search(step.content or ""):
        return None
    failed = _failed_calls_before(trace, step.index)
    if not failed:
        return None
    last = failed[-1]
    later_decisions = [s for s in trace.steps[last.index + 1:step.index] if s.role == StepRole.decision and s.agent == step.agent]
    if later_decisions:
        return None  # not the first step after the failure: an earlier one already went on
    error = one_line(step_error(last) or "", _QUOTE)
    return Evidence("silent_after_failure", "V.3", [last.index],
                    f"{_what(step)} goes on as if {last.tool_name} had worked; it failed at step {last.index} ({error})",
                    f"Check every result of {last.tool_name} for failure and retry or report it instead of going on.")


def _own_call_failed(trace: Trace, step: Step) -> Evidence | None:
    if step.role != StepRole.decision and not (step.tool_name and step_error(step)):
        return None
    for result in _own_failed_calls(trace, step):
        error = step_error(result) or ""
        tool = result.tool_name or step.tool_name
        call = step if step.tool_name == tool and step.tool_arguments is not None else result
        args = one_line(json.dumps(call.tool_arguments, ensure_ascii=False, default=str), _QUOTE)
        what = _what(step) if step.kind == StepKind.tool_call else f"{_what(step)}: its {tool} call"
        if environment_fault(result):
            return Evidence("own_call_failed", "V.3", [result.index],
                            f"{what} failed on the environment's side: {one_line(error, _QUOTE)}",
                            f"When {tool} fails on its own (timeouts, outages), retry or report it; never go on without its result.")
        mode = "A.2" if ARGUMENT_ERROR.search(error) else "V.3"
        return Evidence("own_call_failed", mode, [result.index],
                        f"{what} with {args} failed: {one_line(error, _QUOTE)}",
                        f"Copy tool arguments exactly from the task or earlier results and check them before the call: "
                        f"here {tool}({args}) failed with {one_line(error, 60)}.")
    return None


def _repeats(trace: Trace, step: Step) -> Evidence | None:
    if step.role != StepRole.decision:
        return None
    key = (step.tool_name, json.dumps(step.tool_arguments, sort_keys=True, default=str)) if step.tool_name else (None, norm(step.content or ""))
    if key[0] is None and len(key[1]) < 20:
        return None
    for earlier in trace.steps[:step.index]:
        if earlier.agent != step.agent or earlier.role != StepRole.decision or earlier.kind != step.kind:
            continue
        other = (earlier.tool_name, json.dumps(earlier.tool_arguments, sort_keys=True, default=str)) if earlier.tool_name else (None, norm(earlier.content or ""))
        if other == key:
            return Evidence("repeats", "A.6", [earlier.index], f"{_what(step)} repeats step {earlier.index} without progress",
                            "If an action did not make progress, change it instead of repeating it.")
    return None


def _unsupported_values(trace: Trace, step: Step) -> Evidence | None:
    if step.role != StepRole.decision or step.kind == StepKind.tool_call or _ARITHMETIC.search(step.content or ""):
        return None  # a computed value is new by nature; whether the sum is right is not this finder's to say
    # What the step was given counts as much as what earlier steps said: a gateway records a call's input messages,
    # which hold values no recorded step carries (a code executor's output, a tool run inside the framework).
    seen = norm(" ".join([trace.task.query, given_text(step), *(step_text(s) for s in trace.steps[:step.index])]))
    seen_numbers = set(numbers(seen))
    new = []
    for value in dict.fromkeys(NUMBER.findall(step.content or "")):
        # Capitalised words are often just prose; a number no one gave is a claim.
        if value.replace(",", "") not in seen_numbers and len(value.replace(",", "").lstrip("-")) >= 2:
            new.append(value)
    if not new:
        return None
    shown = ", ".join(new[:3])
    return Evidence("unsupported_values", "R.1", [], f"{_what(step)} states {shown}, which neither the task, any earlier step nor its own input gave",
                    f"State only values your inputs or tool results give (here {shown}); look a value up or say it is unknown.", new[:3])


FINDERS = (_dropped_after_failure, _own_call_failed, _silent_after_failure, _repeats, _unsupported_values)


def evidence(trace: Trace, index: int) -> list[Evidence]:
    """The proofs that step `index` is wrong, strongest first (the order of `FINDERS`)."""
    if not 0 <= index < len(trace.steps):
        return []
    step = trace.steps[index]
    return [e for finder in FINDERS if (e := finder(trace, step)) is not None]


def built_on(trace: Trace, index: int) -> Step | None:
    """The final answer, when it carries a value the blamed step introduced (it was built on that step)."""
    step, final = trace.steps[index], final_step(trace)
    if final.index <= index or final.agent == step.agent and final.index == index + 1:
        return None
    values = {v for v in numbers(step.content or "") if len(v) >= 2}
    return final if values & set(numbers(step_text(final))) else None


def reason(trace: Trace, index: int, found: list[Evidence]) -> str:
    """The verdict in words: the proof, else what the step says; and which later answer was built on it."""
    step = trace.steps[index]
    if found:
        text = found[0].text
    else:
        said = one_line(step.content or step_text(step), _QUOTE)
        text = f"{_what(step)} is the likeliest decisive step" + (f': "{said}"' if said else "") + \
            "; no failed call, repetition or unsupported value was found around it"
    downstream = built_on(trace, index)
    if downstream is not None:
        text += f"; {_what(downstream)} is built on it"
    return text[0].upper() + text[1:]
