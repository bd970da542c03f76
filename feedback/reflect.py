"""Reflection: turn an attribution of a failed run into lessons for the agent that erred.

Three reflectors, one interface (`reflect(trace, attribution) -> Reflection`):

- `OfflineReflector` (method ``offline``): no model. When the trace shows the
  concrete slip at the blamed step (`attributors.evidence`: a failed lookup
  left out, a call that failed, a repeat), the lesson names it and what to do
  instead; otherwise it is assembled from the failure mode's definition in
  `middleware.model.taxonomy`, a piece of advice per mode written by us (`ADVICE`),
  and the blamed step's own content.
- `LLMReflector` (method ``llm:<model>``): asks a model through litellm for a
  JSON object {situation, mistake, advice}. An answer that cannot be read as
  that object gives *no* lesson and status ``unparsed``, with the raw text kept;
  a failed call gives status ``error``. Nothing is made up in either case.
- `TerminalReflector` (method ``terminal``): the Reflexion-style baseline. It
  sees only the task and the final outcome (no steps, no attribution), so it
  cannot say who erred; its lesson is addressed to every agent (`ALL_AGENTS`).

Every lesson records the attribution it came from (`attribution_id`) and the
reflector that wrote it (`method`).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from faultlens.attributors.evidence import evidence
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Cost, Lesson, Step, Trace
from faultlens.middleware.model.taxonomy import get_mode, is_mode
from faultlens.middleware.model.text import one_line

ALL_AGENTS = "*"
"""`Lesson.agent` value for a lesson addressed to every agent of a team."""

ReflectionStatus = Literal["ok", "unparsed", "error", "skipped"]

# What to do instead, per mode: the half of a lesson the taxonomy's definition
# (which says what goes wrong) does not give.
ADVICE: dict[str, str] = {
    "P.1": "Name only what you can see; compare labels, colours and legends in the image before naming an object.",
    "P.2": "Re-check positions and order (left/right, before/after) against the image or frames before reporting them.",
    "P.3": "Read values, counts and text off the visual twice, against the axis or scale, before using them.",
    "R.1": "State only facts that appear in your inputs or tool results; if a value is missing, look it up or say so.",
    "R.2": "Check that each conclusion follows from the premises you have; write the inference out before answering.",
    "R.3": "Recompute every number from its inputs (operation, units, rounding) before passing it on.",
    "R.4": "Re-read the question and its constraints; make sure the answer is to that question, not a related one.",
    "PL.1": "Plan every sub-goal the question needs, in an order where each step has its inputs, before starting.",
    "PL.2": "Plan only with the tools, data and agents the team actually has.",
    "PL.3": "Keep the original goal in view; check each step still serves it.",
    "A.1": "Choose the tool or action that matches the current sub-goal; check the options before acting.",
    "A.2": "Copy tool arguments exactly from the task or earlier results (names, ids, units) and check them before the call.",
    "A.3": "Call only tools that exist, and report only results you actually received.",
    "A.4": "Match the required output format exactly (type, units, syntax); validate before returning.",
    "A.5": "Do not finish until every part of the task is done; check the plan is complete before the final answer.",
    "A.6": "If an action did not make progress, change it instead of repeating it.",
    "V.1": "Re-read the facts established earlier in the run and keep your answer consistent with them.",
    "V.2": "Verify by comparing the result with its source; approve only what you actually checked.",
    "V.3": "Check every tool result for failure (timeouts, errors, empty results) and retry or report it instead of proceeding.",
    "C.1": "Assign each sub-task to the agent whose role and tools fit it, in the order the plan needs.",
    "C.2": "Pass values on to other agents exactly as the source states them (digits, units, names).",
    "C.3": "Check another agent's output against what your role requires before relying on it.",
}

GENERIC_ADVICE = "Check your output at this point against its inputs and the task before passing it on."


@dataclass
class Reflection:
    """What a reflector produced for one attribution: lessons, or an honest status saying why none."""

    status: ReflectionStatus
    method: str
    lessons: list[Lesson] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)
    error: str | None = None
    cost: Cost = field(default_factory=Cost)


@runtime_checkable
class Reflector(Protocol):
    method: str

    def reflect(self, trace: Trace, attribution: Attribution | None) -> Reflection: ...


def _step_action(step: Step) -> str:
    """What the agent did at a step, in one line."""
    if step.tool_name:
        args = json.dumps(step.tool_arguments, ensure_ascii=False, default=str) if step.tool_arguments is not None else ""
        return one_line(f"called {step.tool_name}({args})" + (f": {step.content}" if step.content else ""))
    if step.content:
        return f'wrote "{one_line(step.content)}"'
    return f"took a {step.kind.value.replace('_', ' ')} step with no text"


def _usable(attribution: Attribution | None, trace: Trace) -> str | None:
    """Why an attribution cannot give a lesson, or None if it can."""
    if attribution is None:
        return "no attribution"
    if attribution.status != AttributionStatus.ok:
        return f"attribution status is {attribution.status.value}"
    if attribution.agent is None and attribution.step is None:
        return "attribution names neither an agent nor a step"
    if attribution.step is not None and not 0 <= attribution.step < len(trace.steps):
        return f"attribution step {attribution.step} is outside the trace's {len(trace.steps)} steps"
    return None


def _blamed(trace: Trace, attribution: Attribution) -> tuple[str, Step | None]:
    step = trace.steps[attribution.step] if attribution.step is not None else None
    agent = attribution.agent or (step.agent if step is not None else None)
    assert agent is not None
    return agent, step


def situation_text(trace: Trace, agent: str, step: Step | None) -> str:
    """When a lesson applies: the kind of task (its text) and the kind of step."""
    # Kept short on purpose: retrieval compares this text with the next task's
    # text, and every word that is not about the task dilutes the match.
    where = ""
    if step is not None:
        where = f", {step.kind.value.replace('_', ' ')} step" + (f" with {step.tool_name}" if step.tool_name else "")
    return f"{agent}{where}: tasks like \"{one_line(trace.task.query, 300)}\""


class OfflineReflector:
    """A lesson from the failure mode's definition and the blamed step, with no model."""

    method = "offline"

    def reflect(self, trace: Trace, attribution: Attribution | None) -> Reflection:
        why_not = _usable(attribution, trace)
        if why_not:
            return Reflection(status="skipped", method=self.method, error=why_not)
        assert attribution is not None
        agent, step = _blamed(trace, attribution)
        mode = get_mode(attribution.mode) if is_mode(attribution.mode) else None
        did = f"At step {step.index} you {_step_action(step)}." if step is not None else ""
        # The concrete slip, when the trace shows it (a failed lookup left out, a call that failed), gives the
        # lesson; the mode's generic advice is the fallback.
        found = evidence(trace, step.index) if step is not None else []
        if found and mode is not None:
            mistake = f"{did} {found[0].text}. That was {mode.code} {mode.name}: {mode.definition}"
        elif found:
            mistake = f"{did} {found[0].text}."
        elif mode is not None:
            mistake = f"{did} That was {mode.code} {mode.name}: {mode.definition}".strip()
        else:
            mistake = f"{did} This was the decisive error of a failed run.".strip()
        if attribution.reason and not found:
            mistake += f" ({one_line(attribution.reason, 200)})"
        advice = found[0].advice if found else ADVICE.get(mode.code, GENERIC_ADVICE) if mode is not None else GENERIC_ADVICE
        lesson = Lesson(
            agent=agent,
            mode=mode.code if mode is not None else None,
            situation=situation_text(trace, agent, step),
            mistake=mistake,
            advice=advice,
            trace_id=trace.id,
            step=step.index if step is not None else None,
            attribution_id=attribution.id,
            method=self.method,
        )
        return Reflection(status="ok", method=self.method, lessons=[lesson])


