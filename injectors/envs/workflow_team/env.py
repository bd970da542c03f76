"""`workflow_team`: a travel agency on LlamaIndex's `AgentWorkflow`, with handoffs between `FunctionAgent`s.

The team is LlamaIndex (`llama-index-core`, the `frameworks` extra) running
unchanged: its `AgentWorkflow` runtime (init_run → setup_agent →
run_agent_step → parse_agent_output → call_tool → aggregate_tool_results),
its shared `ChatMemoryBuffer`, its `handoff(to_agent, reason)` tool built
from each agent's `can_handoff_to`, and `FunctionAgent`s on the
`OpenAILike` LLM class:

- **concierge** (root; hands off to the researcher or the booker) reads the
  customer's request and briefs the researcher with the trip, the criteria and
  a plan;
- **researcher** (`search_flights`, `search_hotels`; hands off to the booker)
  chooses the flight and the hotel by the brief;
- **booker** (`book_trip`, `amend_booking`; hands off to the reviewer or the
  researcher) works out the total and holds the booking;
- **reviewer** (`get_booking`, `confirm_booking`, `cancel_booking`; hands
  off to the booker) checks the booking against the customer's message,
  sends it back when it differs, confirms it and answers the customer.

Every agent's `OpenAILike` has its own `api_base` `/agent/<name>/v1` and
`httpx` clients on a `MockTransport` served by the run's `ChatProxy` (no
socket); the proxy's upstream is `policy.TeamPolicy`. The function tools run
over the task's `world.Agency`, which logs every write.

Determinism: one tool call per reply and `allow_parallel_tool_calls=False`,
so the runtime's steps run one at a time whatever the event loop's
scheduling; tool-call ids are hashes of the request (`agents_desk.wire`);
the memory counts characters, not tiktoken tokens; one event loop per run
(`asyncio.run`). The run is bounded by `max_iterations` (LlamaIndex's own
count of agent steps; past it the workflow raises), not by a wall-clock
timeout, so an injected run that loops ends the same way every time.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion
from ..tool_steps import record_replies
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, InProcessEndpoint, Reply, family_tasks
from .mistakes import MUTATORS
from .policy import AGENTS, HANDOFF, TeamPolicy
from .world import CITIES, FAMILIES, HOTELS, Agency, euros, make_task, resolve

FRAMEWORK = "llama-index"
# LlamaIndex's count of agent steps (model calls) per run (a seed run makes 9, or 13 with a review loop); past it the run fails.
MAX_ITERATIONS = 20

DESCRIPTIONS = {
    "concierge": "Reads the customer's trip request and briefs the researcher with the trip, the criteria and a plan.",
    "researcher": "Searches flights and hotels and chooses them by the brief's criteria.",
    "booker": "Works out the total price and holds or amends the booking.",
    "reviewer": "Checks the booking against the customer's request, confirms it and answers the customer.",
}
HANDS_OFF_TO = {"concierge": ["researcher", "booker"], "researcher": ["booker"], "booker": ["reviewer", "researcher"],
                "reviewer": ["booker"]}

INSTRUCTIONS = {
    "concierge": ("You are the concierge of a travel agency. Read the customer's trip request and hand off to the "
                  "researcher with a brief of 'Key: value' lines (Trip, Flight, Hotel) and a numbered plan."),
    "researcher": ("You are the researcher of a travel agency. Work from the concierge's brief: search the flights and "
                   "the hotels, choose them by the brief's rules and hand off to the booker with a note (Flight, Hotel, "
                   "Travellers, Nights)."),
    "booker": ("You are the booker of a travel agency. Work from the researcher's note: work out the total "
               "(travellers x fare + nights x nightly rate), hold the booking with book_trip and hand off to the "
               "reviewer. When the reviewer sends a booking back, amend it with amend_booking."),
    "reviewer": ("You are the reviewer of a travel agency. Read the booking with get_booking and check its travellers, "
                 "nights and date against the customer's own message. If they differ, hand it back to the booker with a "
                 "'Fix:' note; otherwise confirm it with confirm_booking and reply to the customer with the booking "
                 "reference and the total."),
}

# name -> (description, [(parameter, type)])
TOOLS: dict[str, tuple[str, list[tuple[str, type]]]] = {
    "search_flights": ("The flights from one city to another on a date (YYYY-MM-DD), with fares per traveller.",
                       [("origin", str), ("destination", str), ("date", str)]),
    "search_hotels": ("The hotels of a city with their ratings and nightly rates.", [("city", str)]),
    "book_trip": ("Hold a booking of a flight and a hotel for a number of travellers and nights at a total price in "
                  "euros (a whole number).", [("flight_id", str), ("hotel_id", str), ("travellers", int), ("nights", int),
                                              ("total", int)]),
    "amend_booking": ("Change the travellers, nights and total of a held booking.",
                      [("booking_id", str), ("travellers", int), ("nights", int), ("total", int)]),
    "get_booking": ("A booking's record: flight, hotel, date, travellers, nights, total and status.", [("booking_id", str)]),
    "confirm_booking": ("Confirm a held booking (it is then charged).", [("booking_id", str)]),
    "cancel_booking": ("Cancel a booking.", [("booking_id", str)]),
}
AGENT_TOOLS = {"concierge": (), "researcher": ("search_flights", "search_hotels"),
               "booker": ("book_trip", "amend_booking"), "reviewer": ("get_booking", "confirm_booking", "cancel_booking")}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool results come from the simulated agency inside the run (no recorded call to replace), and a tool "
           "error is answered by a retry",
}


class WorkflowEndpoint(InProcessEndpoint):
    """The in-process endpoint answering with tool calls; a simulated agent's own exception is kept, not lost."""

    def __init__(self, session: Any, respond: Any, reply: Reply | None = completion) -> None:
        self.bug: BaseException | None = None

        def kept(agent: str, request: dict[str, Any]) -> str:
            try:
                return respond(agent, request)
            except Exception as exc:  # the framework would turn it into a connection error and hide it
                self.bug = self.bug or exc
                raise

        super().__init__(session, kept, reply=reply)

    def reraise(self) -> None:
        super().reraise()
        if self.bug is not None:
            raise self.bug


