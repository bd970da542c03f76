"""`ledger_chat`: data analysis over a company ledger on Semantic Kernel's group chat (analyst, reviewer, reporter).

The team is Semantic Kernel (`semantic-kernel`, the `frameworks2` extra)
running unchanged: a `GroupChatOrchestration` of three `ChatCompletionAgent`s
on SK's `InProcessRuntime`, each agent on its own `OpenAIChatCompletion`
service:

- **analyst** (its kernel has the `ledger` plugin: `query_ledger` and
  `calculate`, SK `@kernel_function`s, invoked by SK's auto function calling)
  plans, queries the figures, computes and reports;
- **reviewer** checks the report against the question and sends it back or
  approves it;
- **reporter** answers with the approved result (`ANSWER:` line).

The group chat manager is a `GroupChatManager` subclass (SK's extension point;
SK ships only a round-robin one): the analyst speaks until it has a report,
then the reviewer; an approval goes to the reporter, a send-back to the
analyst; the chat ends when the reporter has spoken, or at `MAX_ROUNDS`.

Each service's `AsyncOpenAI` client has base_url `/agent/<name>/v1` and an
`httpx.AsyncClient` on a `MockTransport` served by the run's `ChatProxy` (no
socket); SK's agents stream (`invoke_stream`), so the endpoint answers a
streaming request with the recorded completion cut into server-sent events.

Determinism: one tool call per reply, tool-call ids hashed from the request
(`agents_desk.wire`); the agents' ids are their names; the group chat is
sequential (one agent speaks at a time, the manager's choice a function of the
chat). SK's auto function calling is bounded by `maximum_auto_invoke_attempts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

from faultlens.middleware.model.trace import StepKind, Task
from faultlens.middleware.replay.endpoint import sse_chunks
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import record_replies
from ..workflow_team.env import WorkflowEndpoint
from . import tracing
from .mistakes import MUTATORS
from .policy import TeamPolicy
from .world import CATEGORIES, DEPARTMENTS, FAMILIES, QUARTERS, make_task
from .world import answer_of as reference_of

FRAMEWORK = "semantic-kernel"
MAX_ROUNDS = 12  # the manager's rounds (each agent's turn is one); a clean run takes 4
AUTO_INVOKE = 8  # SK's function-calling round trips per agent turn; a seed run's analyst makes 3 or 4

DESCRIPTIONS = {
    "analyst": "Plans the analysis, queries the company ledger, computes the answer and reports it with its figures.",
    "reviewer": "Checks the analyst's report against the question and sends it back or approves it.",
    "reporter": "Writes the final answer from the approved result.",
}
INSTRUCTIONS = {
    "analyst": ("You are the analyst of a finance team answering a question about the company's expense ledger. First "
                "write a plan: the two figures A and B to query with query_ledger (metric, department, quarter, "
                "category), the formula over A and B for calculate, and the rounding the question asks. Then carry "
                "out your plan and report: each figure as your plan names it with its value, the computation, and a "
                "line 'Result: <number>'. If the reviewer sends your report back, do what it asks."),
    "reviewer": ("You are the reviewer. Check the analyst's latest report against the question: it has a 'Result:' "
                 "line, its figures cover every department, quarter and category the question names, and the result "
                 "has the decimals the question asks. Send it back with 'REVISE: <what to fix>' or approve it with "
                 "'APPROVED: <why>' and a last line 'reporter, please report the result: <number>'."),
    "reporter": ("You are the reporter. Once the reviewer has approved a result, state it in one sentence and end "
                 "with a line 'ANSWER: <number>'."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool results come from the ledger and the calculator inside the run (no recorded call to replace), and a "
           "tool error is answered by a retry",
    "A.6": "a repeated query or calculation gets the same answer and the analyst moves on at its next reply, and a "
           "repeated report goes to the reviewer as the first did: a repetition costs a call, never the task",
}


class StreamingEndpoint(WorkflowEndpoint):
    """The in-process endpoint answering SK's streaming requests with the completion as server-sent events."""

    def handle(self, request: Any) -> Any:
        import httpx

        response = super().handle(request)
        body = json.loads(request.content)
        if response.status_code != 200 or not body.get("stream"):
            return response
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = "".join(sse_chunks(json.loads(response.content), usage))
        return httpx.Response(200, content=events.encode(), headers={"content-type": "text/event-stream"})


