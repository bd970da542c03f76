"""The tasks and plans of `smol_analyst`: regional sales, the computations a plan can ask for, and their code."""

from __future__ import annotations

import re

REGIONS = ["North", "South", "East", "West", "Central", "Coast", "Highlands", "Valley"]
MONTHS = 6

# The computations a plan can ask for: (phrase in the plan, Python expression); {a}/{b} are regions.
OPERATIONS: dict[str, tuple[str, str]] = {
    "sum_plus": ("add the sum of {A}'s months to the sum of {B}'s months", "sum({a}) + sum({b})"),
    "sum_minus": ("subtract the sum of {B}'s months from the sum of {A}'s months", "sum({a}) - sum({b})"),
    "max_minus": ("subtract {B}'s highest month from {A}'s highest month", "max({a}) - max({b})"),
    "max_plus": ("add {A}'s highest month to {B}'s highest month", "max({a}) + max({b})"),
    "mean": ("take the mean of {A}'s months, rounded to 1 decimal", "round(sum({a}) / len({a}), 1)"),
    "max_one": ("take {A}'s highest month", "max({a})"),
}
FAMILY_OPERATION = {"total": "sum_plus", "best_gap": "max_minus", "mean": "mean"}
_REGION = "(%s)" % "|".join(REGIONS)
_OP_READERS = [(op, re.compile(re.escape(phrase).replace(r"\{A\}", _REGION).replace(r"\{B\}", _REGION)))
               for op, (phrase, _) in OPERATIONS.items()]


def operation_phrase(op: str, regions: list[str]) -> str:
    a, b = (regions + regions)[:2]
    return OPERATIONS[op][0].format(A=a, B=b)


def read_operation(text: str) -> tuple[str, list[str]] | None:
    """(operation, regions) of a plan's 'Compute:' line, or None."""
    for op, pattern in _OP_READERS:
        m = pattern.search(text)
        if m:
            phrase = OPERATIONS[op][0]
            found = list(m.groups())
            # the groups come in the phrase's order; regions are (A, B)
            return op, found[::-1] if "{B}" in phrase and phrase.index("{B}") < phrase.index("{A}") else found
    return None


def copy_code(data: dict[str, list[int]], regions: list[str]) -> str:
    """The code of the analyst's check of a report: each region's figures as a list, and how many months it has."""
    names = list(dict.fromkeys(regions))
    lines = [f"{r.lower()} = {data[r]}" for r in names]
    pairs = ", ".join(f'("{r}", {r.lower()})' for r in names)
    lines.append(f"for region, months in [{pairs}]:")
    lines.append('    print(region, len(months), "months")')
    return "\n".join(lines)


def compute(op: str, regions: list[str]) -> str:
    """The code of the analyst's computation on the lists its check defined (smolagents keeps them), and `final_answer`."""
    a, b = (regions + regions)[:2]
    return "result = " + OPERATIONS[op][1].format(a=a.lower(), b=b.lower()) + "\nfinal_answer(result)"


def plan_text(regions: list[str], op: str, updated: bool = False) -> str:
    """The analyst's facts survey and plan (smolagents' planning step), ending where `<end_plan>` stops it."""
    head = "## 1. Updated facts survey" if updated else "## 1. Facts survey"
    return (f"{head}\n### 1.1. Facts given in the task\n- The question is about the {' and '.join(regions)} region(s).\n"
            f"### 1.2. Facts to look up\n- The monthly sales of {' and '.join(regions)}: data_agent can look them up.\n"
            f"### 1.3. Facts to derive\n- The answer: {operation_phrase(op, regions)}.\n\n"
            f"## 2. Plan\n1. Ask data_agent for the monthly sales of {' and '.join(regions)}.\n"
            f"2. Compute: {operation_phrase(op, regions)}.\n3. Return the result with final_answer.\n")
