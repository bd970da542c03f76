"""`all_at_once`: one call over the whole trace names agent, step and mode.

A trace too long for the model's context is split into overlapping windows;
each window gets the same question restricted to its steps, and a final call
picks among the windows' answers (their steps shown with context).
"""

from __future__ import annotations

import asyncio
from typing import Any

from faultlens.middleware.model.trace import Trace

from .. import prompt_text, prompts
from ..registry import register
from .llm_base import LLMAttributor, Attempt, Unparsed, candidates_ranking

CONTEXT_AROUND_CANDIDATE = 2  # steps shown before and after each candidate in the final pick


class AllAtOnce(LLMAttributor):
    name = "all_at_once"
    method_key = "all_at_once"

    async def locate(self, trace: Trace, run: Attempt) -> dict[str, Any]:
        return await self.whole_trace(trace, run)

    async def whole_trace(self, trace: Trace, run: Attempt) -> dict[str, Any]:
        budget = self.trace_budget()
        fitted = prompt_text.fit_steps(trace.steps, budget, self.vision)
        total = len(trace.steps)
        if fitted is not None:
            text, limit = fitted
            run.details["step_char_limit"] = limit
            messages = self.messages(trace, text, prompts.whole_trace_question(0, total - 1, total), trace.steps)
            verdict = await self.ask(run, messages, prompts.verdict_model(trace.agent_names, range(total)))
            fields = self.verdict_fields(trace, verdict, range(total), run)
            fields["ranking"] = candidates_ranking(trace, [(fields["step"], fields["confidence"] or 1.0, verdict.reason)])
            return fields
        return await self.windowed(trace, run, budget)

    async def windowed(self, trace: Trace, run: Attempt, budget: int) -> dict[str, Any]:
        total = len(trace.steps)
        size, limit = prompt_text.window_plan(trace.steps, budget, self.vision)
        spans = prompt_text.windows(total, size, overlap=max(1, size // 4) if size > 1 else 0)
        run.details["windows"] = [[lo, hi - 1] for lo, hi in spans]
        run.details["step_char_limit"] = limit

        async def one(lo: int, hi: int) -> tuple[tuple[int, int], dict[str, Any] | str]:
            shown = trace.steps[lo:hi]
            text = prompt_text.fit_steps(shown, budget, self.vision)
            body = text[0] if text else prompt_text.render_steps(shown, limit, self.vision)
            messages = self.messages(trace, body, prompts.whole_trace_question(lo, hi - 1, total), shown)
            try:
                verdict = await self.ask(run, messages, prompts.verdict_model(trace.agent_names, range(lo, hi)))
                return (lo, hi), self.verdict_fields(trace, verdict, range(lo, hi), run)
            except Unparsed as exc:
                return (lo, hi), str(exc)

        results = await asyncio.gather(*(one(lo, hi) for lo, hi in spans))
        run.details["window_answers"] = [
            {"window": [lo, hi - 1], **({"step": r["step"], "agent": r["agent"], "mode": r["mode"]} if isinstance(r, dict) else {"unparsed": r})}
            for (lo, hi), r in results
        ]
        winners = [r for _, r in results if isinstance(r, dict)]
        if not winners:
            raise Unparsed("no window's answer could be read")
        steps = sorted({w["step"] for w in winners})
        if len(steps) == 1:
            best = next(w for w in winners if w["step"] == steps[0])
            best["ranking"] = candidates_ranking(trace, [(best["step"], 1.0, best["reason"])])
            return best
        fields, reason = await self.pick(trace, run, steps, budget)
        fields["ranking"] = candidates_ranking(
            trace, [(fields["step"], 1.0, reason)] + [(w["step"], 0.5, w["reason"]) for w in winners]
        )
        return fields

    def pick_text(self, trace: Trace, steps: list[int], budget: int) -> str | None:
        """The candidates with context around them if that fits, else the candidates alone; None if even that does not fit."""
        total = len(trace.steps)
        around = sorted({i for s in steps for i in range(max(0, s - CONTEXT_AROUND_CANDIDATE), min(total, s + CONTEXT_AROUND_CANDIDATE + 1))})
        for shown in (around, steps):
            fitted = prompt_text.fit_steps([trace.steps[i] for i in shown], budget, self.vision)
            if fitted is not None:
                return fitted[0]
        return None

    async def pick(self, trace: Trace, run: Attempt, steps: list[int], budget: int) -> tuple[dict[str, Any], str]:
        """The final call among window winners; too many to show at once are picked in groups, then among the group winners."""
        text = self.pick_text(trace, steps, budget)
        if text is None:
            groups: list[list[int]] = []
            group: list[int] = []
            for step in steps:
                if group and self.pick_text(trace, group + [step], budget) is None:
                    groups.append(group)
                    group = []
                group.append(step)
            groups.append(group)
            run.details.setdefault("pick_groups", []).append(groups)
            winners = []
            for g in groups:
                winners.append((await self.pick(trace, run, g, budget))[0]["step"] if len(g) > 1 else g[0])
            return await self.pick(trace, run, sorted(set(winners)), budget)
        shown = [trace.steps[i] for i in steps]
        run.details["pick_calls"] = run.details.get("pick_calls", 0) + 1
        verdict = await self.ask(run, self.messages(trace, text, prompts.pick_question(steps), shown), prompts.verdict_model(trace.agent_names, steps))
        return self.verdict_fields(trace, verdict, steps, run), verdict.reason


register("all_at_once", AllAtOnce)
