"""Error rules of `docs_team` (tried before the generic ones): mistakes in the lead's and the researcher's replies.

Where each rule acts (see `docs_team.env` for the steps): the lead's plan and its call of the researcher (R.4, C.1,
A.5), the researcher's searches (A.2, A.3) and its report to the lead (R.1, C.2, V.1), the lead's calculation (R.2)
and its answer (R.3, A.4, C.3). The lead reads a report's lines in the order it asked for the figures, and
follows its own plan, so each of these carries to the answer.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import (Generated, GenInput, answer_line, answer_with_unit, guessed_answer,
                                           miswritten_answer, replace_span, slipped_digits, slipped_result, unseen_numbers)
from .world import COMPANIES, read_figure
from .policy import PLAN_OP, DELEGATE, REPORT_LINE, delegation, read_items

_SEARCH = re.compile(r'"query": "(\w+) annual report (\d{4})"')
_EXPRESSION = re.compile(r'"expression": "(\d+) ([-+]) (\d+)"')
_OTHER_YEAR = {"2024": "2025", "2025": "2024"}
# A metric asked for in place of the one needed (same company and year: the lead takes the figure as it comes).
_OTHER_METRIC = {"headcount": "offices", "revenue": "headcount", "offices": "headcount"}


def _r4(inp: GenInput) -> Generated | None:
    """The lead's plan computes the other operation (a sum where the question asks for a difference, or back)."""
    m = PLAN_OP.search(inp.text) if inp.kind == StepKind.plan else None
    if m is None:
        return None
    old, new = m.group(4), "plus" if m.group(4) == "minus" else "minus"
    line = m.group(0).replace(f" {old} ", f" {new} ")
    return Generated(inp.text.replace(m.group(0), line), f"plans to compute {line.split(': ', 1)[1]} where the question "
                     f"asks for {m.group(0).split(': ', 1)[1]}")


def _c1(inp: GenInput) -> Generated | None:
    """The lead asks the researcher for another metric than the one its plan needs."""
    if inp.agent != "lead" or inp.kind not in (StepKind.plan, StepKind.message) or f"Action: {DELEGATE}" not in inp.text:
        return None
    items = read_items(inp.text.replace("\\n", "\n"))
    if not items:
        return None
    i = inp.rng.randrange(len(items))
    wrong = items[i].metric
    items[i] = type(items[i])(items[i].company, items[i].year, _OTHER_METRIC[wrong])
    thought = inp.text.split("\nAction:", 1)[0]
    return Generated(delegation(items, thought), f"asks the researcher for {items[i].company}'s {items[i].metric} "
                     f"where the plan needs its {wrong}")


def _a5(inp: GenInput) -> Generated | None:
    """The lead answers before it has any figures."""
    return guessed_answer(inp, "lead", "The reports of these companies usually differ by about this much.",
                          "the researcher has found any figure")


def _a2(inp: GenInput) -> Generated | None:
    """The researcher searches for another company's report, or the other year's (and reads the figure from it)."""
    m = _SEARCH.search(inp.text) if inp.kind == StepKind.tool_call else None
    if m is None:
        return None
    company, year = m.group(1), m.group(2)
    ids = {v.split("-")[0] for g in inp.distractors for v in g if re.fullmatch(r"[A-Z]{3}-\d{4}", v)}
    names = sorted(c for c in COMPANIES if c[:3].upper() in ids and c != company)  # the corpus's other companies
    if names and inp.rng.random() < 0.5:
        new = inp.rng.choice(names)
        what = f"{new}'s report instead of {company}'s"
        query = f"{new} annual report {year}"
    else:
        query, what = f"{company} annual report {_OTHER_YEAR[year]}", f"the {_OTHER_YEAR[year]} report instead of the {year} one"
    return Generated(inp.text.replace(m.group(0), f'"query": "{query}"'), f"searches for {what}")


def _a3(inp: GenInput) -> Generated | None:
    """The researcher reports figures as read without searching any report (they are made up)."""
    if inp.agent != "researcher" or inp.kind != StepKind.tool_call:
        return None
    task = next((p.text for p in inp.prefix if "Find these figures" in p.text), "") or inp.task_query
    items = read_items(task.replace("\\n", "\n"))
    if not items:
        return None
    lines = [f"{i.company} {i.year} {i.metric}: {inp.rng.randint(20, 900)} ({i.company[:3].upper()}-{i.year})" for i in items]
    return Generated("\n".join(lines), "reports figures as read from the reports without searching them (they appear nowhere)")


