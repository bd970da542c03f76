"""The PydanticAI team of `chart_desk`: the lead, and the chart reader and calculator agents it uses as tools.

Imported only once PydanticAI is known to be installed (`env.ChartDesk.program`). No `from __future__ import
annotations` here: PydanticAI reads the tools' type hints (`RunContext`) at decoration time.

The agents are built once per process (`team`): building one makes pydantic build its tools' JSON schemas,
which would otherwise cost more than the run. What a run needs (the task, the models on its endpoint, the
system prompts with their lessons, where the tools' returns go) comes in as the run's `deps`, `Desk`.
"""

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, BinaryContent, RunContext, ToolReturn
from pydantic_ai.usage import UsageLimits

from faultlens.middleware.model.trace import Media, Task

from ..arithmetic import calculate
from .world import view as chart_view

# Bounds on every sub-agent run, so an injected error ends (fails) in a few requests instead of looping.
HELPER_REQUESTS = 5


class ChartAnswer(BaseModel):
    """The lead's structured output (PydanticAI's output tool `final_result`)."""

    answer: str
    reasoning: str


@dataclass
class Desk:
    """A run's dependencies: its task, a model per agent, the agents' system prompts, and the function tools'
    returns by tool call id (text and the image shown: the steps of the tool results)."""

    task: Task
    models: dict[str, Any]
    system: Callable[[str], str]
    outputs: dict[str, tuple[str, Media | None]] = field(default_factory=dict)


def _instructions(name: str) -> Callable[[RunContext[Desk]], str]:
    def instructions(ctx: RunContext[Desk]) -> str:
        return ctx.deps.system(name)

    return instructions


@lru_cache(maxsize=1)
def team() -> Agent:
    """The lead agent, with the chart reader and the calculator behind its tools."""
    reader = Agent(None, deps_type=Desk, name="chart_reader")
    calculator = Agent(None, deps_type=Desk, name="calculator")
    lead = Agent(None, deps_type=Desk, name="lead", output_type=ChartAnswer)
    for agent in (reader, calculator, lead):
        agent.instructions(_instructions(str(agent.name)))

    @reader.tool
    async def view_chart(ctx: RunContext[Desk], view: str) -> Any:
        """Show the chart: 'full' for the whole chart, or an x label to zoom on it."""
        text, media = chart_view(ctx.deps.task, view)
        ctx.deps.outputs[str(ctx.tool_call_id)] = (text, media)
        if media is None:
            return text
        return ToolReturn(return_value=text, content=[BinaryContent(data=base64.b64decode(media.data or ""), media_type="image/png")])

    @calculator.tool
    async def evaluate(ctx: RunContext[Desk], expression: str) -> str:
        """Evaluate an arithmetic expression (numbers and + - * /)."""
        value = calculate(expression, ctx.deps.task)
        ctx.deps.outputs[str(ctx.tool_call_id)] = (value, None)
        return value

    @lead.tool
    async def ask_chart_reader(ctx: RunContext[Desk], instruction: str) -> str:
        """Ask the chart reader, who can see the chart, to read values ('read A, B', 'read every bar', 'zoom on A and read it again')."""
        result = await reader.run(instruction, deps=ctx.deps, model=ctx.deps.models["chart_reader"], conversation_id=ctx.conversation_id,
                                  usage_limits=UsageLimits(request_limit=HELPER_REQUESTS))
        return str(result.output)

    @lead.tool
    async def ask_calculator(ctx: RunContext[Desk], expression: str) -> str:
        """Ask the calculator to evaluate an arithmetic expression."""
        result = await calculator.run(f"Evaluate: {expression}", deps=ctx.deps, model=ctx.deps.models["calculator"],
                                      conversation_id=ctx.conversation_id,
                                      usage_limits=UsageLimits(request_limit=HELPER_REQUESTS))
        return str(result.output)

    return lead  # type: ignore[return-value]
