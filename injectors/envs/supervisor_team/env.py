"""`supervisor_team`: LangGraph's prebuilt multi-agent supervisor (`langgraph-supervisor`) on simulated models.

The team is `langgraph_supervisor.create_supervisor` running unchanged over two
`langgraph.prebuilt.create_react_agent` workers:

- **supervisor** plans the work, hands the look-up to the researcher and the
  arithmetic to the calculator through its handoff tools
  (`transfer_to_researcher`, `transfer_to_calculator`; the brief is the
  handoff message's content, which the worker reads in the shared history),
  and answers `ANSWER: <value>`;
- **researcher** (`lookup_price`, `lookup_shipping`) looks up the items its
  brief names and reports their figures;
- **calculator** (`calculate`) evaluates the expression of its brief and
  reports the result.

Each agent's `ChatOpenAI` has its own base URL (`/agent/<name>/v1`) and an
`httpx.Client` over the in-process endpoint (a `ChatProxy` over the run's
`replay.Session`; no socket). The graph runs with a low `recursion_limit`;
a run that reaches it ends as a failed run (`GraphRecursionError`).

Steps: one per model reply (the supervisor's plan, its briefs and its answer;
a worker's tool call or report), each made by one recorded call
(`Runtime.step_calls`), and after each worker tool call the tool's output as
a `tool_result` step with no call (read from the ToolMessage LangGraph sends
next). Recovered mistakes in seeds (rate `noise`): the researcher looks an
item up by its plural, is told the items that exist, and retries.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion, tool_call_of
from ..tool_steps import StepLog
from ..base import Runtime
from ..framework import TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, family_tasks, numeric_outcome
from .mistakes import MUTATORS
from .policy import SupervisorPolicy
from . import team
from .seams import seeded_handoff_ids
from .world import FAMILIES, ITEMS, make_task

FRAMEWORK = "langgraph"
# Enough for a clean run (5 supervisor-graph steps; a worker's agent/tools loop of at most 9), low enough that any
# injected run ends quickly.
RECURSION_LIMIT = 12

PROMPTS = {
    "supervisor": ("You are the supervisor of a small purchasing team. Plan the work, hand the look-ups to the researcher "
                   "and the arithmetic to the calculator (write each brief in your handoff message), and give the final "
                   "answer as 'ANSWER: <value>'."),
    "researcher": "You are the researcher. Look up the figures your brief asks for, one item at a time, and report them.",
    "calculator": "You are the calculator. Evaluate the expression of your brief with the calculate tool and report the result.",
}
DESCRIPTIONS = {
    "supervisor": "Plans, delegates through handoff tools and answers.",
    "researcher": "Looks up unit prices and shipping costs in the store's catalogue.",
    "calculator": "Evaluates arithmetic expressions.",
}
NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool outputs come from the workers' tools inside LangGraph's ToolNode (no recorded call to replace)",
}


@register
class SupervisorTeam(FrameworkEnvironment):
    name = "supervisor_team"
    stands_in_for = "price research with a calculator (AssistantBench)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("langgraph_supervisor", "langchain_openai")
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name=n, role="supervisor" if n == "supervisor" else "worker", description=d) for n, d in DESCRIPTIONS.items()]
    tools = {}
    description = ("A LangGraph supervisor (langgraph-supervisor) delegating through handoff tools to a researcher and a "
                   "calculator ReAct agent, answering purchasing questions over a simulated store.")
    not_applicable = NOT_APPLICABLE

    def tasks(self, seed: int, n: int) -> list[Task]:
        return family_tasks(self.name, seed, n, FAMILIES, make_task)

    def system_prompt(self, agent: str, task: Task) -> str:
        return PROMPTS[agent]

    def policy(self) -> SupervisorPolicy:
        return SupervisorPolicy()

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [list(ITEMS)]

    def injected_response(self, record: CallRecord, text: str) -> Any:
        return completion(record.request, text)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return numeric_outcome(answer, task.reference_answer or "", "supervisor_team:numeric")

    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("langgraph-supervisor and langchain-openai"):
            import langchain_openai  # noqa: F401  (the team's model class)
            import langgraph_supervisor  # noqa: F401
            from langgraph.errors import GraphRecursionError
        endpoint = self.simulated_endpoint(rt, completion)
        with warnings.catch_warnings():
            # langgraph 1.x calls create_react_agent deprecated; langgraph-supervisor 0.0.31 is built on it
            warnings.simplefilter("ignore", DeprecationWarning)
            app = team.graph(rt.model, {a: rt.system(a) for a in PROMPTS})
        answer: str | None
        try:
            with team.bound(endpoint, task.metadata["catalogue"]), seeded_handoff_ids(f"{task.id}"):
                result = app.invoke({"messages": [{"role": "user", "content": task.query}]}, {"recursion_limit": RECURSION_LIMIT})
            answer = str(result["messages"][-1].content)
        except GraphRecursionError as exc:  # an injected run that went round in circles: a failed run, not a crash
            endpoint.reraise()
            answer = f"the run ended: GraphRecursionError: {str(exc)[:200]}"
        except Exception:
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt)
        return answer

    @staticmethod
    def _steps(rt: Runtime) -> None:
        """One step per recorded call; after a worker's tool call, the tool's output (the ToolMessage sent next)."""
        calls = rt.session.calls
        steps = StepLog(rt)
        planned = False
        for index, call in enumerate(calls):
            tc = tool_call_of(call.response)
            fn = (tc or {}).get("function") or {}
            meta: dict[str, Any] = {}
            if call.agent == "supervisor":
                if tc is None:
                    kind = StepKind.final_answer
                else:
                    kind = StepKind.message if planned else StepKind.plan
                    planned = True
                    meta = {"handoff": str(fn.get("name", "")).removeprefix("transfer_to_")}
            else:
                kind = StepKind.message if tc is None else StepKind.tool_call
            step = steps.reply(index, call, kind, meta=meta)
            output = _tool_output(calls[index + 1:], call.agent, str((tc or {}).get("id"))) if kind == StepKind.tool_call else None
            if output is not None:
                steps.result(step, output)
        steps.close()


def _tool_output(later: list[CallRecord], agent: str, call_id: str) -> str | None:
    """The output LangGraph's ToolNode gave the call `call_id`: the ToolMessage in the agent's next request."""
    for call in later:
        if call.agent != agent:
            continue
        for m in call.request.get("messages") or []:
            if m.get("role") == "tool" and m.get("tool_call_id") == call_id:
                return str(m.get("content"))
        return None
    return None
