"""The simulated agents of `docs_team`: functions of the chat request Haystack's `Agent` sends.

Each agent's request holds its own conversation: the system prompt, its
user message (the question for the lead; the lead's `messages` argument for
the researcher, whom the lead calls as a tool), and its earlier turns with
their `tool_calls` and `role: "tool"` results. A competent team:

- **lead** plans (its first reply's text: the figures to find, the
  computation, the answer) and calls the `researcher` tool with the list of
  figures; it follows its plan: it asks again for a figure the report lacks,
  has `calculate` work out the plan's computation on the reported figures,
  and answers with the result on an `ANSWER:` line;
- **researcher** searches the reports (`search_reports`) once per figure, in
  the order asked, takes from each search's results the report its query
  names, reads the figure from it and reports one line per figure.

Recovered mistakes (rate `noise`): the researcher's first search for a
figure leaves out the year (both years' reports come back, so it searches
again with the year), and the lead writes its first subtraction with a
typographic minus (`calculate` refuses it and the lead writes it again).
"""

from __future__ import annotations

import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn
from .world import OPERATIONS, Item, read_figure

AGENTS = ("lead", "researcher")
DELEGATE = "researcher"  # the lead's tool that runs the researcher agent
_ITEM = re.compile(r"^- (\w+), (\d{4}), (\w+)$", re.M)
_QUERY = re.compile(r"(\w+) annual report (\d{4})")
_RESULT = re.compile(r"^\[(\S+)\] (.+)$", re.M)
REPORT_LINE = re.compile(r"^(\w+) (\d{4}) (\w+): (\d+) \((\S+)\)$", re.M)
# The plan's computation: `2. calculate: <Company> <year> <metric> minus|plus <Company> <year> <metric>`.
PLAN_OP = re.compile(r"^2\. calculate: (\w+) (\d{4}) (\w+) (minus|plus) (\w+) (\d{4}) (\w+)$", re.M)
TYPO_MINUS = "\u2212"


class Call(wire.Call):
    errors = ("error", "Failed to invoke")


def history(messages: list[dict[str, Any]]) -> list[Call]:
    return wire.history(messages, Call)


def task_text(items: list[Item]) -> str:
    """What the lead asks the researcher: the figures, one line each, and the form of the report."""
    return ("Find these figures in the annual reports:\n" + "\n".join(i.line() for i in items) +
            "\nReport one line per figure: '<company> <year> <metric>: <value> (<report id>)'.")


def delegation(items: list[Item], thought: str) -> str:
    """The lead's call of the researcher tool (Haystack's agent-as-tool takes a list of chat messages)."""
    return render_call(DELEGATE, {"messages": [{"role": "user", "content": [{"text": task_text(items)}]}]}, thought)


def read_items(text: str) -> list[Item]:
    return [Item(c, int(y), m) for c, y, m in _ITEM.findall(text)]


def read_question(text: str) -> tuple[list[Item], str] | None:
    """The figures a question needs and its operation (the lead's reading of it)."""
    m = re.search(r"how many more employees did (\w+) have than (\w+)", text)
    if m:
        return [Item(m.group(1), 2025, "headcount"), Item(m.group(2), 2025, "headcount")], "minus"
    m = re.search(r"combined revenue of (\w+) and (\w+) in 2025", text)
    if m:
        return [Item(m.group(1), 2025, "revenue"), Item(m.group(2), 2025, "revenue")], "plus"
    m = re.search(r"did (\w+)'s revenue grow from 2024 to 2025", text)
    if m:
        return [Item(m.group(1), 2025, "revenue"), Item(m.group(1), 2024, "revenue")], "minus"
    return None


def plan_text(items: list[Item], op: str) -> str:
    a, b = (f"{i.company} {i.year} {i.metric}" for i in items[:2])
    return "\n".join(["Plan:", f"1. researcher: find {' and '.join(f'{i.company} {i.year} {i.metric}' for i in items)}",
                      f"2. calculate: {OPERATIONS[op][0].format(a=a, b=b)}", "3. answer with the result"])


def read_plan(text: str) -> tuple[list[Item], str] | None:
    m = PLAN_OP.search(text)
    if m is None:
        return None
    return [Item(m.group(1), int(m.group(2)), m.group(3)), Item(m.group(5), int(m.group(6)), m.group(7))], m.group(4)