_NUMBER = re.compile(r"^-?\d[\d,]*(\.\d+)?$")


def guess_mode_from_outcome(trace: Trace) -> str | None:
    """The failure mode a reader of the final answer alone would guess (no steps, no attribution).

    No final answer, or "unknown": A.5 (stopped early). A numeric reference and
    an answer that is not a bare number: A.4 (format). A wrong number: R.3.
    Otherwise (a wrong non-numeric answer, or no reference to compare): None.
    """
    finals = [s for s in trace.steps if s.kind.value == "final_answer"]
    answer = finals[-1].content if finals else ""
    answer = answer.split("Answer:", 1)[-1].strip() if "Answer:" in answer else answer.strip()
    if not answer or answer.lower() in ("unknown", "none", "n/a"):
        return "A.5"
    reference = (trace.task.reference_answer or "").strip()
    if reference and _NUMBER.match(reference):
        return "R.3" if _NUMBER.match(answer) else "A.4"
    return None


class TerminalReflector:
    """Reflexion-style baseline: a lesson from the task and the final outcome alone, for every agent.

    It reads the task, the final answer and the outcome; no intermediate step
    and no attribution. So it cannot say who erred: the lesson is addressed to
    `ALL_AGENTS`, with the mode guessed from the final answer
    (`guess_mode_from_outcome`).
    """

    method = "terminal"

    def reflect(self, trace: Trace, attribution: Attribution | None = None) -> Reflection:
        if trace.outcome is None or trace.outcome.success:
            return Reflection(status="skipped", method=self.method, error="the run did not fail")
        detail = f" ({one_line(trace.outcome.detail, 200)})" if trace.outcome.detail else ""
        code = guess_mode_from_outcome(trace)
        mode = get_mode(code) if code else None
        lesson = Lesson(
            agent=ALL_AGENTS,
            mode=code,
            situation=f"any agent: tasks like \"{one_line(trace.task.query, 300)}\"",
            mistake=f"A run on a task like this ended with a wrong result{detail}."
            + (f" It looks like {mode.code} {mode.name}: {mode.definition}" if mode else ""),
            advice=ADVICE[code] if code else "Check each result you produce or receive against the task and its sources before passing it on.",
            trace_id=trace.id,
            attribution_id=attribution.id if attribution is not None else None,
            method=self.method,
        )
        return Reflection(status="ok", method=self.method, lessons=[lesson])


