"""`adk_team`: a travel-quote team on the real Google Agent Development Kit (ADK), on simulated models.

The team is ADK (`google-adk`, the `frameworks` extra) running unchanged, by its `Runner` with an
`InMemorySessionService`:

- **coordinator**, the root `LlmAgent` with two `sub_agents`: it writes a plan and hands the case over with ADK's
  own agent transfer (`transfer_to_agent`), first to the research agent, then, with a budget brief, to the budget
  agent; when that one transfers back, it gives the final answer;
- **research_agent** (`LlmAgent`, function tools `hotel_rate`, `hotel_package`, `flight_fare`) looks up the
  figures the plan names and transfers back to the coordinator with its findings;
- **budget_agent** (`LlmAgent`, function tools `fx_rate`, `calculate`) converts the brief's figures to EUR,
  computes the plan's goal and transfers back with the result.

Every agent's model is ADK's `LiteLlm` wrapper; litellm's openai provider sends each call through an
`AsyncOpenAI` client whose base URL is the agent's own (`/agent/<name>/v1`) and whose `httpx` transport is the
in-process endpoint (`framework.InProcessEndpoint`, a `ChatProxy` over the run's `replay.Session`): no socket is
opened. ADK's randomness is pinned at its own seam (`google.adk.platform`: ids from a per-run counter, the clock at
0, a seeded random), the session id is the task's, and tool-call ids are hashes of the request, so a run is the
same bytes in any process. `RunConfig(max_llm_calls=...)` bounds a run that an injected error sends astray.

Steps: one per model reply (the coordinator's plan, its briefs and final answer; a specialist's tool call or its
report, which travels with its transfer back), each made by one recorded call (`Runtime.step_calls`), and one
`tool_result` step, with no call, after each function tool that ran. A transfer's step has no tool name (it is a
message between agents, `metadata.handoff` names the receiver). The task succeeds when the final `ANSWER:` equals
the reference computed from the task's world (`world.reference`).
"""

from __future__ import annotations

import itertools
import json
import logging
import random
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task

from .. import register
from ..agents_desk.wire import completion, text_of, tool_call_of
from ..tool_steps import StepLog
from ..base import Runtime, stable_seed
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, family_tasks, numeric_outcome
from .mistakes import MUTATORS
from .policy import BUDGET, COORDINATOR, RESEARCH, TRANSFER, TeamPolicy
from .world import CITIES, CURRENCIES, FAMILIES, HOTELS, ORIGINS, Desk, make_task, reference

FRAMEWORK = "google-adk"
APP = "adk_team"
# A clean run makes 9-13 calls; an injected error that sends the team astray ends at this bound.
MAX_LLM_CALLS = 24

DESCRIPTIONS = {
    COORDINATOR: "Plans the quote, transfers the look-ups and the budget to its specialists, and answers the customer.",
    RESEARCH: "Looks up hotel room rates and return flight fares.",
    BUDGET: "Converts figures to EUR and computes totals, per-traveller costs and what is left of a budget.",
}
INSTRUCTIONS = {
    COORDINATOR: ("You are the coordinator of a travel desk. Write a short plan, transfer the look-ups to "
                  "research_agent and then a budget brief to budget_agent, and answer with the final figure on a "
                  "last line 'ANSWER: <number>'."),
    RESEARCH: ("You are the research agent. Look up exactly the figures your brief names, then transfer back to the "
               "coordinator with a 'Findings:' list."),
    BUDGET: ("You are the budget agent. Look up the exchange rate to EUR of each currency in your brief, compute the "
             "brief's goal with calculate, then transfer back to the coordinator with 'Result: <amount> EUR'."),
}
AGENT_TOOLS = {COORDINATOR: (), RESEARCH: ("hotel_rate", "hotel_package", "flight_fare"), BUDGET: ("fx_rate", "calculate")}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "A.6": "a repeated look-up or transfer gets the same answer and the agent moves on at its next reply, well within "
           "max_llm_calls: a repetition costs a call, never the task",
    "V.3": "the function tools run inside ADK's own flow: their outputs are function responses that no model call "
           "makes, so no injectable step is a tool's or the environment's output",
}


