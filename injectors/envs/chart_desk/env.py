"""`chart_desk` (image): a PydanticAI chart desk (a lead agent using a chart-reading agent and a calculator agent as tools).

The team is PydanticAI (`pydantic-ai-slim[openai]`, the `frameworks` extra)
running unchanged, with agents as tools (PydanticAI's agent delegation):

- **lead** (`Agent` with `output_type=ChartAnswer`, PydanticAI's output tool
  `final_result`) plans, asks the chart reader for readings through its tool
  `ask_chart_reader`, checks them against the chart caption and asks for a
  zoomed re-read of a failing one, sends arithmetic to the calculator through
  `ask_calculator`, and returns the structured answer;
- **chart_reader** (`Agent`, text output) looks at the chart with its tool
  `view_chart` (`full`, or one x label to zoom on), which returns a
  `ToolReturn` whose content is the chart as a `BinaryContent` PNG: PydanticAI
  puts the image into the reader's next request as an image part, and the
  reader reads the values from it;
- **calculator** (`Agent`, text output) evaluates an expression with its tool
  `evaluate`.

The charts and questions are `chart_qa`'s kinds (bar and line charts rendered
with matplotlib), drawn under this environment's own seeds (`world`). Each
agent has its own `OpenAIChatModel` over an `AsyncOpenAI` client with a
per-agent base URL `/agent/<slug>/v1` and an `httpx.MockTransport` onto the
in-process endpoint over the run's `replay.Session`; its upstream is
`policy.DeskPolicy`.

Steps: one per model reply (a plan, a tool call, a delegation, a reading, a
result, the final answer), each made by one recorded call, and one
`tool_result` step, with no call, after each `view_chart` or `evaluate` call
that ran (the chart's image is the media of the `view_chart` result and of the
reading made from it). The task succeeds when the `ChartAnswer`'s `answer` is
the reference answer.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from datetime import datetime, timezone
from typing import Any, ClassVar
from unittest import mock

from faultlens.middleware.model.trace import AgentInfo, Media, Outcome, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion, tool_call_of
from ..tool_steps import StepLog
from ..base import Runtime
from ..chart_qa.world import MONTHS, PRODUCTS, REGIONS, SERIES
from ..framework import BASE_URL, FrameworkEnvironment
from .mistakes import MUTATORS
from .policy import DELEGATES, DeskPolicy
from .world import make_task

FRAMEWORK = "pydantic-ai"
SLUGS = {"lead": "lead", "chart_reader": "reader", "calculator": "calculator"}
NAMES = {slug: name for name, slug in SLUGS.items()}
# A bound on the lead's run (the helpers have theirs, `team.HELPER_REQUESTS`), so an injected error ends (fails) in a few requests.
LEAD_REQUESTS = 10

INSTRUCTIONS = {
    "lead": ("You are the lead of a chart desk. You cannot see the chart; the chart reader can. First write a plan "
             "('Plan:' then '- read: <labels, or every bar / every year of SERIES>', '- compute: <LABEL - LABEL | LABEL + "
             "LABEL + ... | the label with the highest value | the label with the lowest value | the first label with a "
             "value above N | LABEL>', '- answer: the result') and ask the chart reader for the readings with "
             "ask_chart_reader. Check every reading against the chart caption the reader passes on (every label on the "
             "chart, every value between 0 and the axis maximum) and ask for a zoomed re-read ('zoom on LABEL and read it "
             "again') of a reading that fails. Send arithmetic to the calculator with ask_calculator. Finish with the "
             "answer (a bare number or a label) and one sentence of reasoning."),
    "chart_reader": ("You are the chart reader of a chart desk. Look at the chart with view_chart ('full', or an x label "
                     "to zoom on it) and report exactly what you were asked to read as one line 'Readings (SERIES): "
                     "LABEL = VALUE, LABEL = VALUE', followed by the caption of the chart you saw."),
    "calculator": ("You are the calculator of a chart desk. Evaluate the expression you are given with the evaluate tool "
                   "and reply 'Result: <value>'."),
}

DESCRIPTIONS = {
    "lead": "Plans, delegates the reading and the arithmetic, checks the readings and gives the answer.",
    "chart_reader": "Looks at the chart image (whole or zoomed on one label) and reads the values it is asked for.",
    "calculator": "Evaluates arithmetic expressions with its tool.",
}

NOT_APPLICABLE = {
    "V.3": "tool results come from the chart and the calculator inside the run (no recorded call to replace), and a "
           "tool error is answered by a retry",
    "A.6": "a repeated tool call or delegation returns the same readings or result, so the answer stays right",
}


@contextlib.contextmanager
def _deterministic() -> Any:
    """PydanticAI's run ids (uuid7), its fallback tool-call ids and its message timestamps, made fixed per run.

    None of them reaches a request today (the simulated models give every tool call an id, and the requests carry no
    timestamps), but the message history holds them; fixed, a run's every object is the same in every process."""
    import pydantic_ai._agent_graph as graph
    import pydantic_ai._utils as utils
    import pydantic_ai.messages as messages
    import pydantic_ai.models.openai as openai_model

    counter = itertools.count()
    epoch = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def uuid7() -> str:
        return f"00000000-0000-7000-8000-{next(counter):012d}"

    def now() -> datetime:
        return epoch

    def call_id() -> str:
        return f"pyd_ai_{next(counter):032d}"

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(graph, "uuid7", uuid7))
        for module in (graph, utils, messages, openai_model):
            if hasattr(module, "now_utc"):
                stack.enter_context(mock.patch.object(module, "now_utc", now))
            if hasattr(module, "_now_utc"):
                stack.enter_context(mock.patch.object(module, "_now_utc", now))
        stack.enter_context(mock.patch.object(utils, "generate_tool_call_id", call_id))
        stack.enter_context(mock.patch.object(messages, "_generate_tool_call_id", call_id))
        yield


