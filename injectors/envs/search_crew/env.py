"""`search_crew`: web search with a computed answer on a CrewAI `Crew` whose manager delegates to two workers.

The team is CrewAI (`crewai`, the `frameworks2` extra) running unchanged: a
`Crew` with `Process.hierarchical` and a `manager_agent` of our own, which
CrewAI gives its delegation tools (`Delegate work to coworker`, `Ask question
to coworker`); one `Task` (the question), executed by the manager:

- **manager** plans, delegates each figure to `searcher` and the computation
  to `analyst` with CrewAI's `delegate_work_to_coworker`, and answers with an
  `ANSWER:` line;
- **searcher** (an `Agent`, tools `web_search` and `open_page` over the task's
  small web) finds a landmark's page and reports the figure asked for;
- **analyst** (an `Agent`, tool `calculate`) computes the expression given.

Every agent's LLM is CrewAI's native OpenAI class with its own `base_url`
`/agent/<name>/v1` and clients on the run's in-process endpoint
(`search_crew.llm`: no socket); the endpoint's upstream is `policy.CrewPolicy`.
CrewAI makes no network call: its telemetry (`CREWAI_DISABLE_TELEMETRY`,
`CREWAI_DISABLE_TRACKING`), its tracing (`CREWAI_TRACING_ENABLED=false`,
`tracing=False`) and its version check (`CREWAI_DISABLE_VERSION_CHECK`) are
off; `OTEL_SDK_DISABLED` is not set (it would silence our tracer too).

Determinism: one tool call per reply; tool-call ids are hashes of the request
(`agents_desk.wire`); a worker sees only the task and context the manager
wrote (CrewAI's delegation). Each agent's loop is bounded by its `max_iter`.
"""

from __future__ import annotations

import logging
import os
from typing import Any, ClassVar

from faultlens.middleware.model.trace import Task

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..docs_team.calculator import calculate
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import delegating_steps, tool_arguments
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import DELEGATE, CrewPolicy
from .world import FAMILIES, answer_of, make_task, open_page, search

FRAMEWORK = "crewai"
MAX_ITER = {"manager": 10, "searcher": 8, "analyst": 5}  # CrewAI's bound on an agent's replies per task
# CrewAI's switches for what it would send home; OTEL_SDK_DISABLED is left alone (it turns off every tracer).
QUIET = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true", "CREWAI_TRACING_ENABLED": "false",
         "CREWAI_DISABLE_VERSION_CHECK": "true"}

DESCRIPTIONS = {
    "manager": "Manages the crew: plans, delegates each figure to searcher and the computation to analyst, answers.",
    "searcher": "Searches the web, opens the landmark's page and reports the figure asked for.",
    "analyst": "Computes an arithmetic expression with calculate and reports the result.",
}
GOALS = {
    "manager": "Answer the question with the number computed from figures published on the web.",
    "searcher": "Report the exact figure asked for, as the landmark's own page states it.",
    "analyst": "Report the exact value of the expression asked for.",
}
INSTRUCTIONS = {
    "manager": ("You are the manager of a web research crew. Answer the question from figures published on the web. "
                "Write a plan (the figures to find, the computation, the answer) as the context of your first "
                "delegation; delegate each figure to searcher, one at a time; then delegate your plan's computation "
                "to analyst; end with a line 'ANSWER: <number>'."),
    "searcher": ("You are the searcher. Find the figure you are asked for: search the web with web_search, open the "
                 "result whose title is exactly the landmark's name with open_page, and report the figure as "
                 "'<landmark> <figure>: <number>'."),
    "analyst": ("You are the analyst. Compute the expression you are given with calculate and report the result as "
                "'result: <number>'."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool results come from the task's web and the calculator inside the run (no recorded call to replace), "
           "and a tool error is answered by a retry",
    "A.1": "the searcher's two tools feed each other (a search where an open was due lists the page it opens next, an "
           "open where a search was due fails and it searches), the analyst has one tool, and the manager's "
           "delegations are messages (C.1): a wrong tool costs a call, never the task",
}


@register
class SearchCrew(ToolCallingTeam):
    name = "search_crew"
    stands_in_for = "web search with a computed answer (GAIA, AssistantBench)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("crewai",)
    extra: ClassVar[str] = "frameworks2"
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("A CrewAI Crew (hierarchical process): a manager delegates with CrewAI's delegation tool to a "
                   "searcher (web_search, open_page over a small simulated web) and an analyst (calculate): web "
                   "search with a computed answer.")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = CrewPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        if task is None:
            return []
        return [[p["title"] for p in task.metadata["world"]["pages"]]]

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        os.environ.update(QUIET)
        with self.framework_imports("CrewAI"):
            from crewai import Agent, Crew, Process
            from crewai import Task as CrewTask
            from crewai.tools import tool

            from .llm import InProcessOpenAI
        # CrewAI warns on every call that it estimates the prompt's tokens (the simulated model has no tokenizer)
        logging.getLogger("crewai.llms.base_llm").setLevel(logging.ERROR)
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        pages = task.metadata["world"]["pages"]

        @tool("web_search")
        def web_search(query: str) -> str:
            """Search the web: the titles, URLs and first sentences of the pages matching the query, best first."""
            return search(pages, query)

        @tool("open_page")
        def read_page(url: str) -> str:
            """Open a web page by its URL (from the search results) and return its text."""
            return open_page(pages, url)

        @tool("calculate")
        def calculator(expression: str) -> str:
            """The value of an arithmetic expression (numbers, parentheses and + - * /), e.g. (3 - 1) * 40."""
            return calculate(expression)

        def llm(agent: str) -> Any:
            return InProcessOpenAI(model=rt.model, custom_openai=True, base_url=BASE_URL.format(agent=agent),
                                   api_key="faultlens-sim", max_retries=0, endpoint=endpoint)

        def agent(name: str, tools: list[Any]) -> Any:
            return Agent(role=name, goal=GOALS[name], backstory=rt.system(name), llm=llm(name), tools=tools,
                         allow_delegation=False, max_iter=MAX_ITER[name], verbose=False)

        workers = [agent("searcher", [web_search, read_page]), agent("analyst", [calculator])]
        manager = Agent(role="manager", goal=GOALS["manager"], backstory=rt.system("manager"), llm=llm("manager"),
                        allow_delegation=True, max_iter=MAX_ITER["manager"], verbose=False)
        job = CrewTask(description=task.query, expected_output="The answer, ending with a line 'ANSWER: <number>'.")
        crew = Crew(agents=workers, tasks=[job], process=Process.hierarchical, manager_agent=manager, verbose=False,
                    tracing=False)
        try:
            result = crew.kickoff()
        except Exception:  # the framework ended the run, or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt)
        return str(result.raw)

    def _steps(self, rt: Runtime) -> None:
        """One step per recorded call (a model reply), then the tool's result after a search, page or calculation.

        A tool's output is the `role: "tool"` message of the agent's next request (CrewAI sends it back as is)."""
        outputs = {str(m.get("tool_call_id")): str(m.get("content")) for call in rt.session.calls
                   for m in call.request.get("messages") or [] if m.get("role") == "tool"}
        delegating_steps(rt, outputs, "manager", DELEGATE, _coworker_of)


def _coworker_of(tool_call: Any) -> str:
    return str(tool_arguments(((tool_call or {}).get("function") or {}).get("arguments")).get("coworker", ""))
