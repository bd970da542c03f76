"""`binary_search`: halve the candidate range until one step is left, then ask
for that step's failure mode: ceil(log2 T) + 1 calls for T steps.

Each question shows the run up to the end of the current range (earlier steps
shortened or omitted if the context requires), so the model judges a step in
the light of what came before it.
"""

from __future__ import annotations

from typing import Any

from faultlens.middleware.model.trace import Trace

from .. import prompt_text, prompts
from ..registry import register
from .llm_base import LLMAttributor, Attempt, confidence_of, candidates_ranking


class BinarySearch(LLMAttributor):
    name = "binary_search"
    method_key = "binary_search"

    async def locate(self, trace: Trace, run: Attempt) -> dict[str, Any]:
        lo, hi = 0, len(trace.steps) - 1
        budget = self.trace_budget()
        path = run.details.setdefault("path", [])
        while lo < hi:
            mid = (lo + hi) // 2
            shown = trace.steps[: hi + 1]
            text = prompt_text.render_prefix(shown, budget, focus=lo, vision=self.vision)
            choice = await self.ask(run, self.messages(trace, text, prompts.half_question(lo, mid, hi), shown[lo:]), prompts.HalfChoice)
            path.append({"range": [lo, hi], "half": choice.half})
            lo, hi = (lo, mid) if choice.half == "first" else (mid + 1, hi)
        step = trace.steps[lo]
        shown = trace.steps[: lo + 1]
        text = prompt_text.render_prefix(shown, budget, focus=lo, vision=self.vision)
        diagnosis = await self.ask(run, self.messages(trace, text, prompts.diagnosis_question(lo, step.agent), [step]), prompts.diagnosis_model())
        mode = self.check_mode(diagnosis.mode)
        return {
            "agent": step.agent,
            "step": lo,
            "mode": mode,
            "reason": diagnosis.reason,
            "confidence": confidence_of(diagnosis.confidence, run),
            "ranking": candidates_ranking(trace, [(lo, 1.0, diagnosis.reason)]),
        }


register("binary_search", BinarySearch)
