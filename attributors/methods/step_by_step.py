"""`step_by_step`: judge growing prefixes of the trace, stopping at the first
step the model calls decisive. Up to T calls for T steps.

If the model calls no step decisive, the attribution is `unparsed` (the
method answered but named no step): no step is made up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faultlens.middleware.model.trace import Step, Trace

from .. import prompt_text, prompts
from ..registry import register
from .llm_base import LLMAttributor, Attempt, Unparsed, candidates_ranking


class StepByStep(LLMAttributor):
    name = "step_by_step"
    method_key = "step_by_step"

    async def judge(self, trace: Trace, run: Attempt, step: Step) -> prompts.StepJudgement:
        prefix = trace.steps[: step.index + 1]
        text = prompt_text.render_prefix(prefix, self.trace_budget(), focus=step.index, vision=self.vision)
        messages = self.messages(trace, text, prompts.step_question(step.index, step.agent), [step])
        judgement = await self.ask(run, messages, prompts.judgement_model())
        run.details.setdefault("trials", []).append({"step": step.index, "decisive": judgement.decisive, "mode": judgement.mode})
        return judgement

    async def first_decisive(self, trace: Trace, run: Attempt, steps: Sequence[Step]) -> dict[str, Any] | None:
        for step in steps:
            judgement = await self.judge(trace, run, step)
            if judgement.decisive:
                mode = self.check_mode(judgement.mode)
                return {
                    "agent": step.agent,
                    "step": step.index,
                    "mode": mode,
                    "reason": judgement.reason,
                    "ranking": candidates_ranking(trace, [(step.index, 1.0, judgement.reason)]),
                }
        return None

    async def locate(self, trace: Trace, run: Attempt) -> dict[str, Any]:
        found = await self.first_decisive(trace, run, trace.steps)
        if found is None:
            raise Unparsed(f"the model judged none of the {len(trace.steps)} steps to be the decisive error")
        return found


register("step_by_step", StepByStep)
