"""The simulated agents of `search_crew`: functions of the chat request CrewAI's manager and workers send.

Each agent's request holds its own conversation: CrewAI's system message
(`You are <role>. <backstory>`), its user message (`Current Task: ...`: the
question for the manager, the task the manager delegated for a worker, with
its context) and its earlier turns with their `tool_calls` and `role: "tool"`
results. CrewAI sends an assistant turn that called a tool back with no text,
so what an agent must remember travels in the tool arguments. A competent crew:

- **manager** plans (the figures to find, the computation, the answer) and
  puts the plan in the context of its first delegation; it follows that plan:
  it delegates each figure of its plan to `searcher`, one at a time, reads
  each answered delegation's figure in the order of its plan, delegates its plan's computation to `analyst` and
  answers with the analyst's result on an `ANSWER:` line. It asks again for a
  figure a report lacks;
- **searcher** searches the web for the landmark (`web_search`), opens the
  result whose title is exactly the landmark's name (`open_page`) and reports
  the figure asked for from the page it opened;
- **analyst** computes the expression it is given (`calculate`) and reports
  the result.

Recovered mistakes (rate `noise`): the searcher's first `open_page` writes the
URL in lower case (the page is not found; it opens it again), and the
analyst writes its first calculation with a typographic minus (`calculate`
refuses it; it writes it again).
"""

from __future__ import annotations

import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn
from .world import FIGURES, evaluate_formula, formula, parse_question, read_page, results

AGENTS = ("manager", "searcher", "analyst")
DELEGATE = "delegate_work_to_coworker"  # CrewAI's delegation tool, as its function is named
WORKERS = ("searcher", "analyst")
_FIGURE = "|".join(re.escape(f) for f in FIGURES)
SEARCH_TASK = re.compile(rf"Find the '({_FIGURE})' figure of the (.+?): search the web")
COMPUTE_TASK = re.compile(r"Compute (.+) with calculate")
# A worker's report: `<landmark> <figure>: <n>` from the searcher, `result: <n>` from the analyst.
REPORT_LINE = re.compile(rf"^(.+?) ({_FIGURE}): (-?\d+)$", re.M)
RESULT = re.compile(r"^result: (-?[\d.]+)$", re.M)
PLAN_FORMULA = re.compile(r"^\d+\. analyst: (.+)$", re.M)
PLAN_SEARCH = re.compile(r"^\d+\. searcher: (.+)$", re.M)
_CURRENT = re.compile(r"Current Task: (.+)")
TYPO_MINUS = "\u2212"
TRIES = 3  # asks, searches or opens of one thing before an agent gives up


class Call(wire.Call):
    errors = ("error", "No results")


def history(messages: list[dict[str, Any]]) -> list[Call]:
    return wire.history(messages, Call)


def current_task(user: str) -> str:
    """The task CrewAI put in the user message (`Current Task: ...`)."""
    m = _CURRENT.search(user)
    return m.group(1).strip() if m else user


def search_task(name: str, figure: str) -> str:
    return f"Find the '{figure}' figure of the {name}: search the web, open its page and report the figure as '{name} {figure}: <number>'."


def compute_task(expression: str) -> str:
    return f"Compute {expression} with calculate and report the result as 'result: <number>'."


def plan_text(facts: list[tuple[str, str]], computation: str, question: str) -> str:
    return "\n".join(["Plan:", f"1. searcher: {facts[0][0]} {facts[0][1]}", f"2. searcher: {facts[1][0]} {facts[1][1]}",
                      f"3. analyst: {computation}", "4. answer with the result", f"Question: {question}"])


def delegation(coworker: str, task: str, context: str, thought: str = "") -> str:
    return render_call(DELEGATE, {"task": task, "context": context, "coworker": coworker}, thought)


def planned_facts(context: str, names: list[str]) -> list[tuple[str, str]]:
    """The (landmark, figure) steps of a plan, in its order (a step naming none of the question's landmarks is left
    out); [] when the context holds no plan."""
    out = []
    for m in PLAN_SEARCH.finditer(context):
        name = next((n for n in sorted(names, key=len, reverse=True) if m.group(1).startswith(n + " ")), None)
        if name is not None:
            out.append((name, m.group(1)[len(name) + 1:].strip()))
    return out


def report_value(call: Call) -> str | None:
    """The figure a searcher's report gives (its first report line), or None."""
    m = REPORT_LINE.search(call.result or "") if call.result is not None else None
    return m.group(3) if m else None


