"""Error rules of `smol_analyst` (tried before the generic ones): mistakes in the agents' code actions."""

from __future__ import annotations

import re

from faultlens.middleware.model import StepKind

from ..generators import Generated, GenInput, change_a_number
from .smol_tasks import operation_phrase, read_operation

_LOOKUP = re.compile(r'lookup_sales\("([A-Za-z]+)"\)')
_REPORT = re.compile(r'final_answer\("([^"]*)"\)')


def _a2(inp: GenInput) -> Generated | None:
    """The data agent looks up another region than the one it labels (the figures go out under the wrong name)."""
    found = _LOOKUP.findall(inp.text)
    if inp.kind != StepKind.tool_call or not found:
        return None
    region = inp.rng.choice(found)
    others = [r for g in inp.distractors for r in g if r != region and r not in found]
    if not others:
        return None
    other = inp.rng.choice(others)
    return Generated(inp.text.replace(f'lookup_sales("{region}")', f'lookup_sales("{other}")', 1),
                     f"calls lookup_sales with {other!r} instead of {region!r}")


def _c2(inp: GenInput) -> Generated | None:
    """The data agent's report to its manager states one figure differently from what the tool returned."""
    m = _REPORT.search(inp.text)
    if inp.agent != "data_agent" or m is None:
        return None
    changed = change_a_number(m.group(1), inp.rng)
    if changed is None:
        return None
    report, old, new = changed
    return Generated(inp.text[: m.start(1)] + report + inp.text[m.end(1):], f"reports {new} to its manager where the tool said {old}")


_SWAPS = [("sum({a}) + sum({b})", "sum({a}) - sum({b})"), ("max({a}) - max({b})", "max({a}) - min({b})"),
          ("round(sum({a}) / len({a}), 1)", "round(sum({a}) / (len({a}) + 1), 1)")]


def _r2(inp: GenInput) -> Generated | None:
    """The analyst's computation combines the right figures the wrong way."""
    m = re.search(r"^result = (.+)$", inp.text, re.M)
    if inp.agent != "analyst" or m is None:
        return None
    names = re.findall(r"\b([a-z]+)\)", m.group(1))
    a, b = (names + names)[:2]
    for right, wrong in _SWAPS:
        if m.group(1) == right.format(a=a, b=b):
            new = wrong.format(a=a, b=b)
            return Generated(inp.text.replace(m.group(0), f"result = {new}"), f"computes {new} where {m.group(1)} was needed")
    return None


def _a5(inp: GenInput) -> Generated | None:
    """The analyst answers before it has any figures."""
    if inp.agent != "analyst" or "data_agent(" not in inp.text:
        return None
    guess = inp.rng.randint(20, 400)
    return Generated(f"Thought: A typical value will do here.\n<code>\nfinal_answer({guess})\n</code>",
                     f"answers {guess} before the data agent has looked anything up")


# What a misunderstood question asks instead (same figures, another quantity).
_MISREAD = {"sum_plus": "max_plus", "max_plus": "sum_plus", "max_minus": "sum_minus", "sum_minus": "max_minus",
            "mean": "max_one", "max_one": "mean"}


def _r4(inp: GenInput) -> Generated | None:
    """The analyst's plan computes another quantity than the one asked."""
    planned = read_operation(inp.text) if inp.kind == StepKind.plan else None
    if planned is None:
        return None
    op, regions = planned
    old, new = operation_phrase(op, regions), operation_phrase(_MISREAD[op], regions)
    return Generated(inp.text.replace(old, new), f"plans to {new} where the question asks to {old}")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan looks up only one of the two regions the computation needs (the step that fetches B is missing)."""
    planned = read_operation(inp.text) if inp.kind == StepKind.plan else None
    if planned is None or len(set(planned[1])) < 2:
        return None
    op, (a, b) = planned[0], planned[1][:2]
    text = inp.text.replace(f"1. Ask data_agent for the monthly sales of {a} and {b}.",
                            f"1. Ask data_agent for the monthly sales of {a}.")
    text = text.replace(operation_phrase(op, [a, b]), operation_phrase(op, [a, a]))
    if text == inp.text:
        return None
    return Generated(text, f"plans without the figures of {b}, which the computation needs")


MUTATORS = {"R.4": [_r4], "PL.1": [_pl1], "A.2": [_a2], "C.2": [_c2], "R.2": [_r2], "A.5": [_a5]}
