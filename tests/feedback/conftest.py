"""Fixtures for the feedback tests: a store and small traces of a two-agent team."""

from __future__ import annotations

import pytest

from faultlens.middleware.model.trace import AgentInfo, Attribution, Outcome, Step, StepKind, Task, Trace
from faultlens.middleware.store import open_store

SIMILAR_TASK = "How much larger was the revenue of Brisk Corp than that of Quell Ltd in 2021?"
ORIGINAL_TASK = "How much larger was the revenue of Valfos Corp than that of Merquo Works in 2019?"
DISSIMILAR_TASK = "Write a haiku about autumn leaves falling on a quiet pond."


def failed_trace(query: str = ORIGINAL_TASK) -> Trace:
    return Trace(
        task=Task(query=query, reference_answer="38"),
        agents=[AgentInfo(name="researcher", role="researcher"), AgentInfo(name="analyst", role="analyst")],
        steps=[
            Step(index=0, agent="researcher", kind=StepKind.tool_call, content="Action: lookup\nValfos Corp | revenue | 2019",
                 tool_name="lookup", tool_arguments={"query": "Valfos Corp | revenue | 2019"}),
            Step(index=1, agent="researcher", kind=StepKind.message, content="Findings: Valfos 412, Merquo 374"),
            Step(index=2, agent="analyst", kind=StepKind.message, content="Calculation: 412 - 374 = 48"),
            Step(index=3, agent="analyst", kind=StepKind.final_answer, content="Answer: 48"),
        ],
        outcome=Outcome(success=False, detail="expected 38, got '48'"),
    )


def blame_analyst(trace: Trace) -> Attribution:
    return Attribution(trace_id=trace.id, method="test", agent="analyst", step=2, mode="R.3", reason="412 - 374 is 38")


@pytest.fixture
def store():
    return open_store(":memory:")
