"""Shared fixtures for the benchmark tests: fixture paths, a synthetic native
dataset with gold labels, and attributor test doubles (clearly named as such)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from faultlens.middleware.jsonl import write_jsonl
from faultlens.middleware.model.trace import Attribution, Cost, GoldLabel, Outcome, Source, Step, StepKind, Task, Trace

FIXTURES = Path(__file__).parent / "fixtures"
MODES = ["R.2", "A.1", "A.2", "V.2", "C.2"]
ENVS = ["qa-team", "csv-code"]


def synthetic_traces(n: int = 24, seed: int = 7) -> list[Trace]:
    """Failed traces of varied length, environment and modality, with gold labels."""
    rng = random.Random(seed)
    traces = []
    for i in range(n):
        env = ENVS[i % 2]
        agents = ["planner", "searcher", "verifier", "answerer"] if env == "qa-team" else ["coder"]
        length = rng.choice([4, 8, 15, 30, 60])
        steps = [Step(index=j, agent=agents[j % len(agents)], kind=StepKind.message, content=f"step {j} of trace {i}",
                      native_id=str(j)) for j in range(length)]
        gold_step = rng.randrange(length)
        traces.append(Trace(
            id=f"syn-{i:03d}",
            task=Task(query=f"question {i}", reference_answer=f"answer {i}"),
            steps=steps,
            outcome=Outcome(success=False),
            source=Source(framework="python", benchmark=env, modality="image" if i % 3 == 0 else "text", subset="test"),
            gold=GoldLabel(step=gold_step, agent=steps[gold_step].agent if len(agents) > 1 else None,
                           mode=MODES[i % len(MODES)], native_step=str(gold_step)),
        ))
    return traces


@pytest.fixture
def synthetic_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "synthetic.jsonl"
    write_jsonl(synthetic_traces(), path)
    return path


class CountingTestDouble:
    """Attributor test double: a deterministic guess per trace, counting every call.

    It answers the middle step, that step's agent and a mode chosen from the
    trace length, and charges a fixed cost, so reports are reproducible. With
    `interrupt_after=N` the (N+1)-th call raises KeyboardInterrupt, as Ctrl-C would.
    """

    name = "test-double:counting"

    def __init__(self, interrupt_after: int | None = None, usd: float = 0.01, fail_ids: set[str] = frozenset(),
                 raise_at_call: tuple[int, BaseException] | None = None, expect_reference: bool = False):
        self.calls: list[str] = []
        self.interrupt_after = interrupt_after
        self.usd = usd
        self.fail_ids = fail_ids
        self.raise_at_call = raise_at_call
        self.expect_reference = expect_reference

    def _answer(self, trace: Trace) -> Attribution:
        # The runner must hide the gold label, and the reference answer unless asked.
        assert trace.gold is None
        assert (trace.task.reference_answer is not None) == self.expect_reference
        step = len(trace.steps) // 2
        return Attribution(trace_id=trace.id, method=self.name, agent=trace.steps[step].agent, step=step,
                           mode=MODES[len(trace.steps) % len(MODES)], reason="middle step",
                           cost=Cost(calls=1, input_tokens=100, output_tokens=10, usd=self.usd, seconds=0.001),
                           backend="test-double")

    async def aattribute(self, trace: Trace) -> Attribution:
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        if self.raise_at_call and len(self.calls) + 1 == self.raise_at_call[0]:
            self.calls.append(trace.id)
            raise self.raise_at_call[1]
        self.calls.append(trace.id)
        await asyncio.sleep(0)  # let other workers interleave, as real I/O would
        if trace.id in self.fail_ids:
            raise RuntimeError("model endpoint returned 500")
        return self._answer(trace)

    def attribute(self, trace: Trace) -> Attribution:
        return asyncio.run(self.aattribute(trace))


class FirstStepTestDouble:
    """Baseline test double: always blames step 0 and its agent."""

    name = "baseline:first-step-double"

    def attribute(self, trace: Trace) -> Attribution:
        return Attribution(trace_id=trace.id, method=self.name, agent=trace.steps[0].agent, step=0, backend="test-double")

    async def aattribute(self, trace: Trace) -> Attribution:
        return self.attribute(trace)
