"""`hybrid`: all-at-once names the agent, then step-by-step walks only that
agent's steps to find its first decisive one.

If step-by-step calls none of the agent's steps decisive, the all-at-once
step is kept and `details["kept_all_at_once_step"]` says so.
"""

from __future__ import annotations

from typing import Any

from faultlens.middleware.model.trace import Trace

from .. import prompts
from ..registry import register
from .all_at_once import AllAtOnce
from .llm_base import Attempt, candidates_ranking
from .step_by_step import StepByStep


class Hybrid(AllAtOnce, StepByStep):
    name = "hybrid"
    method_key = "hybrid"

    async def locate(self, trace: Trace, run: Attempt) -> dict[str, Any]:
        first = await self.whole_trace(trace, run)
        run.details["all_at_once"] = {"agent": first["agent"], "step": first["step"], "mode": first["mode"]}
        agent_steps = [s for s in trace.steps if s.agent == first["agent"]]
        found = await self.first_decisive(trace, run, agent_steps)
        if found is None:
            run.details["kept_all_at_once_step"] = True
            return first
        found["ranking"] = candidates_ranking(
            trace, [(found["step"], 1.0, found["reason"]), (first["step"], 0.5, first["reason"])]
        )
        return found

    def system(self) -> str:
        # Phase one asks about the whole trace, phase two about single steps.
        return prompts.system_prompt("hybrid", self.context)


register("hybrid", Hybrid)
