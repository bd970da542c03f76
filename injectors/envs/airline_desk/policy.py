"""The simulated agents of `airline_desk`: functions of the chat request Agno's team leader and members send.

Each agent's request holds its own conversation: Agno's system message, its
user message (the customer's request for the coordinator, the task the
coordinator delegated for a member) and its earlier turns with their
`tool_calls` and `role: "tool"` results. A competent team:

- **coordinator** (the team leader) plans (its first reply's text: the
  booking's figures to find, the policy items, the computation, the answer),
  delegates to `records` the booking's fare class and price, then to `policy`
  the items its plan needs for that fare class, has `calculate` work out the
  plan's formula and answers with the result on an `ANSWER:` line. It reads
  the records' lines by their item, and the policy's lines in the order it
  asked for the plan's items; it asks a member again for what a report lacks;
- **records** looks the booking up (`get_booking`) and reports its fare
  class and the price paid, for the booking it looked up;
- **policy** looks the fare class up (`lookup_policy`) and reports the items
  asked, one line each, from the policy it looked up.

Recovered mistakes (rate `noise`): the records agent's first look-up writes
the booking id in lower case (the tool refuses it; it looks again), and the
coordinator writes its first calculation with a typographic minus
(`calculate` refuses it; it writes it again).
"""

from __future__ import annotations

import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn
from .world import FORMULAS, POLICY_ITEMS, evaluate_formula, read_booking, read_policy

AGENTS = ("coordinator", "records", "policy")
DELEGATE = "delegate_task_to_member"  # Agno's team-leader tool (coordinate mode)
MEMBERS = ("records", "policy")
_BOOKING_ID = re.compile(r"\bBK-\d{4}\b")
_QUESTION_FARE = re.compile(r"whose fare is €(\d+)")
_QUESTION_BAGS = re.compile(r"check (\d+) bags in total")
POLICY_TASK = re.compile(r"fare policy of the (\w+) fare class")
_ASKED_ITEM = re.compile(r"^- (change fee|cancellation fee|free bags|extra bag)$", re.M)
REPORT_LINE = re.compile(r"^(\S+) (fare class|paid|change fee|cancellation fee|free bags|extra bag): (\S+)$", re.M)
# The plan's computation: `3. calculate: <formula>` over named quantities.
PLAN_FORMULA = re.compile(r"^3\. calculate: (.+)$", re.M)
TYPO_MINUS = "\u2212"


class Call(wire.Call):
    errors = ("error",)


def history(messages: list[dict[str, Any]]) -> list[Call]:
    return wire.history(messages, Call)


def family_of(question: str) -> str | None:
    if "wants to cancel" in question:
        return "cancel_refund"
    if "wants to move to flight" in question:
        return "change_cost"
    if "bags in total" in question:
        return "bag_fee"
    return None


def records_task(booking: str) -> str:
    return (f"Look up booking {booking} and report its fare class and the price paid, one line each: "
            f"'{booking} fare class: <class>' and '{booking} paid: <euros>'.")


def policy_task(fare: str, items: list[str]) -> str:
    return (f"Look up the fare policy of the {fare} fare class and report these items, one line each as "
            f"'<fare class> <item>: <value>':\n" + "\n".join(f"- {i}" for i in items))


def delegation(member: str, task: str, thought: str) -> str:
    return render_call(DELEGATE, {"member_id": member, "task": task}, thought)


def policy_items(formula: str) -> list[str]:
    """The policy items a formula names, in the order it names them."""
    return sorted((i for i in POLICY_ITEMS if re.search(rf"\b{i}\b", formula)), key=formula.index)


def plan_text(booking: str, formula: str) -> str:
    return "\n".join(["Plan:", f"1. records: find booking {booking}'s fare class and paid",
                      f"2. policy: find the fare class's {' and '.join(policy_items(formula))}",
                      f"3. calculate: {formula}", "4. answer with the result"])


def reported(call: Call) -> list[tuple[str, str, str]]:
    return REPORT_LINE.findall(call.result or "") if call.ok else []