def figures_of(delegations: list[Call]) -> dict[tuple[str, int], int]:
    """The figures the researcher reported, by (company, year), as the lead reads them: it checks a line's company
    and year, and takes the figure as the one it asked for (a later report wins)."""
    out: dict[tuple[str, int], int] = {}
    for call in delegations:
        if call.ok and call.result:
            for company, year, _, value, _ in REPORT_LINE.findall(call.result):
                out[(company, int(year))] = int(value)
    return out


def expression(op: str, values: list[int], minus: str = "-") -> str:
    a, b = values
    return OPERATIONS[op][1].format(a=a, b=b).replace("-", minus)


class TeamPolicy:
    """The simulated lead and researcher: `respond(agent, request, sim) -> text` (an action, or a message)."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls = history(messages)
        if agent == "lead":
            return self.lead(user, calls, chance)
        if agent == "researcher":
            return self.researcher(read_items(user), calls, chance)
        raise ValueError(f"docs_team: no simulated agent {agent!r}")

    # -- lead ---------------------------------------------------------------------
    @staticmethod
    def lead(question: str, calls: list[Call], chance) -> str:
        asked = read_question(question)
        if asked is None:
            return "I cannot tell which figures the question asks about."
        delegations = [c for c in calls if c.tool == DELEGATE]
        if not delegations:
            items, op = asked
            return delegation(items, plan_text(items, op) + "\nI ask the researcher for the figures first.")
        planned = read_plan(delegations[0].thought) or asked  # the plan, once made, is what the lead follows
        items, op = planned
        figures = figures_of(delegations)
        missing = [i for i in items if (i.company, i.year) not in figures]
        if missing:
            if len(delegations) >= 3:
                return f"I could not get {', '.join(f'{i.company} {i.year} {i.metric}' for i in missing)} from the reports."
            return delegation(missing, f"The report lacks {len(missing)} figure(s) my plan needs; I ask again.")
        values = [figures[(i.company, i.year)] for i in items]
        calcs = [c for c in calls if c.tool == "calculate"]
        if not calcs or (not calcs[-1].ok and len(calcs) < 3):
            typo = not calcs and op == "minus" and chance("typographic-minus")
            expr = expression(op, values, TYPO_MINUS if typo else "-")
            return render_call("calculate", {"expression": expr}, f"Step 2 of the plan: {expr}.")
        if not calcs[-1].ok:
            return f"I could not compute the answer: {calcs[-1].result}"
        a, b = (f"{i.company} {i.year} {i.metric}" for i in items)
        done = OPERATIONS[op][0].format(a=f"{a} ({values[0]})", b=f"{b} ({values[1]})")
        return f"From the reports: {done} = {calcs[-1].result}.\nANSWER: {calcs[-1].result}"

    # -- researcher ---------------------------------------------------------------
    @staticmethod
    def researcher(items: list[Item], calls: list[Call], chance) -> str:
        if not items:
            return "The request names no figure to find."
        searches = [c for c in calls if c.tool == "search_reports"]
        lines, pointer = [], 0
        for item in items:
            found: tuple[str, str] | None = None
            tries = 0
            while pointer < len(searches) and found is None:
                search = searches[pointer]
                pointer += 1
                tries += 1
                named = _QUERY.search(str(search.args.get("query", "")))
                if named is None:  # a query without the year: both years' reports come back, search again
                    continue
                # the report its query names (the researcher trusts its own query)
                docs = {i: text for i, text in _RESULT.findall(search.result or "")}
                want = f"{named.group(1)} annual report {named.group(2)}"
                found = next(((i, t) for i, t in docs.items() if t.startswith(want)), None) or ("", "")
            if found is None:
                if tries >= 3:
                    return f"I could not find the report of {item.company} {item.year}."
                vague = tries == 0 and chance("vague-query")
                query = f"{item.company} annual report" if vague else f"{item.company} annual report {item.year}"
                return render_call("search_reports", {"query": query}, f"Searching for {item.company}'s {item.year} report.")
            ident, text = found
            value = read_figure(text, item.metric) if text else None
            if value is None:
                return f"I could not find {item.company}'s {item.year} {item.metric} in the reports."
            lines.append(f"{item.company} {item.year} {item.metric}: {value} ({ident})")
        return "\n".join(lines)
