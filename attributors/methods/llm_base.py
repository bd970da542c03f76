"""What every LLM attribution method shares: options, the client, the prompt
frame, checking answers against the trace, and building the `Attribution`.

An answer is accepted only if it names a step inside the range that was asked
about, an agent of the trace and a failure mode of the taxonomy. Anything else
makes the attribution `unparsed`, with the raw answers kept; nothing is
guessed or repaired.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Candidate, Cost, Step, Trace
from faultlens.middleware.model.taxonomy import MODES, is_mode

from .. import prompt_text, prompts
from ..base import BaseAttributor
from ..llm import BudgetExceeded, LLMClient, LLMError, Reply, default_model

_CODE = re.compile(r"^\s*([A-Za-z]{1,2}\.\d+)\b")
_NAMES = {m.name.lower(): m.code for m in MODES}


def normalize_mode(value: str | None) -> str | None:
    """A taxonomy code from an answer: 'R.3', 'r.3', 'R.3 numerical error' or the exact mode name; else None."""
    if value is None:
        return None
    text = value.strip()
    if is_mode(text):
        return text.upper()
    match = _CODE.match(text)
    if match and is_mode(match.group(1)):
        return match.group(1).upper()
    return _NAMES.get(text.lower())


def agent_in_trace(value: str | None, trace: Trace) -> str | None:
    """The trace's own spelling of an agent name (exact, or differing only in case/spaces); else None."""
    if value is None:
        return None
    names = trace.agent_names
    if value in names:
        return value
    folded = {n.strip().lower(): n for n in names}
    return folded.get(value.strip().lower())


class Unparsed(FaultlensError):
    """An answer that was read but does not make a valid attribution."""


@dataclass
class Attempt:
    """One attribution in progress: the replies so far and what they cost."""

    trace: Trace
    cost: Cost = field(default_factory=Cost)
    raw: list[str] = field(default_factory=list)
    cached: int = 0
    structured: set[str] = field(default_factory=set)
    details: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def add(self, reply: Reply) -> None:
        self.cost = self.cost + Cost(calls=reply.cost.calls, input_tokens=reply.cost.input_tokens, output_tokens=reply.cost.output_tokens, usd=reply.cost.usd)
        self.raw.append(reply.text)
        self.cached += int(reply.cached)
        self.structured.add(reply.structured)


