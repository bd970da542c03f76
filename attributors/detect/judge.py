"""`faultlens detect --judge MODEL`: an LLM judge, through litellm, that gives a finished run's `p_failed` as the detector does.

    judge = LLMJudge("openai/gpt-4o-mini")
    judge.score_one(trace)         # Detection(trace_id, p_failed) or, for a run with no steps, a reason

The judge reads the run as the detector may (`detector_view`: no reference
answer, gold label, answer key, outcome, source or metadata): the task, the
agents and the numbered steps, fitted to the model's context (the latest steps
kept whole). Media are named in the text, not sent. Its answer is one JSON
object, `{"p_failed": 0.0-1.0, "reason": "..."}`; a reply that is not one is
an error naming the run (`JudgeReplyError`), never a made-up probability.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.text import shorten
from faultlens.middleware.model.trace import Trace

from ..llm import LLMClient
from ..prompt_text import char_budget, media_placeholder, render_prefix
from .features import detector_view
from .model import Detection

RESERVE_TOKENS = 1200  # the instructions and the answer

SYSTEM = """You judge finished runs of AI agents that nobody has checked. The run below has no recorded outcome: no \
reference answer, no evaluator. From the run alone, estimate the probability that it FAILED its task: a wrong or \
unsupported final answer, a task part left out, an error the agents moved past, a value no step gave, a loop, a \
give-up, a handoff that never returned, the requested format not met. A run that plausibly did what was asked is \
likely fine. Reply with one JSON object: {"p_failed": <a number from 0 to 1>, "reason": "<one sentence>"}."""


class JudgeReplyError(FaultlensError):
    """The judge's reply for a run is not a probability (`{"p_failed": 0..1}`)."""


class JudgeAnswer(BaseModel):
    p_failed: float = Field(ge=0.0, le=1.0, description="the probability that the run failed its task")
    reason: str = Field(default="", description="one sentence: why")


def judge_prompt(trace: Trace, budget_chars: int) -> list[dict[str, Any]]:
    """The messages the judge is sent for `trace`, read through `detector_view` (no answer key of any kind)."""
    view = detector_view(trace)
    lines = ["TASK:", shorten(view.task.query, 4000)]
    if view.task.options:
        lines.append("Options: " + "; ".join(view.task.options))
    lines += [media_placeholder(m) for m in view.task.attachments]
    if view.agents:
        lines.append("AGENTS: " + "; ".join(a.name + (f" ({a.role})" if a.role else "") for a in view.agents))
    lines += [f"STEPS ({len(view.steps)}):", render_prefix(view.steps, budget_chars),
              "How likely is it that this run failed its task?"]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


class LLMJudge:
    """Scores finished runs with a model through litellm (`attributors.llm.LLMClient`); the `Detector`'s interface."""

    def __init__(self, model: str, client: LLMClient | None = None, **client_options: Any):
        self.client = client if client is not None else LLMClient(model=model, **client_options)
        self.budget = char_budget(self.client.context_tokens()[0], RESERVE_TOKENS)

    def score(self, traces: Iterable[Trace], progress: Any = None) -> list[Detection]:
        found = []
        for trace in traces:
            found.append(self.score_one(trace))
            if progress is not None:
                progress()
        return found

    def score_one(self, trace: Trace) -> Detection:
        if not trace.steps:
            return Detection(trace_id=trace.id, reason="the run has no steps: nothing to judge")
        reply = self.client.call(judge_prompt(trace, self.budget), JudgeAnswer)
        answer = reply.answer
        if not isinstance(answer, JudgeAnswer):
            raise JudgeReplyError(f"run {trace.id}: the judge ({self.client.model}) did not give a probability "
                                  f"({reply.parse_error}); its reply: {shorten(reply.text, 300)!r}")
        # (its sentence of reason is not the Detection's `reason`, which says why a run has no p_failed)
        return Detection(trace_id=trace.id, p_failed=round(answer.p_failed, 4))
