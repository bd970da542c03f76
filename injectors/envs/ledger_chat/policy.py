"""The simulated agents of `ledger_chat`: functions of the chat request Semantic Kernel's `ChatCompletionAgent`s send.

Each agent's request holds its own thread: its instructions (the system
message), the question (the user message), the other agents' messages of the
group chat (assistant messages, as SK's group chat hands them on), and its own
earlier turns with their `tool_calls` and `role: "tool"` results. The agents
tell the group chat's messages apart by how each begins (`Plan:`, `Report:`,
`REVISE:`, `APPROVED:`). A competent team:

- **analyst** plans first (a turn of its own: the two figures A and B as
  `query_ledger` filters, the family's formula, the rounding asked), then
  carries out its latest plan: one `query_ledger` call per figure, `calculate`
  on the plan's formula with the figures' values, and a report (each figure
  named as its plan names it, the computation, `Result:` rounded as planned).
  Sent back with a rounding instruction it rounds its last result as told; sent
  back for anything else it plans again from the question;
- **reviewer** checks the latest report against the question: it has a
  `Result:` line, its figures name every department, quarter and category the
  question names, and the result has the decimals the question asks. It sends
  the report back (`REVISE: ...`) or approves it (`APPROVED: ... reporter,
  please report the result: <value>`); it does not recompute the data;
- **reporter** answers with the value the reviewer's approval gives it.

Recovered mistakes (rate `noise`): the analyst's first query of a run names
the department in lower case (`query_ledger` refuses it; it queries again),
and its first report leaves the calculator's two decimals where the question
asks fewer (the reviewer sends it back to be rounded).
"""

from __future__ import annotations

import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn, message_text
from .world import (ALL, CATEGORIES, DEPARTMENTS, FORMULAS, QUARTERS, decimals_of, evaluate_formula, figure,
                    figure_label, figures_of, read_label, read_query, rounded)

AGENTS = ("analyst", "reviewer", "reporter")
# SK names a plugin's function `<plugin>-<function>` in the tools it sends (and calls it by that name)
QUERY, CALCULATE = "ledger-query_ledger", "ledger-calculate"
PLAN_FIGURE = re.compile(r"^([12])\. query_ledger: (.+) -> ([AB])$", re.M)
PLAN_FORMULA = re.compile(r"^3\. calculate: (.+)$", re.M)
PLAN_ROUNDING = re.compile(r"^4\. round the result to (\d) decimal places? and report it$", re.M)
REPORT_FIGURE = re.compile(r"^- ([AB]) = (.+): (-?\d+(?:\.\d+)?)$", re.M)
REPORT_COMPUTATION = re.compile(r"^- Computation: (.+) = (-?\d+(?:\.\d+)?)$", re.M)
RESULT = re.compile(r"^Result: (-?\d+(?:\.\d+)?)$", re.M)
APPROVED_VALUE = re.compile(r"reporter, please report the result: (-?\d+(?:\.\d+)?)\.?$", re.M)
ROUND_TO = re.compile(r"round the result to (\d) decimal places?")
_ASKED = {"the nearest whole number": 0, "1 decimal place": 1, "2 decimal places": 2}


class Call(wire.Call):
    errors = ("error",)


def asked_decimals(question: str) -> int:
    m = re.search(r"Round to (the nearest whole number|1 decimal place|2 decimal places)\.", question)
    return _ASKED[m.group(1)] if m else 2


def family_of(question: str) -> str | None:
    for family, marker in (("share", "What percentage of the company's"), ("growth", "By what percentage did"),
                           ("gap", "how many euros more did"), ("per_txn", "average amount per transaction")):
        if marker in question:
            return family
    return None


def read_question(question: str) -> dict[str, Any] | None:
    """The question's fields as the agents read them off its text (the order the text names them)."""
    family = family_of(question)
    if family is None:
        return None
    named = lambda pool: sorted((v for v in pool if re.search(rf"\b{v}\b", question)), key=question.index)  # noqa: E731
    departments, quarters, categories = named(DEPARTMENTS), named(QUARTERS), named(CATEGORIES)
    q: dict[str, Any] = {"family": family, "decimals": asked_decimals(question)}
    if departments:
        q["department"] = departments[0]
    if len(departments) > 1:
        q["department2"] = departments[1]
    if quarters:
        q["quarter"] = quarters[0]
    if len(quarters) > 1:
        q["quarter2"] = quarters[1]
    if categories:
        q["category"] = categories[0]
    return q


def named_in(question: str) -> list[str]:
    """The filter values a question names (what the reviewer wants the report's figures to cover)."""
    return [v for v in (*DEPARTMENTS, *QUARTERS, *CATEGORIES) if re.search(rf"\b{v}\b", question)]


def plan_text(q: dict[str, Any]) -> str:
    a, b = figures_of(q)
    return "\n".join(["Plan:", f"1. query_ledger: {figure_label(a)} -> A", f"2. query_ledger: {figure_label(b)} -> B",
                      f"3. calculate: {FORMULAS[q['family']]}",
                      f"4. round the result to {q['decimals']} decimal place{'' if q['decimals'] == 1 else 's'} and report it"])


def report_text(figures: list[tuple[str, str, str]], expression: str, computed: str, result: str) -> str:
    lines = ["Report:", *(f"- {name} = {label}: {value}" for name, label, value in figures),
             f"- Computation: {expression} = {computed}", f"Result: {result}"]
    return "\n".join(lines)