REFLECTION_PROMPT = """You are reviewing a failed run of an agent system. An attribution method found the decisive error:
agent {agent} at step {step}, failure mode {mode}.
Failure mode definition: {definition}
Attribution reason: {reason}

Task: {task}
Outcome: {outcome}

Steps around the decisive error:
{steps}

Write one lesson for agent {agent}, so that next time, on a similar task, it avoids this error.
Answer with a single JSON object and nothing else:
{{"situation": "when the lesson applies (the kind of task and step, not this task's specific values)",
  "mistake": "what went wrong at the decisive step",
  "advice": "what to do instead, as an instruction to the agent"}}"""


def _render_steps(trace: Trace, center: int | None, radius: int = 3) -> str:
    if not trace.steps:
        return "(no steps)"
    lo, hi = (0, len(trace.steps)) if center is None else (max(0, center - radius), min(len(trace.steps), center + radius + 1))
    lines = []
    for step in trace.steps[lo:hi]:
        mark = ">>" if step.index == center else "  "
        lines.append(f"{mark} [{step.index}] {step.agent} ({step.kind.value}): {_step_action(step)}")
    return "\n".join(lines)


_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


def parse_lesson_json(text: str) -> dict[str, str] | None:
    """The {situation, mistake, advice} object in a model's answer, or None if there is none.

    Accepts a bare object or one inside a Markdown code fence; every field must
    be a non-empty string.
    """
    match = _JSON_OBJECT.search(text or "")
    if not match:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    fields = {}
    for name in ("situation", "mistake", "advice"):
        value = data.get(name)
        if not isinstance(value, str) or not value.strip():
            return None
        fields[name] = value.strip()
    return fields