@register
class ChartDesk(FrameworkEnvironment):
    name = "chart_desk"
    stands_in_for = "chart QA with tools (ChartQA)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("pydantic_ai",)
    modality = "image"
    topology = "multi"
    agents = [AgentInfo(name=n, role="orchestrator" if n == "lead" else "agent", description=d) for n, d in DESCRIPTIONS.items()]
    tools = {}
    description = ("A PydanticAI chart desk: a lead agent with a structured answer uses a chart-reading agent (which sees "
                   "the chart image through its view_chart tool) and a calculator agent as tools.")
    not_applicable = NOT_APPLICABLE

    def tasks(self, seed: int, n: int) -> list[Task]:
        return [make_task(seed, i) for i in range(n)]

    def system_prompt(self, agent: str, task: Task) -> str:
        return INSTRUCTIONS[agent]

    def policy(self) -> DeskPolicy:
        return DeskPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        if task is None:
            return [REGIONS, PRODUCTS, MONTHS, SERIES]
        return [list(task.metadata["labels"]), [name for name, _ in task.metadata["series"]]]

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def injected_response(self, record: CallRecord, text: str) -> Any:
        return completion(record.request, text)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        try:
            run = json.loads(answer or "")
        except json.JSONDecodeError:
            run = {"output": None, "error": "no run record"}
        out = run.get("output") or {}
        given = out.get("answer")
        ok = run.get("error") is None and given is not None and _same(str(given), task.reference_answer or "")
        detail = f"expected {task.reference_answer!r}, got {given!r}" + (f" ({run['error']})" if run.get("error") else "")
        return Outcome(success=ok, score=float(ok), evaluator="chart_desk:answer", detail=detail)

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("PydanticAI"):
            from openai import AsyncOpenAI
            from pydantic_ai.exceptions import AgentRunError
            from pydantic_ai.models.openai import OpenAIChatModel
            from pydantic_ai.providers.openai import OpenAIProvider
            from pydantic_ai.usage import UsageLimits

            from .team import Desk, team
        endpoint = self.simulated_endpoint(rt, completion)

        def model(name: str) -> Any:
            client = AsyncOpenAI(api_key="faultlens-sim", base_url=BASE_URL.format(agent=SLUGS[name]), max_retries=0,
                                 http_client=endpoint.async_client())
            return OpenAIChatModel(rt.model, provider=OpenAIProvider(openai_client=client))

        desk = Desk(task, {name: model(name) for name in SLUGS}, rt.system)
        output, error = None, None
        prompt = f"{task.query}\nThe chart ({task.metadata['chart_id']}) is with the chart reader."
        with _deterministic():
            try:
                # One conversation: the agents used as tools run inside the lead's (so its spans import as one trace).
                result = team().run_sync(prompt, deps=desk, model=desk.models["lead"], conversation_id=str(task.id),
                                         usage_limits=UsageLimits(request_limit=LEAD_REQUESTS))
                output = result.output.model_dump()  # type: ignore[attr-defined]
            except AgentRunError as exc:  # the framework ended the run (retries exhausted, request limit)
                endpoint.reraise()
                error = f"{type(exc).__name__}: {str(exc)[:300]}"
            except Exception:
                endpoint.reraise()
                raise
        endpoint.reraise()
        self._steps(rt, desk.outputs)
        return json.dumps({"output": output, "error": error}, ensure_ascii=False)

    def _steps(self, rt: Runtime, outputs: dict[str, tuple[str, Media | None]]) -> None:
        """One step per recorded call (a model reply), then the tool's return when `view_chart` or `evaluate` ran."""
        steps = StepLog(rt)
        shown: Media | None = None  # the image the reader saw last in its current run
        for index, call in enumerate(rt.session.calls):
            name = NAMES.get(call.agent, call.agent)
            tc = tool_call_of(call.response)
            tool_name = ((tc or {}).get("function") or {}).get("name")
            meta: dict[str, Any] = {}
            media: list[Media] = []
            if name == "lead":
                shown = None
                if tool_name == "final_result":
                    kind = StepKind.final_answer
                elif tool_name in DELEGATES and index == 0:
                    kind, meta = StepKind.plan, {"delegate": DELEGATES[tool_name]}
                elif tool_name in DELEGATES:
                    kind, meta = StepKind.message, {"delegate": DELEGATES[tool_name]}
                else:
                    kind = StepKind.tool_call if tc else StepKind.message
            elif tc is not None:
                kind = StepKind.tool_call
            else:
                kind = StepKind.message
                media = [shown] if name == "chart_reader" and shown is not None else []
            step = steps.reply(index, call, kind, agent=name, meta=meta, media=media)
            returned = outputs.get(str((tc or {}).get("id"))) if kind == StepKind.tool_call else None
            if returned is not None:
                text, image = returned
                shown = image or shown
                steps.result(step, text, media=[image] if image is not None else [])
        steps.close()


def _same(answer: str, reference: str) -> bool:
    try:
        return abs(float(answer.replace(",", "")) - float(reference)) < 1e-6
    except ValueError:
        return answer.strip().lower() == reference.strip().lower()


__all__ = ["ChartDesk"]