def query_call(f: dict[str, str], lower: bool = False) -> str:
    department = f["department"].lower() if lower and f["department"] != ALL else f["department"]
    return render_call(QUERY, {"metric": f["metric"], "department": department, "quarter": f["quarter"],
                               "category": f["category"]})


class TeamPolicy:
    """The simulated analyst, reviewer and reporter: `respond(agent, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, question, chance = chat_turn(agent, request, sim)
        if agent == "analyst":
            return self.analyst(question, messages, chance)
        if agent == "reviewer":
            return self.reviewer(question, messages)
        if agent == "reporter":
            return self.reporter(messages)
        raise ValueError(f"ledger_chat: no simulated agent {agent!r}")

    # -- analyst ---------------------------------------------------------------------------------------
    def analyst(self, question: str, messages: list[dict[str, Any]], chance) -> str:
        q = read_question(question)
        if q is None:
            return "I cannot tell which figures this question needs."
        texts = [(i, message_text(m.get("content"))) for i, m in enumerate(messages) if m.get("role") == "assistant"]
        last = {kind: max((i for i, t in texts if t.startswith(kind)), default=-1) for kind in ("Plan:", "Report:", "REVISE:")}
        if last["REVISE:"] > max(last["Plan:"], last["Report:"]) and last["Report:"] >= 0:
            told = ROUND_TO.search(dict(texts)[last["REVISE:"]])
            report = dict(texts)[last["Report:"]]
            current = RESULT.search(report)
            if told and current:  # re-round the last result as the reviewer says
                return report.replace(current.group(0), f"Result: {rounded(current.group(1), int(told.group(1)))}")
            return plan_text(q)
        if last["Plan:"] < 0:
            return plan_text(q)
        if last["Report:"] > last["Plan:"]:
            return dict(texts)[last["Report:"]]  # asked again: the report stands
        return self._carry_out(dict(texts)[last["Plan:"]], last["Plan:"], q, messages, chance, first_report=last["Report:"] < 0)

    def _carry_out(self, plan: str, at: int, q: dict[str, Any], messages: list[dict[str, Any]], chance,
                   first_report: bool) -> str:
        figures = [(name, label) for _, label, name in PLAN_FIGURE.findall(plan)]
        formula = PLAN_FORMULA.search(plan)
        rounding = PLAN_ROUNDING.search(plan)
        if not figures or formula is None:
            return "My plan names no figures to query; I cannot carry it out."
        calls = [c for c in wire.history(messages, Call) if c.position > at]
        queries = [c for c in calls if c.tool == QUERY]
        done = [c for c in queries if c.ok]
        if len(done) < len(figures):
            if len(queries) - len(done) >= 3:
                return f"I could not query the ledger: {queries[-1].result}"
            wanted = read_label(figures[len(done)][1]) or figure("sum")
            first = not [c for c in wire.history(messages, Call) if c.tool == QUERY]
            return query_call(wanted, lower=first and chance("lower-case-department"))
        values = {name: (read_query(c.result or "") or ({}, "0", 0))[1] for (name, _), c in zip(figures, done)}
        calcs = [c for c in calls if c.tool == CALCULATE]
        if not calcs or (not calcs[-1].ok and len(calcs) < 3):
            expression = evaluate_formula(formula.group(1), values)
            return render_call(CALCULATE, {"expression": expression})
        if not calcs[-1].ok:
            return f"I could not compute the result: {calcs[-1].result}"
        computed = calcs[-1].result or ""
        decimals = int(rounding.group(1)) if rounding else q["decimals"]
        result = rounded(computed, decimals)
        if first_report and decimals < decimals_of(computed) and chance("unrounded"):
            result = computed
        lines = [(name, label, values[name]) for name, label in figures]
        return report_text(lines, str(calcs[-1].args.get("expression", "")), computed, result)

    # -- reviewer --------------------------------------------------------------------------------------
    @staticmethod
    def reviewer(question: str, messages: list[dict[str, Any]]) -> str:
        reports = [message_text(m.get("content")) for m in messages if m.get("role") == "assistant"
                   and message_text(m.get("content")).startswith("Report:")]
        report = reports[-1] if reports else ""
        result = RESULT.search(report)
        if result is None:
            return "REVISE: I see no report with a 'Result: <number>' line; please carry out the analysis and report it."
        covered = "\n".join(label for _, label, _ in REPORT_FIGURE.findall(report))
        missing = [v for v in named_in(question) if not re.search(rf"\b{v}\b", covered)]
        if missing:
            return (f"REVISE: the question is about {', '.join(named_in(question))}, but the report's figures do not "
                    f"cover {', '.join(missing)}; please plan the analysis again.")
        decimals = asked_decimals(question)
        if decimals_of(result.group(1)) != decimals:
            return f"REVISE: round the result to {decimals} decimal place{'' if decimals == 1 else 's'} as the question asks."
        return (f"APPROVED: the figures cover {', '.join(named_in(question))} as the question asks and the result has "
                f"{decimals} decimal place{'' if decimals == 1 else 's'}.\nreporter, please report the result: {result.group(1)}")

    # -- reporter --------------------------------------------------------------------------------------
    @staticmethod
    def reporter(messages: list[dict[str, Any]]) -> str:
        approvals = [message_text(m.get("content")) for m in messages if m.get("role") == "assistant"
                     and message_text(m.get("content")).startswith("APPROVED:")]
        value = APPROVED_VALUE.search(approvals[-1]) if approvals else None
        if value is None:
            return "The reviewer has approved no result, so I have nothing to report."
        return f"The reviewed analysis of the ledger gives {value.group(1)}.\nANSWER: {value.group(1)}"
