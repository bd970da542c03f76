"""The simulated supervisor, researcher and calculator of `supervisor_team`: functions of the request LangGraph sends.

Each agent reads the chat-completions request as `langchain-openai` sends it
(the whole shared message history: the user's question, the supervisor's
handoffs with their briefs, the workers' reports and LangGraph-supervisor's
"Transferring back" messages) and answers in the environments' action form
(`wire.render_call`), which `wire.completion` turns into a tool call.

Every agent acts a bounded number of times whatever it is told (the
supervisor briefs each kind of work once, the researcher looks each item up
at most twice, the calculator computes once), so an injected run ends.
"""

from __future__ import annotations

import json
from typing import Any

from ..agents_desk.wire import render_call
from ..base import stable_seed
from ..framework import message_text
from .world import COMPUTE_BRIEF, FIGURE, ITEMS, LOOKUP_BRIEF, PLAN_FORMULA, RESULT, read_question

HANDOFF = {"researcher": "transfer_to_researcher", "calculator": "transfer_to_calculator"}
LOOKUP_TOOL = {"unit prices": "lookup_price", "shipping costs": "lookup_shipping"}


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [c.get("function") or {} for c in message.get("tool_calls") or []]


def _own_results(messages: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(how many tool calls the agent made, the outputs of those that were answered) in `messages`, its own turns."""
    ids = [c.get("id") for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    return len(ids), [message_text(m.get("content")) for m in messages if m.get("role") == "tool" and m.get("tool_call_id") in ids]


def _handoffs(messages: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(index, tool name, content) of the supervisor's handoffs (its messages that call a `transfer_to_` tool)."""
    return [(i, fn.get("name", ""), message_text(m.get("content"))) for i, m in enumerate(messages)
            if m.get("role") == "assistant" for fn in _calls(m) if str(fn.get("name", "")).startswith("transfer_to_")]


def plan_text(items: list[str], formula: str) -> str:
    """The supervisor's plan and its brief to the researcher (the thought of its first handoff)."""
    return (f"Plan:\n1. researcher: look up the unit prices of {' and '.join(items)}.\n"
            f"2. calculator: compute {formula}.\n3. Answer with the calculator's result.\n"
            f"researcher, look up the unit prices of: {', '.join(items)}.")


def expression(formula: str, figures: dict[str, str]) -> str:
    """The formula with each item replaced by its reported figure (an item with none stays a name)."""
    for item, figure in figures.items():
        formula = formula.replace(item, figure)
    return formula


class SupervisorPolicy:
    """The three simulated agents; `respond(agent, request, sim)` is the in-process endpoint's upstream."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages = [m for m in request.get("messages") or [] if m.get("role") != "system"]
        if agent == "supervisor":
            return self.supervisor(messages)
        if agent == "researcher":
            return self.researcher(messages, sim)
        if agent == "calculator":
            return self.calculator(messages)
        raise ValueError(f"supervisor_team: no simulated agent {agent!r}")

    @staticmethod
    def supervisor(messages: list[dict[str, Any]]) -> str:
        question = message_text(messages[0].get("content")) if messages else ""
        handoffs = _handoffs(messages)
        if not handoffs:
            items, formula = read_question(question)
            return render_call(HANDOFF["researcher"], {}, plan_text(items, formula))
        plan = handoffs[0][2]
        planned = PLAN_FORMULA.search(plan)
        formula = planned.group(1) if planned else read_question(question)[1]
        briefs = [content for _, _, content in handoffs]
        reports = [(m.get("name"), message_text(m.get("content"))) for m in messages[handoffs[0][0]:]
                   if m.get("role") == "assistant" and not m.get("tool_calls") and m.get("name") != "supervisor"]
        if not any(COMPUTE_BRIEF.search(b) for b in briefs):
            # the figures come from the researcher's reports; the plan's formula says how to combine them
            figures: dict[str, str] = {}
            for name, text in reports:
                if name == "researcher":
                    figures.update(FIGURE.findall(text))
            expr = expression(formula, figures)
            return render_call(HANDOFF["calculator"], {}, f"The researcher has reported the figures.\ncalculator, compute: {expr}.")
        results = [RESULT.findall(text) for name, text in reports if name == "calculator"]
        value = next((r[-1] for r in reversed(results) if r), None)
        if value is None:
            return "The calculator gave no result.\nANSWER: unknown"
        return f"The calculator reports {value}.\nANSWER: {value}"

    @staticmethod
    def researcher(messages: list[dict[str, Any]], sim: dict[str, Any]) -> str:
        start = max((i for i, name, _ in _handoffs(messages) if name == HANDOFF["researcher"]), default=-1)
        brief = message_text(messages[start].get("content")) if start >= 0 else ""
        asked = LOOKUP_BRIEF.search(brief)
        if asked is None:
            return "I have no items to look up in this request."
        question = message_text(messages[0].get("content")) if messages else ""
        what, items = asked.group(1), [i.strip() for i in asked.group(2).split(",") if i.strip()]
        calls, results = _own_results(messages[start + 1:])
        # The k-th look-up that found an item is the k-th item of the brief (the researcher trusts its own calls).
        found = [r for r in results if FIGURE.search(r.replace(":", ""))]
        if len(found) < len(items) and calls < 2 * len(items):
            item = items[len(found)]
            noise = float(sim.get("noise", 0.0))
            # a recovered mistake: the first look-up of an item uses the plural of the question ("widgets")
            plural = (noise > 0 and len(results) == len(found) and item in ITEMS
                      and stable_seed(sim.get("seed", 0), "plural", question, item, len(found)) % 10_000 / 10_000 < noise)
            return render_call(LOOKUP_TOOL[what], {"item": item + "s" if plural else item},
                               f"I look up the {'unit price' if what == 'unit prices' else 'shipping cost'} of {item}.")
        figures = [FIGURE.search(r.replace(":", "")) for r in found]
        label = "Unit prices" if what == "unit prices" else "Shipping costs"
        listed = ", ".join(f"{item} ${m.group(2)}" for item, m in zip(items, figures) if m)
        return f"{label}: {listed}."

    @staticmethod
    def calculator(messages: list[dict[str, Any]]) -> str:
        start = max((i for i, name, _ in _handoffs(messages) if name == HANDOFF["calculator"]), default=-1)
        brief = message_text(messages[start].get("content")) if start >= 0 else ""
        asked = COMPUTE_BRIEF.search(brief)
        if asked is None:
            return "There is no expression in the request to compute."
        expr = asked.group(1)
        if "researcher's report" in expr:
            # told to work from the researcher's report, it adds up the figures the report gives
            report = next((message_text(m.get("content")) for m in reversed(messages[:start])
                           if m.get("role") == "assistant" and m.get("name") == "researcher" and not m.get("tool_calls")), "")
            expr = " + ".join(f for _, f in FIGURE.findall(report)) or "0"
        calls, results = _own_results(messages[start + 1:])
        if not calls:
            return render_call("calculate", {"expression": expr}, "I evaluate the expression.")
        last = results[-1] if results else "no output"
        if " = " not in last or last.startswith("cannot"):
            return f"I could not compute it: {last}"
        return f"Result: {last.rsplit(' = ', 1)[1]}"


def tool_arguments(text: str) -> dict[str, Any] | None:
    """The JSON arguments of an action text's call, or None."""
    from ..base import parse_action

    action = parse_action(text)
    if action is None:
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return args if isinstance(args, dict) else None
