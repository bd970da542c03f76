"""`code_desk`: a function written to a spec and tested, on Strands Agents, a lead whose tools are two agents.

The team is Strands Agents (`strands-agents`, the `frameworks` extra)
running unchanged: an orchestrator `Agent` whose tools are two other
`Agent`s made tools with Strands' own `Agent.as_tool()` (agents as tools: the
tool's one argument, `input`, is all the agent sees; its reply is the tool's
result), each with its own `OpenAIModel`:

- **lead** (the orchestrator; tools: `coder`, `tester`) plans a design,
  briefs the coder, has the tester test the code and answers with the
  version that passes;
- **coder** (an `Agent`, no tool) writes the function from the design;
- **tester** (an `Agent`, tool `run_tests`) runs the design's tests on it.

Every `OpenAIModel` gets `client=` an `openai.AsyncOpenAI` with `base_url`
`/agent/<name>/v1` and an `httpx.AsyncClient` on a `MockTransport` served by
the run's `ChatProxy` (no socket; the proxy's upstream is
`policy.TeamPolicy`), non-streaming (`stream=False`). Strands emits its own
OpenTelemetry spans on the global tracer provider (a no-op one unless the
capture sets it, `tracing.py`).

Determinism: one tool call per reply; tool-call ids are hashes of the request
(`agents_desk.wire`); an agent tool starts from a fresh conversation on each
call (`preserve_context=False`, Strands' default). `run_tests` runs the code
in a fresh `python -I -S` subprocess with a time limit (`code_team.world`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from faultlens.middleware.model.trace import Outcome, StepKind, Task

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..code_team.world import run_tests
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, quiet_loggers, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import record_replies
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import MEMBERS, TeamPolicy
from .world import FAMILIES, answer_of, code_of, hidden_count, hidden_report, make_task, passed_all

FRAMEWORK = "strands-agents"
EVALUATOR = "code_desk:hidden_tests"

DESCRIPTIONS = {
    "lead": "Leads the desk: plans a design, has the coder write it and the tester test it, answers with the code.",
    "coder": "Writes the Python function a design describes.",
    "tester": "Runs the design's tests on the coder's code and reports the verdict.",
}
INSTRUCTIONS = {
    "lead": ("You are the lead of a small coding desk. Given a spec, first write a plan with a design: 'Design:', then "
             "'- function: <name>(<args>)', one '- <key>: <rule>' line per rule of the spec and a '- tests: <call>; "
             "<call>' line of calls to check. Give the coder the design, give the tester the design and the code, send "
             "a failing version back to the coder with the report, and answer with the version the tester passes in "
             "one ```python block."),
    "coder": "You are the coder. Write the Python function the design in your brief describes, in one ```python block.",
    "tester": ("You are the tester. Work out the expected value of each of the design's test calls from the design, run "
               "them against the code with run_tests, and report the result with a last line 'VERDICT: pass' or "
               "'VERDICT: fail'."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "test runs happen inside the run (the tester's run_tests in a subprocess: no recorded call to replace)",
    "A.1": "the only tool call is the tester's run_tests, its one tool: there is no other tool to call (the lead's "
           "calls of the coder and the tester are its delegations)",
    "A.2": "run_tests' arguments only decide the tester's verdict: a working version run with wrong tests is sent back "
           "and passes its next, fresh run, and a seed's broken version does not load whatever it is run with (0 of "
           "173 kept in the shard's build)",
    "C.1": "a brief sent to the wrong member (the tester before any code, the coder for a test run) gets a reply that "
           "sends the lead back to its plan's next step: it costs a round, never the task",
    "PL.3": "the plan's one goal is the spec's function and the lead follows it to the answer; a plan for another "
            "function leaves the coder nothing to implement from the design (a brief it cannot read), not a drift",
    "A.6": "a repeated brief, hand-over or test run gets the same answer and the agent moves on at its next reply: a "
           "repetition costs a call, never the task (0 kept in a 12-seed check)",
}


@register
class CodeDesk(ToolCallingTeam):
    name = "code_desk"
    stands_in_for = "code with tests (HumanEval, MBPP)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("strands",)
    modality = "text"
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    tools = {}
    description = ("A Strands Agents orchestrator (lead) whose tools are two agents (Agent.as_tool): a coder and a "
                   "tester with run_tests; a Python function written to a spec, judged by hidden tests.")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = TeamPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [[">=", ">"], ["merit", "pass", "fail"]]

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        """The hidden tests on the answer's code (not `ToolCallingTeam`'s `ANSWER:` number)."""
        code = code_of(answer)
        if code is None:
            return Outcome(success=False, score=0.0, evaluator=EVALUATOR, detail="no ```python block in the answer")
        world = task.metadata["world"]
        report = hidden_report(world, code)
        total = hidden_count(world)
        m = re.match(r"^(\d+) passed", report)
        ok = passed_all(report, total)
        return Outcome(success=ok, score=(int(m.group(1)) / total) if m else 0.0, evaluator=EVALUATOR,
                       detail="hidden tests: " + "; ".join(report.splitlines()[:3]))

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("Strands Agents"):
            import httpx
            import openai
            from strands import Agent, tool
            from strands.models.openai import OpenAIModel
        quiet_loggers("strands.tools.executors._executor")
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)

        @tool(name="run_tests")
        def tests(source: str) -> str:
            """Run Python code followed by its tests (`expect(<call>, <expected>)` lines after a
            `# --- tests ---` line) in a fresh interpreter; the report: `N passed, M failed` and each failure.

            Args:
                source: the code, then the tests.
            """
            return run_tests(source)

        def model(agent: str) -> Any:
            client = openai.AsyncOpenAI(api_key="faultlens-sim", base_url=BASE_URL.format(agent=agent), max_retries=0,
                                        http_client=httpx.AsyncClient(transport=httpx.MockTransport(endpoint.handle)))
            return OpenAIModel(client=client, model_id=rt.model, stream=False)

        def agent(name: str, tools: list[Any]) -> Any:
            return Agent(name=name, agent_id=name, description=DESCRIPTIONS[name], model=model(name), tools=tools,
                         system_prompt=rt.system(name), callback_handler=None, trace_attributes={"session.id": task.id or ""})

        coder, tester = agent("coder", []), agent("tester", [tests])
        lead = agent("lead", [coder.as_tool(), tester.as_tool()])
        try:
            result = lead(task.query)
        except Exception:  # the framework ended the run, or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt)
        return _answer(result)

    def _steps(self, rt: Runtime) -> None:
        """One step per recorded call, then the tool's result after a test run (the `role: "tool"` message of the
        tester's next request). The lead's first call of an agent tool is its plan, later ones messages."""
        outputs = {str(m.get("tool_call_id")): str(m.get("content")) for call in rt.session.calls
                   for m in call.request.get("messages") or [] if m.get("role") == "tool"}
        delegated = False

        def classify(call: Any, tc: dict[str, Any] | None) -> tuple[StepKind, dict[str, Any]]:
            nonlocal delegated
            tool = ((tc or {}).get("function") or {}).get("name")
            if call.agent == "lead" and tool in MEMBERS:
                kind = StepKind.message if delegated else StepKind.plan
                delegated = True
                return kind, {"delegate": tool}
            if tc is not None:
                return StepKind.tool_call, {}
            return (StepKind.final_answer if call.agent == "lead" else StepKind.message), {}

        record_replies(rt, outputs, classify)


def _answer(result: Any) -> str | None:
    """The lead's last reply's text (Strands' `AgentResult.message`)."""
    content = (getattr(result, "message", None) or {}).get("content") or []
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict)) or None