@register
class LedgerChat(ToolCallingTeam):
    name = "ledger_chat"
    stands_in_for = "data analysis over an expense ledger (InfiAgent-DABench)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("semantic_kernel",)
    extra: ClassVar[str] = "frameworks2"
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("A Semantic Kernel group chat (GroupChatOrchestration on the InProcessRuntime): an analyst with a "
                   "ledger plugin (query_ledger, calculate), a reviewer and a reporter answer data-analysis questions "
                   "over a company's expense ledger.")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = TeamPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, reference_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [list(DEPARTMENTS), list(QUARTERS), list(CATEGORIES)]

    # -- the run --------------------------------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("Semantic Kernel"):
            from openai import AsyncOpenAI
            from semantic_kernel import Kernel
            from semantic_kernel.agents import ChatCompletionAgent, GroupChatOrchestration
            from semantic_kernel.agents.runtime import InProcessRuntime
            from semantic_kernel.connectors.ai import FunctionChoiceBehavior
            from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion

            from .team import LedgerChatManager, LedgerPlugin
        _quiet_logs()
        endpoint = self.simulated_endpoint(rt, completion, StreamingEndpoint)
        plugin = LedgerPlugin(task.metadata["world"]["ledger"])

        def agent(name: str) -> Any:
            client = AsyncOpenAI(api_key="faultlens-sim", base_url=BASE_URL.format(agent=name), max_retries=0,
                                 http_client=endpoint.async_client())
            kernel = Kernel()
            kernel.add_service(OpenAIChatCompletion(ai_model_id=rt.model, async_client=client, service_id=name))
            if name == "analyst":
                kernel.add_plugin(plugin, plugin_name="ledger")
            return ChatCompletionAgent(id=name, name=name, description=DESCRIPTIONS[name], instructions=rt.system(name),
                                       kernel=kernel,
                                       function_choice_behavior=FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=AUTO_INVOKE))

        async def run() -> Any:
            runtime = InProcessRuntime(tracer_provider=tracing.provider())
            runtime.start()
            chat = GroupChatOrchestration(members=[agent(n) for n in DESCRIPTIONS], manager=LedgerChatManager(max_rounds=MAX_ROUNDS))
            try:
                result = await chat.invoke(task=task.query, runtime=runtime)
                return await result.get(timeout=120)
            finally:
                await runtime.stop_when_idle()

        try:
            with _root_span(task):
                answer = asyncio.run(run())
        except Exception:  # the framework ended the run, or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt)
        text = str(getattr(answer, "content", "") or "")
        return text if getattr(answer, "name", None) == "reporter" else None

    def _steps(self, rt: Runtime) -> None:
        """One step per recorded call, then the tool's result after a query or a calculation (the `role: "tool"`
        message of the analyst's next request, as SK sends the function's result back)."""
        outputs = {str(m.get("tool_call_id")): str(m.get("content")) for call in rt.session.calls
                   for m in call.request.get("messages") or [] if m.get("role") == "tool"}
        record_replies(rt, outputs, _classify)


def _quiet_logs() -> None:
    """SK logs a call of a function its kernel lacks (an injected tool name) with a traceback; with no handler
    configured Python would print it to stderr (its last-resort handler). A `NullHandler` on SK's logger, as the
    logging HOWTO asks of libraries, keeps it out of the run's output; a handler the application set still gets it."""
    sk = logging.getLogger("semantic_kernel")
    if not any(isinstance(h, logging.NullHandler) for h in sk.handlers):
        sk.addHandler(logging.NullHandler())


@contextlib.contextmanager
def _root_span(task: Task) -> Iterator[None]:
    """The run's root span when its spans are captured (`tracing`), as SK's telemetry samples open one around a
    scenario: SK's runtime runs each agent turn in a task of its own, whose spans would otherwise have no parent."""
    provider = tracing.provider()
    if provider is None:
        yield
        return
    attributes = {"gen_ai.operation.name": "invoke_workflow",
                  "openinference.span.kind": "CHAIN", "input.value": task.query}
    with provider.get_tracer(__name__).start_as_current_span("invoke_workflow ledger_chat", attributes=attributes):
        yield


def _classify(call: CallRecord, tool_call: dict[str, Any] | None) -> tuple[StepKind, dict[str, Any]]:
    if tool_call is not None:
        return StepKind.tool_call, {}
    if call.agent == "reporter":
        return StepKind.final_answer, {}
    text = str(((call.response.get("choices") or [{}])[0].get("message") or {}).get("content") or "")
    return (StepKind.plan if call.agent == "analyst" and text.startswith("Plan:") else StepKind.message), {}
