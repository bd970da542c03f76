"""`docs_team`: document QA over annual reports on Haystack's `Agent`, a lead that calls a researcher agent as a tool.

The team is Haystack (`haystack-ai`, the `frameworks` extra) running
unchanged: two `Agent` components, each on its own `OpenAIChatGenerator`:

- **lead** (tools: `researcher`, `calculate`) plans, calls the researcher
  with the figures it needs, has `calculate` work out the plan's
  computation and answers with an `ANSWER:` line;
- **researcher** (tool: `search_reports`, Haystack's `InMemoryBM25Retriever`
  over an `InMemoryDocumentStore` of the task's reports) finds each figure
  and reports one line per figure.

The researcher is a tool of the lead through Haystack's own agent-as-tool
(`ComponentTool(component=researcher_agent)`): the lead calls it with a list
of chat messages, Haystack runs the researcher agent on them, and the lead
reads the researcher's last message (`outputs_to_string`). Every generator
has its own `api_base_url` `/agent/<name>/v1` and an `httpx` client on a
`MockTransport` served by the run's `ChatProxy` (no socket); the proxy's
upstream is `policy.TeamPolicy`. Haystack's telemetry is off
(`HAYSTACK_TELEMETRY_ENABLED=False`, set before Haystack is imported).

Determinism: one tool call per reply and `tool_concurrency_limit=1`;
tool-call ids are hashes of the request (`agents_desk.wire`); BM25 ranks the
same documents the same way. Each agent's run is bounded by its
`max_agent_steps` (Haystack's own count; past it the agent stops, and a lead
stopped without an answer fails the task).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from faultlens.middleware.model.trace import Task

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, quiet_loggers, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import delegating_steps
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import DELEGATE, TeamPolicy
from .world import COMPANIES, FAMILIES, YEARS, answer_of, make_task

FRAMEWORK = "haystack"
MAX_AGENT_STEPS = 8  # Haystack's count of model calls per agent run (a seed run's lead makes 3 to 5)

DESCRIPTIONS = {
    "lead": "Plans, asks the researcher for the figures, computes the answer with calculate and answers.",
    "researcher": "Searches the annual reports and reports the figures it is asked for, one line each.",
}
INSTRUCTIONS = {
    "lead": ("You are the lead. Answer the question from the companies' annual reports. First write a plan "
             "(the figures to find, the computation, the answer), then call the researcher tool with the figures to "
             "find, compute the answer with calculate, and end with a line 'ANSWER: <number>'."),
    "researcher": ("You are the researcher. For each figure you are asked for, search the annual reports with "
                   "search_reports, read the figure from the report of that company and year, and reply with one line "
                   "per figure: '<company> <year> <metric>: <value> (<report id>)'."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool results come from Haystack's retriever and the calculator inside the run (no recorded call to "
           "replace), and a tool error is answered by a retry",
}


@register
class DocsTeam(ToolCallingTeam):
    name = "docs_team"
    stands_in_for = "document QA over reports (FinanceBench)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("haystack",)
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("A Haystack Agent (the lead, with a calculator) that calls a researcher Agent as a tool "
                   "(ComponentTool), which searches annual reports with a BM25 retriever: document QA over two reports.")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = TeamPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(COMPANIES), [str(y) for y in YEARS]]
        if task is not None:
            groups.append([d["id"] for d in task.metadata["world"]["docs"]])
        return groups

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"  # before the import: Haystack would post usage events
        with self.framework_imports("Haystack"):
            import httpx
            from haystack import Document, Pipeline
            from haystack.components.agents import Agent
            from haystack.components.generators.chat import OpenAIChatGenerator
            from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
            from haystack.dataclasses import ChatMessage
            from haystack.document_stores.in_memory import InMemoryDocumentStore
            from haystack.tools import ComponentTool, Tool
            from haystack.utils import Secret

            from .components import Calculator
        quiet_loggers("haystack.components.agents.tool_calling")
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        store = InMemoryDocumentStore()
        store.write_documents([Document(id=d["id"], content=d["content"]) for d in task.metadata["world"]["docs"]])
        retriever = InMemoryBM25Retriever(document_store=store, top_k=3)

        def search_reports(query: str) -> str:
            found = retriever.run(query=query)["documents"]
            return "\n".join(f"[{d.id}] {d.content}" for d in found) or "no report matches the query"

        def generator(agent: str) -> Any:
            return OpenAIChatGenerator(api_key=Secret.from_token("faultlens-sim"), model=rt.model,
                                       api_base_url=BASE_URL.format(agent=agent), max_retries=0,
                                       http_client_kwargs={"transport": httpx.MockTransport(endpoint.handle)})

        string = {"type": "string"}
        search = Tool(name="search_reports", description="Search the annual reports; the three best matches with their ids.",
                      parameters={"type": "object", "properties": {"query": string}, "required": ["query"]},
                      function=search_reports)
        # a component (as the retriever is): Haystack's instrumentation traces its runs, so its outputs are spans
        calc = ComponentTool(component=Calculator(), name="calculate", description="The value of an arithmetic "
                             "expression (numbers and + - * /).", outputs_to_string={"source": "value"})
        researcher_runs: list[list[Any]] = []  # the researcher's messages of each of its runs

        def report(result: dict[str, Any]) -> str:
            researcher_runs.append(list(result.get("messages") or []))
            last = result.get("last_message")
            return (last.text or "") if last is not None else ""

        researcher = Agent(chat_generator=generator("researcher"), tools=[search], system_prompt=rt.system("researcher"),
                           max_agent_steps=MAX_AGENT_STEPS, tool_concurrency_limit=1)
        delegate = ComponentTool(component=researcher, name=DELEGATE, description=DESCRIPTIONS["researcher"],
                                 outputs_to_string={"handler": report})
        lead = Agent(chat_generator=generator("lead"), tools=[delegate, calc], system_prompt=rt.system("lead"),
                     max_agent_steps=MAX_AGENT_STEPS, tool_concurrency_limit=1)
        answer: str | None = None
        lead_messages: list[Any] = []
        try:
            # in a Pipeline, as Haystack runs components (and as its OpenInference instrumentation traces them)
            pipeline = Pipeline()
            pipeline.add_component("lead", lead)
            result = pipeline.run({"lead": {"messages": [ChatMessage.from_user(task.query)]}})["lead"]
            lead_messages = list(result.get("messages") or [])
            last = result.get("last_message")
            answer = last.text if last is not None and last.text and not last.tool_calls else None
        except Exception:  # the framework ended the run (a bad tool call it raised on) or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        outputs = {str(r.origin.id): str(r.result) for messages in [lead_messages, *researcher_runs]
                   for m in messages for r in m.tool_call_results}
        self._steps(rt, outputs)
        return answer

    def _steps(self, rt: Runtime, outputs: dict[str, str]) -> None:
        """One step per recorded call (a model reply), then the tool's result after a search or a calculation."""
        delegating_steps(rt, outputs, "lead", DELEGATE, lambda tool_call: "researcher")