class TeamPolicy:
    """The simulated coordinator, records and policy agents: `respond(agent, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls = history(messages)
        if agent == "coordinator":
            return self.coordinator(user, calls, chance)
        if agent == "records":
            return self.records(user, calls, chance)
        if agent == "policy":
            return self.policy(user, calls)
        raise ValueError(f"airline_desk: no simulated agent {agent!r}")

    # -- coordinator ------------------------------------------------------------------
    @staticmethod
    def coordinator(question: str, calls: list[Call], chance) -> str:
        family, booking = family_of(question), _BOOKING_ID.search(question)
        if family is None or booking is None:
            return "I cannot tell which booking or which request this is."
        delegations = [c for c in calls if c.tool == DELEGATE]
        if not delegations:
            return delegation("records", records_task(booking.group(0)),
                              plan_text(booking.group(0), FORMULAS[family]) + "\nI ask records for the booking first.")
        plan = PLAN_FORMULA.search(delegations[0].thought)
        formula = plan.group(1) if plan else FORMULAS[family]  # the plan, once made, is what the coordinator follows
        to_records = [c for c in delegations if c.args.get("member_id") == "records"]
        booking_lines = {item: value for c in to_records for _, item, value in reported(c)}
        missing = [i for i in ("fare class", "paid") if i not in booking_lines]
        if missing:
            if len(to_records) >= 3:
                return f"I could not get the booking's {' and '.join(missing)} from records."
            return delegation("records", records_task(booking.group(0)), "The records report lacks what my plan needs; I ask again.")
        items = policy_items(formula)
        to_policy = [c for c in delegations if c.args.get("member_id") == "policy"]
        lines = next((reported(c) for c in reversed(to_policy) if reported(c)), [])
        if len(lines) < len(items):
            if len(to_policy) >= 3:
                return "I could not get the fare policy from the policy agent."
            fare = booking_lines["fare class"]
            return delegation("policy", policy_task(fare, items), f"The booking is in the {fare} fare class; I ask policy "
                              f"for its {' and '.join(items)}.")
        values: dict[str, str] = {"paid": booking_lines["paid"], **{i: v for i, (_, _, v) in zip(items, lines)}}
        asked = _QUESTION_FARE.search(question) or _QUESTION_BAGS.search(question)
        if asked:
            values["new fare" if family == "change_cost" else "bags"] = asked.group(1)
        calcs = [c for c in calls if c.tool == "calculate"]
        if not calcs or (not calcs[-1].ok and len(calcs) < 3):
            expr = evaluate_formula(formula, {k: int(v) if v.isdigit() else 0 for k, v in values.items()})
            if not calcs and "-" in expr and chance("typographic-minus"):
                expr = expr.replace("-", TYPO_MINUS)
            return render_call("calculate", {"expression": expr}, f"Step 3 of the plan: {expr}.")
        if not calcs[-1].ok:
            return f"I could not compute the answer: {calcs[-1].result}"
        expr = str(calcs[-1].args.get("expression", ""))
        return f"Under the fare policy: {expr} = {calcs[-1].result}.\nANSWER: {calcs[-1].result}"

    # -- records ------------------------------------------------------------------------
    @staticmethod
    def records(task: str, calls: list[Call], chance) -> str:
        wanted = _BOOKING_ID.search(task)
        if wanted is None:
            return "The task names no booking to look up."
        lookups = [c for c in calls if c.tool == "get_booking"]
        if not lookups or (not lookups[-1].ok and len(lookups) < 3):
            sloppy = not lookups and chance("lower-case-id")
            booking = wanted.group(0).lower() if sloppy else wanted.group(0)
            return render_call("get_booking", {"booking_id": booking})
        last = lookups[-1]
        found = read_booking(last.result or "") if last.ok else None
        if found is None:
            return f"I could not look up booking {wanted.group(0)}: {last.result}"
        booking = str(last.args.get("booking_id", wanted.group(0)))  # the booking it looked up
        return f"{booking} fare class: {found['fare class']}\n{booking} paid: {found['paid']}"

    # -- policy -------------------------------------------------------------------------
    @staticmethod
    def policy(task: str, calls: list[Call]) -> str:
        fare, items = POLICY_TASK.search(task), _ASKED_ITEM.findall(task)
        if fare is None or not items:
            return "The task names no fare class or no policy item."
        lookups = [c for c in calls if c.tool == "lookup_policy"]
        if not lookups or (not lookups[-1].ok and len(lookups) < 3):
            return render_call("lookup_policy", {"fare_class": fare.group(1)})
        last = lookups[-1]
        table = read_policy(last.result or "") if last.ok else {}
        if not table:
            return f"I could not look up the {fare.group(1)} fare policy: {last.result}"
        looked = str(last.args.get("fare_class", fare.group(1)))  # the fare class it looked up
        return "\n".join(f"{looked} {i}: {table[i]}" for i in items if i in table)
