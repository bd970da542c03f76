"""Reading a step's text, shared by the offline methods (`heuristic`, `learned`).

What a step says, what its agent itself wrote, its numbers and salient
answer values, the step that gave the final answer, and the wording that
marks a tool failure as the environment's fault rather than the caller's.
"""

from __future__ import annotations

import json
import re

from faultlens.middleware.model.trace import Step, StepKind, StepRole, Trace
from faultlens.middleware.model.roles import candidates
from faultlens.middleware.spans.messages import messages_text

NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
ARGUMENT_ERROR = re.compile(r"\b(invalid|not found|no such|missing|unknown|unrecognized|bad request|argument|parameter|malformed|"
                            r"does not exist|no results?|400|404|422)\b", re.I)
ENVIRONMENT_ERROR = re.compile(r"\b(timeout|timed out|unavailable|connection|refused|rate limit|internal server|crash(ed)?|5\d\d|"
                               r"overloaded)\b", re.I)


# Verbs of tool names that change the world (an order, a file, a booking) rather than read it. A wrong
# consequential action is often the decisive step of a customer-service or ops run: it cannot be taken back.
SIDE_EFFECT_VERBS = frozenset(
    "modify update cancel exchange return transfer create delete remove send book buy purchase pay refund submit write edit "
    "set add post commit reserve order apply change place checkout upload deploy move rename approve reject assign schedule "
    "register close merge push insert drop grant revoke issue charge transact replace".split())
_NAME_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def side_effect(step: Step) -> bool:
    """A decision that calls a tool whose name opens with a state-changing verb (`cancel_pending_order`, `sendEmail`)."""
    if step.kind != StepKind.tool_call or not step.tool_name or step.role != StepRole.decision:
        return False
    parts = [p.lower() for p in _NAME_PART.findall(step.tool_name)]
    return bool(parts) and parts[0] in SIDE_EFFECT_VERBS


def _dumped(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def step_text(step: Step) -> str:
    """Everything a step holds as text: content, tool arguments, tool result, error."""
    parts = [step.content or ""]
    if step.tool_arguments is not None:
        parts.append(_dumped(step.tool_arguments))
    if step.tool_result is not None:
        parts.append(_dumped(step.tool_result))
    if step.error:
        parts.append(step.error)
    return "\n".join(p for p in parts if p)


def given_text(step: Step) -> str:
    """The text of the messages a model call step was given, when the trace recorded them (a gateway's steps do)."""
    messages = step.metadata.get("input_messages") if isinstance(step.metadata, dict) else None
    return messages_text(messages) if isinstance(messages, list) else ""


def action_text(step: Step) -> str:
    """What the agent itself wrote or sent (not what a tool, an executor or the system returned)."""
    if step.kind == StepKind.tool_result or step.role != StepRole.decision:
        return ""
    parts = [step.content or ""]
    if step.tool_arguments is not None:
        parts.append(_dumped(step.tool_arguments))
    return "\n".join(p for p in parts if p)


def numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in NUMBER.findall(text)]


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w.\s-]", " ", text.lower())).strip()


def final_step(trace: Trace) -> Step:
    """The step that gave the final answer: the last final answer, else the last decision, else the last step."""
    finals = [s for s in trace.steps if s.kind == StepKind.final_answer]
    if finals:
        return finals[-1]
    decisions = [s for s in trace.steps if s.role == StepRole.decision]
    return decisions[-1] if decisions else trace.steps[-1]


def answer_values(text: str) -> list[str]:
    """The salient values of an answer: its numbers, else the whole short answer."""
    found = numbers(text)
    if found:
        return found[-1:]  # the last number is usually the answer ("... so the total is 42")
    short = norm(text)
    return [short] if 0 < len(short) <= 60 else []


def environment_fault(step: Step) -> bool:
    """A tool step whose error reads as the environment failing (timeout, 5xx, ...), not as a bad call."""
    if not step.error:
        return False
    return bool(ENVIRONMENT_ERROR.search(step.error)) and not ARGUMENT_ERROR.search(step.error)


def blameable(trace: Trace) -> list[int]:
    """Indices of the steps an offline method may blame: `middleware.model.roles.candidates`, and tool steps that
    failed as an environment fault (V.3)."""
    found = {s.index for s in candidates(trace)} | {s.index for s in trace.steps if environment_fault(s)}
    return sorted(found)
