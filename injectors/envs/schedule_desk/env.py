"""`schedule_desk`: calendar scheduling on DSPy's `ReAct`, one solver program with a calendar and a free-slot tool.

The team is DSPy (`dspy`, the `frameworks` extra) running unchanged: a
`Solver` program (a `dspy.Module`, `program.py`) around a `dspy.ReAct` over the signature `question -> answer` (its instructions are
the solver's system prompt) with two plain-function tools, `calendar` and
`free_slots` (`tools.py`), and DSPy's own `finish`. ReAct asks its `react`
predictor for a thought, a tool and its arguments each turn, runs the tool,
and when the solver calls `finish` asks its `extract` predictor
(`ChainOfThought`) for the answer; both write and read DSPy's `ChatAdapter`
format (`policy.py`). JSON fallback is off (`ChatAdapter(use_json_adapter_fallback=False)`),
so a reply DSPy cannot parse (a tool it does not have) ends the run without
an answer instead of a second, differently formatted request.

DSPy talks to models through litellm: the `dspy.LM` is
`openai/<model>` on the litellm engine with `api_base` `/agent/solver/v1`
and litellm's `client=` an OpenAI client whose `httpx` transport is the
in-process endpoint (`framework.InProcessEndpoint`, a `ChatProxy` over the
run's `replay.Session`; the proxy's upstream is `policy.SolverPolicy`). No
socket is opened; DSPy's response cache is off (`cache=False`).

Determinism: DSPy's requests are functions of the trajectory; the tools are
pure functions of the task. ReAct's run is bounded by `max_iters`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, Step, StepKind, Task

from .. import register
from ..agents_desk.wire import text_of
from ..base import Runtime
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkTeam, answer_outcome, world_tasks
from ..tool_steps import StepLog
from .mistakes import MUTATORS
from .policy import AGENT, SolverPolicy, fields, read_request
from .tools import tools_for
from .world import DAYS, FAMILIES, PEOPLE, answer_of, make_task

FRAMEWORK = "dspy"
MAX_ITERS = 10  # ReAct's turns (a seed run takes 5 or 6)

INSTRUCTIONS = ("You are the solver: you schedule meetings. Write a plan in your first thought (the people and the day, the "
                "meeting's length, the start the question asks for), read each invitee's calendar with `calendar`, "
                "pass all their meetings of that day to `free_slots` with the meeting's length, then finish; answer "
                "with a line 'ANSWER: HH:MM'.")

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "C.1": "one agent (a single ReAct program): there is no one to delegate to",
    "C.2": "one agent (a single ReAct program): there is no other agent to communicate with",
    "C.3": "one agent (a single ReAct program): there is no other agent to rely on",
    "V.3": "tool results are made inside the run by DSPy calling our tool functions (no recorded call to replace), "
           "and a tool error is answered by a retry",
}


@register
class ScheduleDesk(FrameworkTeam):
    name = "schedule_desk"
    stands_in_for = "calendar scheduling (NATURAL PLAN)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("dspy",)
    agents = [AgentInfo(name=AGENT, role="agent", description="A DSPy ReAct program: reads the invitees' calendars, "
                        "finds the common free windows and answers the meeting's start.")]
    description = ("A DSPy ReAct program (the solver) with a calendar tool and a free-slot tool: calendar scheduling "
                   "for three people under a duration and a time-of-day constraint.")
    not_applicable = NOT_APPLICABLE
    instructions = {AGENT: INSTRUCTIONS}
    team_policy = SolverPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(PEOPLE), list(DAYS)]
        if task is not None:
            groups.append(list(task.metadata["world"]["calendars"]))
        return groups

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        return answer_outcome(answer, task.reference_answer or "", "schedule_desk:time", str.__eq__)

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("DSPy"):
            import dspy
            from dspy.utils.exceptions import AdapterParseError
            from openai import OpenAI

            from .program import Solver

        class SharedOpenAI(OpenAI):
            # DSPy deep-copies each request's arguments (litellm's `client=` among them); a client holds locks and
            # its transport, so the copy is the client itself.
            def __deepcopy__(self, memo: dict[int, Any]) -> SharedOpenAI:
                return self

        endpoint = self.simulated_endpoint(rt)
        base = BASE_URL.format(agent=AGENT)
        client = SharedOpenAI(api_key="faultlens-sim", base_url=base, max_retries=0, http_client=endpoint.client())
        lm = dspy.LM(f"openai/{rt.model}", engine="litellm", api_base=base, api_key="faultlens-sim", client=client,
                     cache=False, num_retries=0)
        solver = Solver(rt.system(AGENT), tools_for(task.metadata["world"]), MAX_ITERS)
        answer: str | None = None
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
            try:
                answer = str(solver(question=task.query).answer)
            except AdapterParseError:  # DSPy could not read a reply (a tool it does not have): the run ends unanswered
                endpoint.reraise()
            except Exception:  # a drift, or the framework ended the run
                endpoint.reraise()
                raise
        endpoint.reraise()
        self._steps(rt)
        return answer

    def _steps(self, rt: Runtime) -> None:
        """One step per recorded call; a tool's observation (read from the last request's trajectory) after it."""
        calls = rt.session.calls
        turns = read_request(calls[-1].request).turns if calls else []
        steps = StepLog(rt)
        turn = 0
        for index, call in enumerate(calls):
            if read_request(call.request).predictor == "extract":
                steps.reply(index, call, StepKind.final_answer)
                continue
            reply = fields(text_of(call.response))
            here = turns[turn] if turn < len(turns) else None
            turn += 1
            if here is None or here.tool == "finish":  # finishing, or a reply DSPy could not read
                steps.reply(index, call, StepKind.message, meta={"tool": reply.get("next_tool_name", "")})
                continue
            step = steps.reply(index, call, StepKind.plan if index == 0 else StepKind.tool_call)
            _as_tool_call(step, here.tool, here.args)
            steps.result(step, here.observation)
        steps.close()


def _as_tool_call(step: Step, tool: str, args: dict[str, Any]) -> None:
    """The tool DSPy ran for this reply and its arguments, as DSPy parsed them."""
    step.tool_name = tool
    step.tool_arguments = dict(args)