@register
class WorkflowTeam(FrameworkEnvironment):
    name = "workflow_team"
    stands_in_for = "travel booking with a reviewer (TravelPlanner)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("llama_index",)
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name=n, role="agent", description=d) for n, d in DESCRIPTIONS.items()]
    tools = {}
    description = ("A LlamaIndex AgentWorkflow travel agency (concierge, researcher, booker and reviewer FunctionAgents "
                   "handing off to each other, with a review loop) booking a flight and a hotel by the customer's rules.")
    not_applicable = NOT_APPLICABLE

    def tasks(self, seed: int, n: int) -> list[Task]:
        def make(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
            question, world = make_task(rng, family)
            want = resolve(world)
            ref = f"{want.flight['flight_id']} + {want.hotel['hotel_id']}, total {euros(want.total)}"
            return question, ref, {"world": world}

        return family_tasks(self.name, seed, n, FAMILIES, make)

    def system_prompt(self, agent: str, task: Task) -> str:
        return INSTRUCTIONS[agent]

    def policy(self) -> TeamPolicy:
        return TeamPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(CITIES), list(HOTELS)]
        if task is not None:
            world = task.metadata["world"]
            groups += [[f["flight_id"] for f in world["flights"]], [h["hotel_id"] for h in world["hotels"]]]
        return groups

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def injected_response(self, record: Any, text: str) -> Any:
        return completion(record.request, text)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        want = resolve(task.metadata["world"])
        try:
            run = json.loads(answer or "")
        except json.JSONDecodeError:
            run = {"output": None, "bookings": {}, "error": "no run record"}
        problems = []
        if run.get("error"):
            problems.append(f"the run ended with {run['error']}")
        live = [b for b in (run.get("bookings") or {}).values() if b.get("status") != "cancelled"]
        right = {"flight_id": want.flight["flight_id"], "hotel_id": want.hotel["hotel_id"], "travellers": want.travellers,
                 "nights": want.nights, "total": want.total, "status": "confirmed"}
        if len(live) != 1:
            problems.append(f"{len(live)} bookings stand where one was right")
        else:
            have = {k: live[0].get(k) for k in right}
            if have != right:
                problems.append("booked " + ", ".join(f"{k} {have[k]!r} (right: {right[k]!r})" for k in right if have[k] != right[k]))
            else:
                text = str(run.get("output") or "")
                lines = (f"Booking: {live[0]['booking_id']}", f"Flight: {want.flight['flight_id']}",
                         f"Hotel: {want.hotel['name']}", f"Total: {euros(want.total)}")
                for line in lines:
                    if line not in text.splitlines():
                        problems.append(f"the reply to the customer lacks the line {line!r}")
        ok = not problems
        return Outcome(success=ok, score=float(ok), evaluator="workflow_team:booking",
                       detail="; ".join(problems) or f"booked {task.reference_answer}")

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("LlamaIndex"):
            from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ToolCallResult
            from llama_index.core.memory import ChatMemoryBuffer
            from llama_index.core.tools import FunctionTool
            from llama_index.llms.openai_like import OpenAILike
            from pydantic import create_model
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        agency = Agency(copy.deepcopy(task.metadata["world"]))

        def llm(name: str) -> Any:
            import httpx

            return OpenAILike(model=rt.model, api_base=BASE_URL.format(agent=name), api_key="faultlens-sim",
                              is_chat_model=True, is_function_calling_model=True, context_window=128_000,
                              temperature=0.0, max_retries=0, reuse_client=True,
                              http_client=httpx.Client(transport=httpx.MockTransport(endpoint.handle)),
                              async_http_client=endpoint.async_client())

        def tool(name: str) -> Any:
            description, params = TOOLS[name]

            async def invoke(**kwargs: Any) -> str:
                return agency.call(name, kwargs)

            schema = create_model(name, **{p: (t, ...) for p, t in params})  # type: ignore[call-overload]
            return FunctionTool.from_defaults(async_fn=invoke, name=name, description=description, fn_schema=schema)

        team = [FunctionAgent(name=n, description=DESCRIPTIONS[n], system_prompt=rt.system(n), llm=llm(n),
                              tools=[tool(t) for t in AGENT_TOOLS[n]], can_handoff_to=HANDS_OFF_TO[n],
                              streaming=False, allow_parallel_tool_calls=False) for n in AGENTS]
        workflow = AgentWorkflow(agents=team, root_agent="concierge", timeout=None)  # type: ignore[arg-type]
        outputs: dict[str, str] = {}

        async def run() -> Any:
            # Characters, not tiktoken tokens: no BPE file to load, and the limit is never reached.
            memory = ChatMemoryBuffer.from_defaults(token_limit=10**8, tokenizer_fn=list)
            handler = workflow.run(user_msg=task.query, memory=memory, max_iterations=MAX_ITERATIONS)
            async for event in handler.stream_events():
                if isinstance(event, ToolCallResult):
                    outputs[event.tool_id] = str(event.tool_output.content)
            return await handler

        output, error = None, None
        try:
            result = asyncio.run(run())
            output = str(result.response.content or "")
        except Exception as exc:  # the framework ended the run (max iterations, a bad tool call) or a drift
            endpoint.reraise()
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
        endpoint.reraise()
        self._steps(rt, outputs)
        return json.dumps({"output": output, "bookings": agency.bookings, "log": agency.log, "error": error},
                          ensure_ascii=False)

    def _steps(self, rt: Runtime, outputs: dict[str, str]) -> None:
        """One step per recorded call (a model reply), then the tool's result when a function tool ran."""
        record_replies(rt, outputs, _step_of)


def _step_of(call: CallRecord, tc: dict[str, Any] | None) -> tuple[StepKind, dict[str, Any]]:
    """A reply without a tool call is the answer; a handoff the concierge's plan or another agent's message."""
    fn = (tc or {}).get("function") or {}
    if tc is None:
        return StepKind.final_answer, {}
    if fn.get("name") == HANDOFF:
        try:
            to = json.loads(fn.get("arguments") or "").get("to_agent")
        except (json.JSONDecodeError, AttributeError):
            to = None
        return (StepKind.plan if call.agent == "concierge" else StepKind.message), {"handoff": to}
    return StepKind.tool_call, {}