class LLMAttributor(BaseAttributor):
    """Base of the LLM methods. Options (all keyword):

    model: any litellm model string; default $FAULTLENS_MODEL, else the local
        SmolLM2 model if faultlens[local] is installed.
    api_base: URL of an OpenAI-compatible server (with model "openai/NAME").
    with_reference: show the task's reference answer (the "with ground truth" setting).
    budget_usd, max_calls: budget for everything this attributor calls.
    cache, cache_dir: the on-disk response cache (default .faultlens/cache).
    context_tokens: override the model's input budget (tokens).
    structured: how the answer schema is sent (auto, schema, json_object for
        llama.cpp servers, text); see `attributors.llm.LLMClient`.
    concurrency, max_tokens, temperature, timeout, max_retries, retry_wait,
    api_key: passed to the LLM client; other keywords go to litellm as is.
    """

    name = "llm"
    method_key = "all_at_once"
    uses_model = True  # `attributors.build` passes the model to methods that say so

    def __init__(
        self,
        model: str | None = None,
        api_base: str | None = None,
        with_reference: bool = False,
        budget_usd: float | None = None,
        max_calls: int | None = None,
        cache: bool = True,
        cache_dir: str | None = None,
        context_tokens: int | None = None,
        concurrency: int = 4,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 4,
        retry_wait: float = 1.0,
        structured: str = "auto",
        api_key: str | None = None,
        **litellm_options: Any,
    ):
        model = model or default_model() or _local_default()
        if model.startswith("local/"):
            from ..local import register_local_provider

            register_local_provider()
        self.with_reference = with_reference
        self.client = LLMClient(
            model=model,
            api_base=api_base,
            api_key=api_key,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout=timeout,
            max_retries=max_retries,
            retry_wait=retry_wait,
            concurrency=concurrency,
            structured=structured,
            cache=cache,
            cache_dir=cache_dir,
            budget_usd=budget_usd,
            max_calls=max_calls,
            extra=litellm_options,
        )
        if context_tokens is not None:
            self.context, self.context_note = int(context_tokens), f"context_tokens={context_tokens} given"
        else:
            self.context, self.context_note = self.client.context_tokens()
        self.vision = self.client.supports_vision()
        self.prompt_version = prompts.PROMPT_VERSIONS[self.method_key]

    # -- prompt pieces ---------------------------------------------------
    @property
    def model(self) -> str:
        return self.client.model

    def system(self) -> str:
        return prompts.system_prompt(self.method_key, self.context)

    def trace_budget(self) -> int:
        """Characters available for rendered steps in one prompt."""
        fixed = len(self.system()) + 2500  # task block, question, and the schema when sent as text
        return prompt_text.char_budget(self.context, reserve_tokens=self.client.max_tokens + int(fixed / prompt_text.CHARS_PER_TOKEN))

    def messages(self, trace: Trace, steps_text: str, question: str, shown: list[Step]) -> list[dict[str, Any]]:
        text = f"{prompt_text.task_text(trace, self.with_reference, self.vision)}\n\nRUN:\n{steps_text}\n\nQUESTION: {question}"
        return [
            {"role": "system", "content": self.system()},
            {"role": "user", "content": prompt_text.user_content(text, trace, shown, self.vision)},
        ]

    async def ask(self, run: Attempt, messages: list[dict[str, Any]], answer_model: type) -> Any:
        """One call; the parsed answer, or Unparsed with the parser's complaint."""
        reply = await self.client.acall(messages, answer_model)
        run.add(reply)
        if reply.answer is None:
            raise Unparsed(f"answer {len(run.raw)} could not be read: {reply.parse_error}")
        return reply.answer

    # -- checking answers ------------------------------------------------
    @staticmethod
    def check_step(step: int, allowed: range | list[int]) -> int:
        if step not in allowed:
            shown = f"{allowed.start}..{allowed.stop - 1}" if isinstance(allowed, range) else ", ".join(map(str, allowed))
            raise Unparsed(f"step {step} is outside the steps asked about ({shown})")
        return step

    @staticmethod
    def check_mode(value: str | None) -> str:
        mode = normalize_mode(value)
        if mode is None:
            raise Unparsed(f"unknown failure mode {value!r}")
        return mode

    @staticmethod
    def check_agent(value: str | None, trace: Trace) -> str:
        agent = agent_in_trace(value, trace)
        if agent is None:
            raise Unparsed(f"unknown agent {value!r}; the trace's agents are {', '.join(trace.agent_names)}")
        return agent

    # -- the attribution -------------------------------------------------
    def result(self, run: Attempt, status: AttributionStatus, **fields: Any) -> Attribution:
        details = dict(run.details)
        details.update(
            context_tokens=self.context,
            context_source=self.context_note,
            vision=self.vision,
            structured_output=sorted(run.structured),
            cached_calls=run.cached,
            with_reference=self.with_reference,
        )
        if self.client.cost_notes:
            details["cost_notes"] = list(self.client.cost_notes)
        cost = run.cost.model_copy(update={"seconds": round(time.monotonic() - run.started, 3)})
        return Attribution(
            trace_id=run.trace.id,
            method=self.name,
            status=status,
            cost=cost,
            model=self.model,
            backend=self.client.backend,
            prompt_version=self.prompt_version,
            raw=run.raw,
            details=details,
            **fields,
        )

    def verdict_fields(self, trace: Trace, verdict: prompts.Verdict, allowed: range | list[int], run: Attempt) -> dict[str, Any]:
        """Who/when/why from a Verdict, checked against the trace."""
        step = self.check_step(verdict.step, allowed)
        agent = self.check_agent(verdict.agent, trace)
        mode = self.check_mode(verdict.mode)
        if trace.steps[step].agent != agent:
            # Both are reported as given; the mismatch is recorded, not resolved by guessing.
            run.details["agent_step_mismatch"] = f"answer names agent {agent} but step {step} is by {trace.steps[step].agent}"
        return {"agent": agent, "step": step, "mode": mode, "reason": verdict.reason, "confidence": confidence_of(verdict.confidence, run)}

    async def aattribute(self, trace: Trace) -> Attribution:
        run = Attempt(trace)
        if not trace.steps:
            return self.result(run, AttributionStatus.error, error="the trace has no steps to attribute")
        try:
            fields = await self.locate(trace, run)
        except Unparsed as exc:
            return self.result(run, AttributionStatus.unparsed, error=str(exc))
        except BudgetExceeded as exc:
            return self.result(run, AttributionStatus.error, error=f"stopped: {exc}")
        except LLMError as exc:
            return self.result(run, AttributionStatus.error, error=str(exc))
        return self.result(run, AttributionStatus.ok, **fields)

    async def locate(self, trace: Trace, run: Attempt) -> dict[str, Any]:
        """Return the Attribution fields (agent, step, mode, reason, ...); raise Unparsed if the answers do not make one."""
        raise NotImplementedError


def confidence_of(value: float | None, run: Attempt) -> float | None:
    if value is None:
        return None
    if 0.0 <= value <= 1.0:
        return float(value)
    run.details["confidence_out_of_range"] = value
    return None


def _local_default() -> str:
    from ..local import LOCAL_MODEL, local_available

    if local_available():
        return LOCAL_MODEL
    raise FaultlensError(
        "no model configured: pass model= (any litellm model string, e.g. openai/gpt-4o-mini, or openai/NAME with api_base=URL), "
        "set $FAULTLENS_MODEL, install faultlens[local] for the offline SmolLM2 model, or use the offline method 'heuristic'"
    )


def candidates_ranking(trace: Trace, entries: Sequence[tuple[int, float, str | None]]) -> list[Candidate]:
    """Ranking entries (step, score, reason), best first, one per step."""
    seen: set[int] = set()
    out = []
    for step, score, reason in sorted(entries, key=lambda e: -e[1]):
        if step in seen or not 0 <= step < len(trace.steps):
            continue
        seen.add(step)
        out.append(Candidate(step=step, score=round(score, 4), agent=trace.steps[step].agent, reason=reason))
    return out