def _report_line(inp: GenInput) -> tuple[re.Match, list[re.Match]] | None:
    if inp.agent != "researcher" or inp.kind != StepKind.message:
        return None
    found = list(REPORT_LINE.finditer(inp.text))
    return (inp.rng.choice(found), found) if found else None


def _with_value(inp: GenInput, m: re.Match, value: str) -> str:
    return replace_span(inp.text, m, value, 4)


def _r1(inp: GenInput) -> Generated | None:
    """The researcher reports a figure that appears nowhere in the run."""
    picked = _report_line(inp)
    if picked is None:
        return None
    m, _ = picked
    seen = inp.prefix_text() + inp.text
    new = str(inp.rng.choice(unseen_numbers(seen, 20, 900)))
    return Generated(_with_value(inp, m, new), f"reports {m.group(1)}'s {m.group(3)} as {new}, a figure no report states, "
                     f"instead of {m.group(4)}")


def _c2(inp: GenInput) -> Generated | None:
    """The researcher passes a figure on to the lead with its digits slipped (the report it read says otherwise)."""
    picked = _report_line(inp)
    if picked is None:
        return None
    m, _ = picked
    old = m.group(4)
    new = slipped_digits(old)
    return Generated(_with_value(inp, m, new), f"tells the lead {new} where the report says {old}")


def _v1(inp: GenInput) -> Generated | None:
    """The researcher reports the figure of the same company's other-year report, which its search also returned."""
    picked = _report_line(inp)
    if picked is None:
        return None
    for m in [picked[0], *picked[1]]:
        company, year, metric = m.group(1), m.group(2), m.group(3)
        other = re.search(rf"^\[\S+\] {company} annual report {_OTHER_YEAR[year]}: (.+)$", inp.prefix_text(), re.M)
        if other is None:
            continue
        value = read_figure(other.group(0), metric)
        if value is None or str(value) == m.group(4):
            continue
        return Generated(_with_value(inp, m, str(value)), f"reports {company}'s {_OTHER_YEAR[year]} {metric} ({value}), "
                         f"read in the same search, as its {year} figure")
    return None


def _r2(inp: GenInput) -> Generated | None:
    """The lead's calculation combines the right figures the wrong way."""
    m = _EXPRESSION.search(inp.text) if inp.agent == "lead" and inp.kind == StepKind.tool_call else None
    if m is None:
        return None
    op = "+" if m.group(2) == "-" else "-"
    expr = f"{m.group(1)} {op} {m.group(3)}"
    text = inp.text.replace(m.group(0), f'"expression": "{expr}"')
    text = text.replace(f"{m.group(1)} {m.group(2)} {m.group(3)}.", f"{expr}.")
    return Generated(text, f"calculates {expr} where {m.group(1)} {m.group(2)} {m.group(3)} was needed")


def _r3(inp: GenInput) -> Generated | None:
    """The lead writes the calculator's result down wrong (a digit slipped)."""
    m = answer_line(inp, "lead")
    return None if m is None else miswritten_answer(inp, m, slipped_result(m.group(1), inp.rng))


def _a4(inp: GenInput) -> Generated | None:
    """The lead's answer line carries a unit, not the bare number asked for."""
    m = answer_line(inp, "lead")
    return None if m is None else answer_with_unit(inp, m, ["employees", "million euros", "(approx.)"])


def _c3(inp: GenInput) -> Generated | None:
    """The lead answers with the researcher's first figure, as reported, instead of computing from it."""
    m = answer_line(inp, "lead")
    if m is None:
        return None
    reports = [int(v) for _, _, _, v, _ in REPORT_LINE.findall(inp.prefix_text())]
    if not reports or str(reports[0]) == m.group(1):
        return None
    return Generated(f"The researcher has the figure.\nANSWER: {reports[0]}",
                     "passes the researcher's first figure on as the answer without the computation the question asks")


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4], "A.2": [_a2], "A.3": [_a3], "A.4": [_a4],
            "A.5": [_a5], "V.1": [_v1], "C.1": [_c1], "C.2": [_c2], "C.3": [_c3]}