@register
class AdkTeam(FrameworkEnvironment):
    name = "adk_team"
    stands_in_for = "travel quotes on a budget (TravelPlanner)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("google.adk",)
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name=n, role="coordinator" if n == COORDINATOR else "specialist", description=d)
              for n, d in DESCRIPTIONS.items()]
    tools = {}
    description = ("A Google ADK travel desk: a coordinator LlmAgent transferring (transfer_to_agent) to a research and "
                   "a budget specialist with function tools, quoting trips in EUR.")
    not_applicable = NOT_APPLICABLE

    def missing(self) -> list[str]:
        """`google.adk` is a dotted name: without any `google` package, finding it raises instead of answering None."""
        try:
            return super().missing()
        except ModuleNotFoundError:
            return list(self.requires)

    def tasks(self, seed: int, n: int) -> list[Task]:
        def make(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
            question, world = make_task(rng, family)
            return question, reference(world), {"world": world}

        return family_tasks(self.name, seed, n, FAMILIES, make)

    def system_prompt(self, agent: str, task: Task) -> str:
        return INSTRUCTIONS[agent]

    def policy(self) -> TeamPolicy:
        return TeamPolicy()

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        # The first group is the task's own hotels (the ones `hotel_rate` knows), when there is a task.
        # The last, the destinations the task has fares to.
        world = task.metadata["world"] if task is not None else None
        hotels = list(world["hotels"]) if world else list(HOTELS)
        destinations = list(dict.fromkeys(k.split("-", 1)[1] for k in world["fares"])) if world else []
        return [hotels, list(CITIES), list(ORIGINS), list(CURRENCIES), destinations]

    def injected_response(self, record: Any, text: str) -> Any:
        return completion(record.request, text)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return numeric_outcome(answer, task.reference_answer or "", "adk_team:numeric")

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("Google ADK"):
            from google.adk.agents import LlmAgent
            from google.adk.agents.run_config import RunConfig
            from google.adk.models.lite_llm import LiteLlm
            from google.adk.platform import _random as adk_random
            from google.adk.platform import time as adk_time
            from google.adk.platform import uuid as adk_uuid
            from google.adk.runners import Runner
            from google.adk.sessions import InMemorySessionService
            from google.adk.tools import FunctionTool, ToolContext
            from google.genai import types
            from openai import AsyncOpenAI
        import asyncio

        endpoint = self.simulated_endpoint(rt, completion)
        desk = Desk(json.loads(json.dumps(task.metadata["world"])))
        # ADK's warning that transfers re-send the prompt uncached says nothing about this run, and the errors it
        # logs with a traceback (an injected transfer to an agent that does not exist) end the run: the run keeps
        # them (`native_log`), the console need not.
        logging.getLogger("google_adk").setLevel(logging.CRITICAL)

        def model(name: str) -> Any:
            base = BASE_URL.format(agent=name)
            client = AsyncOpenAI(api_key="faultlens-sim", base_url=base, max_retries=0, http_client=endpoint.async_client())
            return LiteLlm(model=f"openai/{rt.model}", api_base=base, api_key="faultlens-sim", client=client)

        def hotel_rate(hotel: str, tool_context: ToolContext) -> dict:
            """The nightly rate of one room at a hotel (room only), in the hotel's currency."""
            return desk.keep(tool_context.function_call_id, desk.hotel_rate(hotel))

        def hotel_package(hotel: str, tool_context: ToolContext) -> dict:
            """A hotel's package price per person and night (room share, breakfast and dinner), in its currency."""
            return desk.keep(tool_context.function_call_id, desk.hotel_package(hotel))

        def flight_fare(origin: str, destination: str, tool_context: ToolContext) -> dict:
            """The return fare per person of a route (origin and destination cities)."""
            return desk.keep(tool_context.function_call_id, desk.flight_fare(origin, destination))

        def fx_rate(currency: str, tool_context: ToolContext) -> dict:
            """How many EUR one unit of a currency (ISO code, e.g. USD) is worth."""
            return desk.keep(tool_context.function_call_id, desk.fx_rate(currency))

        def calculate(expression: str, tool_context: ToolContext) -> dict:
            """The value of an arithmetic expression (numbers, + - * / and parentheses), rounded to the cent."""
            return desk.keep(tool_context.function_call_id, desk.calculate(expression))

        functions = {f.__name__: f for f in (hotel_rate, hotel_package, flight_fare, fx_rate, calculate)}

        def agent(name: str, **kw: Any) -> Any:
            return LlmAgent(name=name, model=model(name), instruction=rt.system(name), description=DESCRIPTIONS[name],
                            tools=[FunctionTool(functions[t]) for t in AGENT_TOOLS[name]], **kw)

        root = agent(COORDINATOR, sub_agents=[agent(RESEARCH), agent(BUDGET)])
        final: list[str] = []
        error: list[str] = []

        async def main() -> None:
            # ADK's own seams for ids, time and randomness (context variables: set here, they hold for this run only)
            counter = itertools.count()
            adk_uuid.set_id_provider(lambda: f"{task.id}-{next(counter):04d}")
            adk_time.set_time_provider(lambda: 0.0)
            rng = random.Random(stable_seed(task.id, "adk"))
            adk_random.set_random_provider(lambda: rng)
            service = InMemorySessionService()
            runner = Runner(app_name=APP, agent=root, session_service=service)
            session = await service.create_session(app_name=APP, user_id="customer", session_id=f"session-{task.id}")
            message = types.Content(role="user", parts=[types.Part(text=task.query)])
            try:
                async for event in runner.run_async(user_id="customer", session_id=session.id, new_message=message,
                                                    run_config=RunConfig(max_llm_calls=MAX_LLM_CALLS)):
                    texts = [p.text for p in (event.content.parts if event.content else []) or [] if p.text]
                    if texts and event.is_final_response():
                        final.append("\n".join(texts))
            except Exception as exc:  # ADK ended the run (the call bound, an unknown tool, a failed call)
                error.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            finally:
                await runner.close()

        _bridge_llm_spans()
        context_log = logging.getLogger("opentelemetry.context")
        context_log.addFilter(_quiet_detach)
        try:
            asyncio.run(main())
        finally:
            context_log.removeFilter(_quiet_detach)
        endpoint.reraise()
        self._steps(rt, desk)
        rt.native_log = json.dumps({"final": final, "error": error}, ensure_ascii=False) + "\n"
        return final[-1] if final and not error else None

    def _steps(self, rt: Runtime, desk: Desk) -> None:
        """One step per recorded call (a model reply), then the tool's result when a function tool ran."""
        steps = StepLog(rt)
        for index, call in enumerate(rt.session.calls):
            tc = tool_call_of(call.response)
            fn = (tc or {}).get("function") or {}
            meta: dict[str, Any] = {}
            if tc is None:
                kind = StepKind.final_answer if call.agent == COORDINATOR else StepKind.message
            elif fn.get("name") == TRANSFER:
                try:
                    meta = {"handoff": str(json.loads(fn.get("arguments") or "{}").get("agent_name"))}
                except (json.JSONDecodeError, AttributeError):
                    meta = {"handoff": None}
                planned = call.agent == COORDINATOR and text_of(call.response).startswith("Plan:")
                kind = StepKind.plan if planned else StepKind.message
            else:
                kind = StepKind.tool_call
            step = steps.reply(index, call, kind, meta=meta)
            output = desk.outputs.get(str((tc or {}).get("id"))) if kind == StepKind.tool_call else None
            if output is not None:
                steps.result(step, output)
        steps.close()


def _quiet_detach(record: logging.LogRecord) -> bool:
    """Drop OpenTelemetry's "Failed to detach context" during a run: OpenInference's ADK wrapper opens its span inside
    ADK's event stream, which ADK closes from another context; the spans are still ended and exported."""
    return record.getMessage() != "Failed to detach context"


def _bridge_llm_spans() -> None:
    """Let OpenInference's ADK instrumentation see the model calls of ADK 2.13 (a no-op when it is not on).

    `openinference-instrumentation-google-adk` 1.0.5 gives ADK's model-call module its own tracer for the
    `call_llm` span (`_model_call.tracer`) and writes the LLM attributes onto that span, but ADK 2.13 opens it
    through `tracing._start_call_llm_span`, on the shared tracer the instrumentation passes through, and under its
    default telemetry schema (v2) opens none: without this, the captured spans have no LLM span. ADK's own
    telemetry is untouched (it goes to the global tracer provider, which the capture does not use).
    """
    from google.adk.flows.llm_flows.core import _model_call
    from google.adk.telemetry import tracing

    tracer = getattr(_model_call, "tracer", None)
    if tracer is None or tracer is tracing.tracer or getattr(_model_call._start_call_llm_span, "faultlens_bridge", False):
        return

    def start(caller_context: Any) -> Any:
        return _model_call.tracer.start_span("call_llm", context=caller_context)  # type: ignore[attr-defined]

    start.faultlens_bridge = True  # type: ignore[attr-defined]
    _model_call._start_call_llm_span = start
