"""Trivial baselines: the floor every attributor must beat.

- `baseline:random-step`: a uniformly random step (and its agent).
- `baseline:random-agent`: a uniformly random agent among those with steps,
  and a random step of that agent.
- `baseline:majority-agent`: the agent with the most steps (first to appear
  on a tie), and its first step.
- `baseline:first-step`, `baseline:last-step`: step 0 or the last step.

Every baseline chooses among the trace's decision steps (`middleware.model.roles.
candidates`: tool results, executors' output and control steps are not
candidates), as every other offline method does. Random choices are seeded by
`seed` and the trace id, so the same trace always gets the same answer.
Baselines name no failure mode (`mode` is None).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from typing import Any

from faultlens.middleware.model.trace import Attribution, AttributionStatus, Step, Trace
from faultlens.middleware.model.roles import candidates

from ..base import BaseAttributor
from ..registry import register


class Baseline(BaseAttributor):
    name = "baseline"
    rule = ""

    def __init__(self, seed: int = 0, **ignored: Any):
        self.seed = seed
        self.ignored = sorted(ignored)

    def rng(self, trace: Trace) -> random.Random:
        digest = hashlib.sha256(f"{self.seed}:{trace.id}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def pick(self, trace: Trace) -> Step:
        raise NotImplementedError

    def attribute(self, trace: Trace) -> Attribution:
        details: dict[str, Any] = {"rule": self.rule}
        if self.ignored:
            details["ignored_options"] = self.ignored
        if not trace.steps:
            return Attribution(trace_id=trace.id, method=self.name, backend="baseline", status=AttributionStatus.error,
                               error="the trace has no steps to attribute", details=details)
        step = self.pick(trace)
        return Attribution(trace_id=trace.id, method=self.name, backend="baseline", agent=step.agent, step=step.index,
                           reason=self.rule, details=details, prompt_version=None)


class RandomStep(Baseline):
    name = "baseline:random-step"
    rule = "a uniformly random decision step, seeded by the trace id"

    def pick(self, trace: Trace) -> Step:
        steps = candidates(trace)
        return steps[self.rng(trace).randrange(len(steps))]


class RandomAgent(Baseline):
    name = "baseline:random-agent"
    rule = "a uniformly random agent, then a random step of that agent, seeded by the trace id"

    def pick(self, trace: Trace) -> Step:
        rng = self.rng(trace)
        steps = candidates(trace)
        agents = list(dict.fromkeys(s.agent for s in steps))
        agent = agents[rng.randrange(len(agents))]
        own = [s for s in steps if s.agent == agent]
        return own[rng.randrange(len(own))]


class MajorityAgent(Baseline):
    name = "baseline:majority-agent"
    rule = "the agent with the most steps, at its first step"

    def pick(self, trace: Trace) -> Step:
        steps = candidates(trace)
        counts = Counter(s.agent for s in steps)
        order = list(dict.fromkeys(s.agent for s in steps))
        agent = max(order, key=lambda a: (counts[a], -order.index(a)))
        return next(s for s in steps if s.agent == agent)


class FirstStep(Baseline):
    name = "baseline:first-step"
    rule = "the first decision step"

    def pick(self, trace: Trace) -> Step:
        return candidates(trace)[0]


class LastStep(Baseline):
    name = "baseline:last-step"
    rule = "the last decision step"

    def pick(self, trace: Trace) -> Step:
        return candidates(trace)[-1]


for _cls in (RandomStep, RandomAgent, MajorityAgent, FirstStep, LastStep):
    register(_cls.name, _cls)
