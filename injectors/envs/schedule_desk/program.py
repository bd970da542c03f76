"""The DSPy program of `schedule_desk` (imported only with DSPy): a `Solver` module around DSPy's `ReAct`.

A DSPy program is a `dspy.Module` subclass whose `forward` composes DSPy's
modules; its class name is the only name a DSPy agent has (OpenInference
traces it as a `Solver.forward` span, which the dspy span adapter reads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dspy


class Solver(dspy.Module):
    """The scheduling solver: `ReAct` over `question -> answer` with the task's tools."""

    def __init__(self, instructions: str, tools: list[Callable[..., str]], max_iters: int) -> None:
        super().__init__()
        self.react = dspy.ReAct(dspy.Signature("question -> answer", instructions), tools=tools, max_iters=max_iters)

    def forward(self, question: str) -> Any:
        return self.react(question=question)
