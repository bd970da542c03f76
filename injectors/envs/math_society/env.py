"""`math_society`: word problems solved with tools by a CAMEL role-playing society (an AI user instructs, an AI
assistant carries out).

The team is CAMEL (`camel-ai`, the `frameworks2` extra) running unchanged:
its `RolePlaying` society with task specification on, CAMEL's own AI-society
prompts, its `ChatAgent`s and their tool calling with `FunctionTool`s, and
the role-playing loop of CAMEL's examples (`role_play`: `init_chat`, then
`step` until the AI user says `CAMEL_TASK_DONE` or a turn limit):

- **task_specifier** (CAMEL's `TaskSpecifyAgent`) makes the question
  specific: its given figures, the facts to look up, what is asked;
- **instructor** (the AI user) plans and gives one instruction at a time;
- **solver** (the AI assistant; tools `lookup` over the task's fact sheet
  and `calculate`) carries each out and, told the task is done, answers.

Every role's model is `ModelFactory.create` on the OpenAI-compatible platform
with its own `url` `/agent/<name>/v1` and a custom OpenAI client (CAMEL's
`client=` / `async_client=`) whose `httpx` client is on a `MockTransport`
served by the run's `ChatProxy` (no socket); the proxy's upstream is
`policy.TeamPolicy`. CAMEL would count tokens with tiktoken (its default
`OpenAITokenCounter` fetches the BPE file on first use): each model gets a
token counter of characters / 4 instead, so nothing is downloaded.

Determinism: one tool call per reply; tool-call ids are hashes of the
request (`agents_desk.wire`); the society's turns are bounded by
`CHAT_TURN_LIMIT` and the solver's model calls per instruction by CAMEL's
`max_iteration`, so an injected run that loops ends the same way every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from faultlens.middleware.model.trace import StepKind, Task
from faultlens.middleware.replay.session import CallRecord

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..docs_team.calculator import calculate
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, message_text, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import record_replies
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import DONE, TeamPolicy
from .world import FAMILIES, ITEMS, JOBS, answer_of, fact_text, make_task

FRAMEWORK = "camel"
CHAT_TURN_LIMIT = 8  # role-playing steps (a clean run takes 3: look-ups, calculation, done)
MAX_ITERATION = 5  # CAMEL's bound on the solver's model calls in one step (a clean step makes at most 3)
TOKEN_LIMIT = 100_000  # each agent's context (the simulated model has no context window CAMEL knows)

DESCRIPTIONS = {
    "task_specifier": "CAMEL's task specify agent: restates the problem with its given figures, the facts to look up "
                      "and what is asked.",
    "instructor": "The AI user: plans and instructs the solver one step at a time, and says when the task is done.",
    "solver": "The AI assistant: carries out each instruction with lookup and calculate, and answers at the end.",
}
INSTRUCTIONS = {
    "task_specifier": ("You are the task_specifier. Restate the word problem as 'Problem:', then 'Given:' (its own "
                       "figures, 'name = value' separated by ';'), 'Look up:' (the facts the fact sheet must give) "
                       "and 'Find:' (what is asked)."),
    "instructor": ("You are the instructor. First instruct the look-ups, with your plan as the input (the facts, the "
                   "formula of what is asked, the answer); then instruct the calculation of the plan's formula on the "
                   "figures; when the solver has reported the result, reply with CAMEL_TASK_DONE."),
    "solver": ("You are the solver. Carry out each instruction with your tools (lookup, calculate) and report "
               "'<fact>: <value>' or '<expression> = <value>'. When told the task is done, end with a line "
               "'ANSWER: <number>'."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool results come from the fact sheet and the calculator inside the run (no recorded call to replace), "
           "and a tool error is reported and answered by a new instruction",
    "A.6": "a repeated look-up or calculation gets the same answer and the solver reports it at its next reply; "
           "CAMEL's max_iteration and the turn limit bound it, so a repetition costs calls, never the task",
}


def role_play(make: Callable[[], Any], task: str, limit: int = CHAT_TURN_LIMIT) -> str | None:
    """CAMEL's role-playing loop (its examples'): make the society (its task specifier's call is made then), step
    until the AI user says CAMEL_TASK_DONE, either side terminates or `limit` steps; the answer is the assistant's
    last message of the conversation. (`task`, the society's task prompt, is what a capture's run span states.)"""
    society = make()
    message = society.init_chat()
    answer: str | None = None
    for _ in range(limit):
        assistant, user = society.step(message)
        if assistant.msgs:
            answer = assistant.msg.content
        if assistant.terminated or user.terminated or not assistant.msgs:
            break
        if user.msgs and DONE in (user.msg.content or ""):
            break
        message = assistant.msg
    return answer


def _char_counter() -> Any:
    """A CAMEL token counter of characters / 4: CAMEL's default counts with tiktoken, whose BPE file is a download."""
    from camel.utils import BaseTokenCounter

    class CharCounter(BaseTokenCounter):
        def count_tokens_from_messages(self, messages: list[Any]) -> int:
            return sum(len(message_text(m.get("content"))) for m in messages) // 4

        def encode(self, text: str) -> list[int]:
            return [0] * (len(text) // 4)

        def decode(self, token_ids: list[int]) -> str:
            return ""

    return CharCounter()


def _escaped(text: str) -> str:
    """Our text inside a CAMEL prompt template (which formats `{...}`)."""
    return text.replace("{", "{{").replace("}", "}}")


@register
class MathSociety(ToolCallingTeam):
    name = "math_society"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("camel",)
    extra: ClassVar[str] = "frameworks2"
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("A CAMEL RolePlaying society: a task specifier restates a word problem, an instructor (the AI user) "
                   "instructs step by step, a solver (the AI assistant) carries out with lookup and calculate "
                   "FunctionTools until CAMEL_TASK_DONE.")
    stands_in_for = "math word problems with tools (GSM8K, MATH)"
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = TeamPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(ITEMS), list(JOBS)]
        if task is not None:
            groups.append(list(task.metadata["world"]["sheet"]))
        return groups

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("CAMEL"):
            from camel.models import ModelFactory
            from camel.prompts import AISocietyPromptTemplateDict
            from camel.societies import RolePlaying
            from camel.toolkits import FunctionTool
            from camel.types import ModelPlatformType, RoleType, TaskType
            from openai import AsyncOpenAI, OpenAI
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        sheet = task.metadata["world"]["sheet"]

        def lookup(name: str) -> str:
            """A fact of the fact sheet: a price, a pack size, a pack price, an hourly wage or a daily bonus.

            Args:
                name: the fact's name, e.g. 'pen price' or 'cook hourly wage'.
            """
            if name in sheet:
                return fact_text(name, sheet[name])
            return f"error: no fact {name!r} on the sheet; the facts are: {'; '.join(sheet)}"

        def calculator(expression: str) -> str:
            """The value of an arithmetic expression (numbers, parentheses and + - * /).

            Args:
                expression: e.g. (3 + 4) * 12 - 5.
            """
            return calculate(expression)

        calculator.__name__ = "calculate"

        def model(agent: str) -> Any:
            url = BASE_URL.format(agent=agent)
            return ModelFactory.create(
                model_platform=ModelPlatformType.OPENAI_COMPATIBLE_MODEL, model_type=rt.model, url=url,
                api_key="faultlens-sim", model_config_dict={"temperature": 0}, token_counter=_char_counter(),
                max_retries=0,
                client=OpenAI(base_url=url, api_key="faultlens-sim", max_retries=0, http_client=endpoint.client()),
                async_client=AsyncOpenAI(base_url=url, api_key="faultlens-sim", max_retries=0,
                                         http_client=endpoint.async_client()))

        prompts = AISocietyPromptTemplateDict()

        def society() -> Any:
            return RolePlaying(
                assistant_role_name="solver", user_role_name="instructor", task_prompt=task.query,
                task_type=TaskType.AI_SOCIETY, with_task_specify=True, with_critic_in_the_loop=False,
                task_specify_agent_kwargs={"model": model("task_specifier"), "task_specify_prompt":
                                           prompts.TASK_SPECIFY_PROMPT.format(word_limit=100) + "\n"
                                           + _escaped(rt.system("task_specifier"))},
                assistant_agent_kwargs={"model": model("solver"), "tools": [FunctionTool(lookup), FunctionTool(calculator)],
                                        "max_iteration": MAX_ITERATION, "token_limit": TOKEN_LIMIT},
                user_agent_kwargs={"model": model("instructor"), "token_limit": TOKEN_LIMIT},
                # CAMEL's own AI-society system prompts, each followed by the role's instructions (and lessons)
                sys_msg_generator_kwargs={"sys_prompts": {
                    RoleType.ASSISTANT: prompts.ASSISTANT_PROMPT + "\n\n" + _escaped(rt.system("solver")),
                    RoleType.USER: prompts.USER_PROMPT + "\n\n" + _escaped(rt.system("instructor"))},
                    "sys_msg_meta_dict_keys": {"assistant_role", "user_role", "task"}},
            )
        try:
            answer = role_play(society, task.query)
        except Exception:  # the framework ended the run, or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt)
        return answer

    def _steps(self, rt: Runtime) -> None:
        """One step per recorded call, then the tool's result after a look-up or a calculation.

        A tool's output is the `role: "tool"` message of the solver's next request (CAMEL sends it back as is)."""
        outputs = {str(m.get("tool_call_id")): message_text(m.get("content")) for call in rt.session.calls
                   for m in call.request.get("messages") or [] if m.get("role") == "tool"}
        planned = False

        def classify(call: CallRecord, tc: dict[str, Any] | None) -> tuple[StepKind, dict[str, Any]]:
            nonlocal planned
            if tc is not None:
                return StepKind.tool_call, {}
            if call.agent == "instructor":
                kind = StepKind.message if planned else StepKind.plan
                planned = True
                text = message_text(((call.response.get("choices") or [{}])[0].get("message") or {}).get("content"))
                return kind, ({"done": True} if DONE in text else {})
            if call.agent == "solver" and _told_done(call):
                return StepKind.final_answer, {}
            return StepKind.message, {}

        record_replies(rt, outputs, classify)


def _told_done(call: CallRecord) -> bool:
    """Whether the solver's request answers the AI user's CAMEL_TASK_DONE (its last user message)."""
    users = [m for m in call.request.get("messages") or [] if m.get("role") == "user"]
    return bool(users) and DONE in message_text(users[-1].get("content"))
