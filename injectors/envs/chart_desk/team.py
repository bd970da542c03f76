"""The PydanticAI team of `chart_desk`: the lead, and the chart reader and calculator agents it uses as tools.

Imported only once PydanticAI is known to be installed (`env.ChartDesk.program`). No `from __future__ import
annotations` here: PydanticAI reads the tools' type hints (`RunContext`) at decoration time.
"""

import base64
from collections.abc import Callable
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


def build(task: Task, model: Callable[[str], Any], system: Callable[[str], str],
          outputs: dict[str, tuple[str, Media | None]]) -> Agent:
    """The lead agent, with the chart reader and the calculator behind its tools; `outputs` collects what the
    function tools returned, by tool call id (the steps of the tool results)."""
    reader = Agent(model("chart_reader"), instructions=system("chart_reader"), name="chart_reader")
    calculator = Agent(model("calculator"), instructions=system("calculator"), name="calculator")
    lead = Agent(model("lead"), instructions=system("lead"), name="lead", output_type=ChartAnswer)

    @reader.tool
    def view_chart(ctx: RunContext[None], view: str) -> Any:
        """Show the chart: 'full' for the whole chart, or an x label to zoom on it."""
        text, media = chart_view(task, view)
        outputs[str(ctx.tool_call_id)] = (text, media)
        if media is None:
            return text
        return ToolReturn(return_value=text, content=[BinaryContent(data=base64.b64decode(media.data or ""), media_type="image/png")])

    @calculator.tool
    def evaluate(ctx: RunContext[None], expression: str) -> str:
        """Evaluate an arithmetic expression (numbers and + - * /)."""
        value = calculate(expression, task)
        outputs[str(ctx.tool_call_id)] = (value, None)
        return value

    @lead.tool
    async def ask_chart_reader(ctx: RunContext[None], instruction: str) -> str:
        """Ask the chart reader, who can see the chart, to read values ('read A, B', 'read every bar', 'zoom on A and read it again')."""
        result = await reader.run(instruction, usage_limits=UsageLimits(request_limit=HELPER_REQUESTS))
        return str(result.output)

    @lead.tool
    async def ask_calculator(ctx: RunContext[None], expression: str) -> str:
        """Ask the calculator to evaluate an arithmetic expression."""
        result = await calculator.run(f"Evaluate: {expression}", usage_limits=UsageLimits(request_limit=HELPER_REQUESTS))
        return str(result.output)

    return lead
