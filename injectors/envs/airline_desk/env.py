"""`airline_desk`: policy-bound airline customer service on an Agno `Team`, a leader delegating to two members.

The team is Agno (`agno`, the `frameworks` extra) running unchanged: a
`Team` in coordinate mode (`TeamMode.coordinate`) whose leader and members
each have their own `OpenAILike` model:

- **coordinator** (the team leader; its own tool: `calculate`) plans,
  delegates with Agno's `delegate_task_to_member` tool to `records` (the
  booking's fare class and price) and then to `policy` (the fare class's
  fees), has `calculate` work out the plan's formula and answers with an
  `ANSWER:` line;
- **records** (an `Agent`, tool `get_booking`) reports the booking's figures;
- **policy** (an `Agent`, tool `lookup_policy`) reports the fare policy's items.

Every model has its own `base_url` `/agent/<name>/v1` and an `httpx.Client`
on a `MockTransport` served by the run's `ChatProxy` (no socket); the proxy's
upstream is `policy.TeamPolicy`. Agno's telemetry is off (`telemetry=False`
and `AGNO_TELEMETRY=false`).

Determinism: one tool call per reply; tool-call ids are hashes of the request
(`agents_desk.wire`); the members see only the task the leader wrote (Agno's
default: no shared interactions or history). Each agent's tool calls are
bounded by its `tool_call_limit` (Agno's own count).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from faultlens.middleware.model.trace import Task

from .. import register
from ..agents_desk.wire import completion
from ..base import Runtime
from ..docs_team.calculator import calculate
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, quiet_loggers, team_agents, world_tasks
from ..tool_calling import ToolCallingTeam
from ..tool_steps import delegating_steps, tool_arguments
from ..workflow_team.env import WorkflowEndpoint
from .mistakes import MUTATORS
from .policy import DELEGATE, TeamPolicy
from .world import FAMILIES, FARES, answer_of, booking_text, make_task, policy_text

FRAMEWORK = "agno"
TOOL_CALL_LIMIT = 6  # Agno's count of tool calls per agent run (a seed run's coordinator makes 3 to 5)

DESCRIPTIONS = {
    "coordinator": "Leads the desk: plans, delegates to records and policy, computes with calculate and answers.",
    "records": "Looks up a booking and reports its fare class and the price paid.",
    "policy": "Looks up the fare policy of a fare class and reports the items asked for.",
}
INSTRUCTIONS = {
    "coordinator": ("You are the coordinator of the airline's service desk. Answer the customer's request under the "
                    "fare policy. First write a plan (the booking's figures, the policy items, the computation, the "
                    "answer), then delegate to records and to policy, compute the answer with calculate, and end with "
                    "a line 'ANSWER: <number>'."),
    "records": ("You are records. Look up the booking you are given with get_booking and report its fare class and "
                "the price paid, one line each: '<booking id> fare class: <class>' and '<booking id> paid: <euros>'."),
    "policy": ("You are policy. Look up the fare class you are given with lookup_policy and report each item you "
               "are asked for, one line each: '<fare class> <item>: <value>'."),
}

NOT_APPLICABLE = {
    **TEXT_ONLY_NOT_APPLICABLE,
    "V.3": "tool results come from the airline's records, its policy and the calculator inside the run (no recorded "
           "call to replace), and a tool error is answered by a retry",
    "A.6": "a repeated look-up, delegation or calculation gets the same answer and the agent moves on at its next "
           "reply, well within tool_call_limit: a repetition costs a call, never the task (0/4 kept in a 12-seed check)",
}


@register
class AirlineDesk(ToolCallingTeam):
    name = "airline_desk"
    stands_in_for = "airline service under fare policies (tau-bench airline)"
    framework: ClassVar[str | None] = FRAMEWORK
    requires: ClassVar[tuple[str, ...]] = ("agno",)
    topology = "multi"
    agents = team_agents(DESCRIPTIONS)
    description = ("An Agno Team (coordinate mode): a coordinator with a calculator delegates to a records agent "
                   "(get_booking) and a policy agent (lookup_policy): airline customer service under fare policies.")
    not_applicable = NOT_APPLICABLE
    instructions = INSTRUCTIONS
    team_policy = TeamPolicy
    rules = MUTATORS

    def tasks(self, seed: int, n: int) -> list[Task]:
        return world_tasks(self.name, seed, n, FAMILIES, make_task, answer_of)

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(FARES)]
        if task is not None:
            groups.append([b["id"] for b in task.metadata["world"]["bookings"]])
        return groups

    # -- the run --------------------------------------------------------------
    def program(self, task: Task, rt: Runtime) -> str | None:
        os.environ["AGNO_TELEMETRY"] = "false"  # Agno would post usage events
        with self.framework_imports("Agno"):
            from agno.agent import Agent
            from agno.models.openai.like import OpenAILike
            from agno.team import Team
            from agno.team.mode import TeamMode
        quiet_loggers("agno", "agno-team")
        endpoint = self.simulated_endpoint(rt, completion, WorkflowEndpoint)
        world = task.metadata["world"]
        bookings = {b["id"]: b for b in world["bookings"]}

        def get_booking(booking_id: str) -> str:
            """The airline's record of a booking: passenger, flight, fare class, price paid.

            Args:
                booking_id: the booking's id, e.g. BK-1234.
            """
            found = bookings.get(booking_id)
            return booking_text(found) if found else f"error: no booking {booking_id!r} (ids look like BK-1234)"

        def lookup_policy(fare_class: str) -> str:
            """The fare policy of a fare class: change fee, cancellation fee, free checked bags, extra bag price.

            Args:
                fare_class: basic, main or flex.
            """
            policy = world["policies"].get(fare_class)
            return policy_text(fare_class, policy) if policy else (f"error: no fare class {fare_class!r}; the classes "
                                                                    f"are {', '.join(FARES)}")

        def calculator(expression: str) -> str:
            """The value of an arithmetic expression (numbers, parentheses and + - * /).

            Args:
                expression: e.g. (3 - 1) * 40.
            """
            return calculate(expression)

        calculator.__name__ = "calculate"

        def model(agent: str) -> Any:
            return OpenAILike(id=rt.model, api_key="faultlens-sim", base_url=BASE_URL.format(agent=agent), max_retries=0,
                              http_client=endpoint.client())

        def member(name: str, tool: Any) -> Any:
            return Agent(id=name, name=name, role=DESCRIPTIONS[name], model=model(name), tools=[tool],
                         instructions=rt.system(name), tool_call_limit=TOOL_CALL_LIMIT, telemetry=False)

        # named as its leader: the Team is the leader agent (its spans carry this name)
        team = Team(id="coordinator", name="coordinator", mode=TeamMode.coordinate, model=model("coordinator"),
                    members=[member("records", get_booking), member("policy", lookup_policy)], tools=[calculator],
                    instructions=rt.system("coordinator"), tool_call_limit=TOOL_CALL_LIMIT, telemetry=False)
        try:
            result = team.run(task.query, session_id=task.id)
        except Exception:  # the framework ended the run, or a drift
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt)
        return _answer(result)

    def _steps(self, rt: Runtime) -> None:
        """One step per recorded call (a model reply), then the tool's result after a look-up or a calculation.

        A tool's output is the `role: "tool"` message of the agent's next request (Agno sends it back as is)."""
        outputs = {str(m.get("tool_call_id")): str(m.get("content")) for call in rt.session.calls
                   for m in call.request.get("messages") or [] if m.get("role") == "tool"}
        delegating_steps(rt, outputs, "coordinator", DELEGATE, _member_of)


def _member_of(tool_call: Any) -> str:
    return str(tool_arguments(((tool_call or {}).get("function") or {}).get("arguments")).get("member_id", ""))


def _answer(result: Any) -> str | None:
    """The leader's last reply when it called no tool (Agno's `content` joins every reply's text of the run)."""
    for message in reversed(list(getattr(result, "messages", None) or [])):
        if getattr(message, "role", None) == "assistant":
            return None if getattr(message, "tool_calls", None) else str(message.content or "")
    return None