class LLMReflector:
    """A lesson written by a model through litellm, as structured JSON.

    `completion_kwargs` go to `litellm.completion` as they are (e.g. `api_base`,
    `temperature`, or `mock_response` in tests).
    """

    def __init__(self, model: str, *, num_retries: int = 2, timeout: float = 60.0, **completion_kwargs: Any):
        self.model = model
        self.method = f"llm:{model}"
        self.num_retries = num_retries
        self.timeout = timeout
        self.completion_kwargs = completion_kwargs

    def messages(self, trace: Trace, attribution: Attribution) -> list[dict[str, str]]:
        agent, step = _blamed(trace, attribution)
        mode = get_mode(attribution.mode) if is_mode(attribution.mode) else None
        outcome = trace.outcome
        prompt = REFLECTION_PROMPT.format(
            agent=agent,
            step=attribution.step if attribution.step is not None else "unknown",
            mode=f"{mode.code} {mode.name}" if mode else "unknown",
            definition=mode.definition if mode else "(no mode given)",
            reason=attribution.reason or "(none given)",
            task=one_line(trace.task.query, 1000),
            outcome=("failed" + (f": {one_line(outcome.detail, 300)}" if outcome and outcome.detail else "")) if outcome else "unknown",
            steps=_render_steps(trace, attribution.step),
        )
        return [{"role": "user", "content": prompt}]

    def reflect(self, trace: Trace, attribution: Attribution | None) -> Reflection:
        import litellm

        why_not = _usable(attribution, trace)
        if why_not:
            return Reflection(status="skipped", method=self.method, error=why_not)
        assert attribution is not None
        agent, step = _blamed(trace, attribution)
        started = time.perf_counter()
        try:
            response = litellm.completion(
                model=self.model,
                messages=self.messages(trace, attribution),
                response_format={"type": "json_object"},
                # Providers without JSON mode get the plain prompt (which asks for JSON) instead of an error.
                drop_params=True,
                num_retries=self.num_retries,
                timeout=self.timeout,
                **self.completion_kwargs,
            )
        except Exception as exc:  # any provider error: reported, never turned into a lesson
            return Reflection(status="error", method=self.method, error=f"{type(exc).__name__}: {exc}",
                              cost=Cost(calls=1, seconds=time.perf_counter() - started))
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        cost = Cost(
            calls=1,
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            usd=float((getattr(response, "_hidden_params", None) or {}).get("response_cost") or 0.0),
            seconds=time.perf_counter() - started,
        )
        fields = parse_lesson_json(text)
        if fields is None:
            return Reflection(status="unparsed", method=self.method, raw=[text], cost=cost,
                              error="the answer is not a JSON object with non-empty situation, mistake and advice")
        lesson = Lesson(
            agent=agent,
            mode=get_mode(attribution.mode).code if is_mode(attribution.mode) else None,
            situation=f"{fields['situation']} (tasks like \"{one_line(trace.task.query, 200)}\")",
            mistake=fields["mistake"],
            advice=fields["advice"],
            trace_id=trace.id,
            step=step.index if step is not None else None,
            attribution_id=attribution.id,
            method=self.method,
        )
        return Reflection(status="ok", method=self.method, lessons=[lesson], raw=[text], cost=cost)


def get_reflector(spec: str | None = None, **options: Any) -> Reflector:
    """A reflector by name: ``offline`` (default), ``terminal``, or a litellm model name (LLM reflection)."""
    if spec in (None, "", "offline"):
        return OfflineReflector()
    if spec == "terminal":
        return TerminalReflector()
    model = spec[4:] if spec.startswith("llm:") else spec
    return LLMReflector(model, **options)