class CrewPolicy:
    """The simulated manager, searcher and analyst: `respond(agent, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls, task = history(messages), current_task(user)
        if agent == "manager":
            return self.manager(task, calls)
        if agent == "searcher":
            return self.searcher(task, calls, chance)
        if agent == "analyst":
            return self.analyst(task, calls, chance)
        raise ValueError(f"search_crew: no simulated agent {agent!r}")

    # -- manager --------------------------------------------------------------------
    @staticmethod
    def manager(question: str, calls: list[Call]) -> str:
        parsed = parse_question(question)
        if parsed is None:
            return "I cannot tell which figures this question needs."
        family, facts, adults = parsed
        delegations = [c for c in calls if c.tool == DELEGATE]
        if not delegations:
            plan = plan_text(facts, formula(family, facts, adults), question)
            return delegation("searcher", search_task(*facts[0]), plan, "I start with the first figure of my plan.")
        plan = str(delegations[0].args.get("context", ""))
        plan_formula = PLAN_FORMULA.search(plan)
        computation = plan_formula.group(1) if plan_formula else formula(family, facts, adults)  # the plan is followed
        facts = planned_facts(plan, [name for name, _ in facts]) or facts  # its figures too, in its order
        to_searcher = [c for c in delegations if c.args.get("coworker") == "searcher"]
        found = [v for v in (report_value(c) for c in to_searcher) if v is not None]  # in the order of the plan
        if len(found) < len(facts):
            if len(to_searcher) >= TRIES + len(found):
                return f"The searcher could not find {' '.join(facts[len(found)])}."
            name, figure = facts[len(found)]
            return delegation("searcher", search_task(name, figure), f"Part of answering: {question}",
                              f"Next: {name} {figure}.")
        values = {f"{name} {figure}": int(v) for (name, figure), v in zip(facts, found)}
        expression = evaluate_formula(computation, values)
        to_analyst = [c for c in delegations if c.args.get("coworker") == "analyst"]
        result = next((m.group(1) for c in reversed(to_analyst) for m in [RESULT.search(c.result or "")] if m), None)
        if result is None:
            if len(to_analyst) >= TRIES:
                return "The analyst could not compute the answer."
            figures = "; ".join(f"{k}: {v}" for k, v in values.items())
            return delegation("analyst", compute_task(expression), f"The figures found: {figures}.",
                              "Both figures are in; the analyst computes step 3 of my plan.")
        return f"From the figures on the web: {expression} = {result}.\nANSWER: {result}"

    # -- searcher -------------------------------------------------------------------
    @staticmethod
    def searcher(task: str, calls: list[Call], chance) -> str:
        asked = SEARCH_TASK.search(task)
        if asked is None:
            return "The task names no landmark and figure to find."
        figure, name = asked.groups()
        searches = [c for c in calls if c.tool == "web_search"]
        hits = [url for title, url in results(searches[-1].result or "") if title == name] if searches and searches[-1].ok else []
        if not hits:
            if len(searches) >= TRIES:
                return f"I found no page for the {name}."
            return render_call("web_search", {"query": name})
        opens = [c for c in calls if c.tool == "open_page" and c.position > searches[-1].position]
        if not opens or (not opens[-1].ok and len(opens) < TRIES):
            url = hits[0].lower() if not opens and chance("lower-case-url") else hits[0]
            return render_call("open_page", {"url": url})
        page = read_page(opens[-1].result or "") if opens[-1].ok else {}
        if figure not in page:
            return f"The page I opened does not state the {name}'s '{figure}' figure."
        return f"{name} {figure}: {page[figure]}"

    # -- analyst --------------------------------------------------------------------
    @staticmethod
    def analyst(task: str, calls: list[Call], chance) -> str:
        asked = COMPUTE_TASK.search(task)
        if asked is None:
            return "The task gives no expression to compute."
        expression = asked.group(1)
        calcs = [c for c in calls if c.tool == "calculate"]
        if not calcs or (not calcs[-1].ok and len(calcs) < TRIES):
            if not calcs and "-" in expression and chance("typographic-minus"):
                expression = expression.replace("-", TYPO_MINUS)
            return render_call("calculate", {"expression": expression}, f"Computing {expression}.")
        if not calcs[-1].ok:
            return f"I could not compute it: {calcs[-1].result}"
        return f"{calcs[-1].args.get('expression', expression)} = {calcs[-1].result}\nresult: {calcs[-1].result}"
