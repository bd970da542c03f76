"""Error rules of `math_society` (tried before the generic ones): mistakes in the specifier's, the instructor's and
the solver's replies.

Where each rule acts (see `math_society.env` for the steps): the specified task (R.4 what is asked, C.2 a given
figure), the instructor's plan and instructions (R.4 the formula, C.1 the fact to look up, A.5 done too early, R.2
the calculation's operator, V.1 a figure of the wrong quantity), the solver's look-ups (A.2, A.3), its reports (R.1,
C.2) and its result and answer (R.3, A.4, C.3). The instructor follows its own plan and the figures the specified
task and the solver's reports give it; the solver answers its last result: so each of these carries to the answer.
"""

from __future__ import annotations

import json
import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import (Generated, GenInput, answer_line, answer_with_unit, miswritten_answer,
                                           replace_span, slipped_digits, slipped_result, unseen_numbers)
from .policy import CALC_ORDER, DONE, FIND, GIVEN, LOOKUP_ORDER, NEXT, PLAN_FACTS, PLAN_FORMULA, REPORT_LINE, RESULT
from .world import MISREAD

_NAME = re.compile(r'"name": "([^"]+)"')
_FIGURE = re.compile(r"^Input: (.+)$", re.M)
_PAIR = re.compile(r"([^;=]+?) = (\d+)")


def _swap_operator(text: str) -> tuple[str, str, str] | None:
    """`text` with its first + or - swapped for the other (else its first / or * swapped), and (old, new)."""
    for a, b in (("-", "+"), ("/", "*")):
        m = re.search(rf" ([{re.escape(a + b)}]) ", text)
        if m is not None:
            new = b if m.group(1) == a else a
            return text[: m.start()] + f" {new} " + text[m.end():], m.group(1), new
    return None


# -- the task specifier --------------------------------------------------------------------
def _specifier(inp: GenInput) -> bool:
    return inp.agent == "task_specifier" and inp.kind == StepKind.message


def _r4_specified(inp: GenInput) -> Generated | None:
    """The specified task asks for another quantity than the problem does (the total cost, not the change)."""
    m = FIND.search(inp.text) if _specifier(inp) else None
    if m is None or m.group(1) not in MISREAD:
        return None
    new = MISREAD[m.group(1)]
    return Generated(inp.text.replace(m.group(0), f"Find: {new}"), f"specifies the task as finding {new} where the "
                     f"problem asks for {m.group(1)}")


def _c2_specified(inp: GenInput) -> Generated | None:
    """The specified task passes one of the problem's figures on with its digits slipped."""
    m = GIVEN.search(inp.text) if _specifier(inp) else None
    pairs = list(_PAIR.finditer(m.group(1))) if m else []
    if m is None or not pairs:
        return None
    pair = inp.rng.choice(pairs)
    new = slipped_digits(pair.group(2))
    line = m.group(1)[: pair.start(2)] + new + m.group(1)[pair.end(2):]
    return Generated(inp.text.replace(m.group(0), f"Given: {line}"), f"passes {pair.group(1).strip()} on as {new} where "
                     f"the problem says {pair.group(2)}")


# -- the instructor ------------------------------------------------------------------------
def _instructor(inp: GenInput) -> bool:
    return inp.agent == "instructor" and inp.kind in (StepKind.plan, StepKind.message) and DONE not in inp.text


def _r4_plan(inp: GenInput) -> Generated | None:
    """The instructor's plan combines the quantities the wrong way (a sum where a difference is needed, or back)."""
    m = PLAN_FORMULA.search(inp.text) if inp.agent == "instructor" and inp.kind == StepKind.plan else None
    swapped = _swap_operator(m.group(1)) if m else None
    if m is None or swapped is None:
        return None
    return Generated(inp.text.replace(m.group(0), f"2. calculate: {swapped[0]}"),
                     f"plans to compute {swapped[0]} where the problem needs {m.group(1)}")


def _c1(inp: GenInput) -> Generated | None:
    """The instructor has the solver look up another fact of the sheet than the problem needs (and plans with it)."""
    m = PLAN_FACTS.search(inp.text) if inp.agent == "instructor" and inp.kind == StepKind.plan else None
    if m is None:
        return None
    facts = [f.strip() for f in m.group(1).split(";")]
    old = inp.rng.choice(facts)
    kind = old.split(" ", 1)[1] if " " in old else old  # 'price', 'pack size', 'hourly wage', ...
    sheet: list[str] = next((g for g in inp.distractors if old in g), [])
    choices = sorted(f for f in sheet if f not in facts and (f.endswith(" " + kind) or f.endswith(old.split(" ")[0] + " " + kind.split(" ")[-1])))
    choices = [f for f in choices if not (kind == "price" and f.endswith("pack price"))] or choices
    if not choices:
        return None
    new = inp.rng.choice(choices)
    return Generated(inp.text.replace(old, new), f"has the solver look up {new} where the problem needs {old}")


def _a5(inp: GenInput) -> Generated | None:
    """The instructor declares the task done before the solver has computed anything."""
    if not _instructor(inp) or (inp.kind == StepKind.message and RESULT.search(inp.prefix_text())):
        return None
    return Generated(DONE, "declares the task done before the solver has computed the answer")


def _calc(inp: GenInput) -> re.Match | None:
    return CALC_ORDER.search(inp.text) if _instructor(inp) else None


def _r2(inp: GenInput) -> Generated | None:
    """The instructor's calculation combines the right figures the wrong way."""
    m = _calc(inp)
    swapped = _swap_operator(m.group(1)) if m else None
    if m is None or swapped is None:
        return None
    return Generated(replace_span(inp.text, m, swapped[0], 1), f"instructs {swapped[0]} where {m.group(1)} was needed")


def _v1(inp: GenInput) -> Generated | None:
    """The instructor puts the figure of another quantity of the conversation in the calculation."""
    m, figures = _calc(inp), _FIGURE.search(inp.text)
    if m is None or figures is None:
        return None
    pairs = [(n.strip(), v) for n, v in _PAIR.findall(figures.group(1))]
    tokens = list(re.finditer(r"(?<![\d.])\d+(?![\d.])", m.group(1)))
    for name, value in inp.rng.sample(pairs, len(pairs)):
        spot = next((t for t in tokens if t.group(0) == value), None)
        other = next(((n, v) for n, v in inp.rng.sample(pairs, len(pairs)) if v != value), None)
        if spot is None or other is None:
            continue
        expression = m.group(1)[: spot.start()] + other[1] + m.group(1)[spot.end():]
        return Generated(replace_span(inp.text, m, expression, 1), f"uses the {other[0]} ({other[1]}) for the {name} "
                         f"({value}) in the calculation")
    return None


# -- the solver ----------------------------------------------------------------------------
def _lookup(inp: GenInput) -> re.Match | None:
    return _NAME.search(inp.text) if inp.agent == "solver" and inp.kind == StepKind.tool_call else None


def _a2(inp: GenInput) -> Generated | None:
    """The solver looks up another fact of the sheet of the same kind (and reports it as the one asked)."""
    m = _lookup(inp)
    if m is None:
        return None
    old = m.group(1)
    tail = " ".join(old.split(" ")[-2:]) if old.endswith(("pack size", "pack price", "hourly wage", "daily bonus")) else "price"
    sheet: list[str] = next((g for g in inp.distractors if old in g), [])
    choices = [f for f in sheet if f != old and f.endswith(tail) and not (tail == "price" and f.endswith("pack price"))]
    if not choices:
        return None
    new = inp.rng.choice(sorted(choices))
    return Generated(inp.text.replace(m.group(0), f'"name": {json.dumps(new)}'), f"looks up {new} instead of {old}")


def _a3(inp: GenInput) -> Generated | None:
    """The solver reports figures as looked up without looking anything up (they are made up)."""
    if _lookup(inp) is None:
        return None
    order = next((LOOKUP_ORDER.search(p.text) for p in reversed(inp.prefix) if LOOKUP_ORDER.search(p.text)), None)
    if order is None:
        return None
    seen = inp.prefix_text()
    lines = [f"{f.strip()}: {inp.rng.choice(unseen_numbers(seen, 3, 60))}" for f in order.group(1).split(";")]
    return Generated("Solution:\n" + "\n".join(lines) + f"\n{NEXT}", "reports figures as looked up without looking "
                     "anything up (they appear nowhere)")


def _reports(inp: GenInput) -> list[re.Match]:
    if inp.agent != "solver" or inp.kind != StepKind.message or not inp.text.startswith("Solution:\n"):
        return []
    return list(REPORT_LINE.finditer(inp.text))


def _r1(inp: GenInput) -> Generated | None:
    """The solver reports a figure that no look-up states."""
    found = _reports(inp)
    if not found:
        return None
    m = inp.rng.choice(found)
    choices = unseen_numbers(inp.prefix_text() + inp.text, 3, 60)
    new = str(inp.rng.choice(choices))
    return Generated(replace_span(inp.text, m, new, 2), f"reports the {m.group(1)} as {new}, a figure no look-up "
                     f"states, instead of {m.group(2)}")


def _c2(inp: GenInput) -> Generated | None:
    """The solver passes a looked-up figure on to the instructor with its digits slipped."""
    found = _reports(inp)
    if not found:
        return None
    m = inp.rng.choice(found)
    new = slipped_digits(m.group(2))
    return Generated(replace_span(inp.text, m, new, 2), f"tells the instructor {new} for the {m.group(1)} where the "
                     f"look-up says {m.group(2)}")


def _r3(inp: GenInput) -> Generated | None:
    """The solver writes the calculator's result down wrong (a digit slipped), in its report or its answer."""
    m = answer_line(inp, "solver")
    if m is not None:
        new = slipped_result(m.group(1), inp.rng)
        return miswritten_answer(inp, m, new if not new.startswith(("0", "-")) else str(int(m.group(1)) + 10))
    r = RESULT.search(inp.text) if inp.agent == "solver" and inp.kind == StepKind.message else None
    if r is None or not r.group(2).isdigit():
        return None
    new = slipped_result(r.group(2), inp.rng)
    new = new if not new.startswith(("0", "-")) else str(int(r.group(2)) + 10)
    return Generated(replace_span(inp.text, r, new, 2), f"reports {r.group(1)} = {new} where the calculator gave {r.group(2)}")


def _a4(inp: GenInput) -> Generated | None:
    """The solver's answer line carries a unit, not the bare number asked for."""
    m = answer_line(inp, "solver")
    return None if m is None else answer_with_unit(inp, m, ["euros", "EUR", "(approx.)"])


def _c3(inp: GenInput) -> Generated | None:
    """The solver answers with a figure the instructor gave it instead of the calculation's result."""
    m = answer_line(inp, "solver")
    figures = [v for p in inp.prefix if p.agent == "instructor" for f in _FIGURE.findall(p.text) for _, v in _PAIR.findall(f)]
    figures = [v for v in figures if v != (m.group(1) if m else None)]
    if m is None or not figures:
        return None
    return Generated(f"The instructor gave the figure.\nANSWER: {figures[-1]}",
                     "passes a figure the instructor gave on as the answer without the calculation's result")


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4_plan, _r4_specified], "A.2": [_a2], "A.3": [_a3],
            "A.4": [_a4], "A.5": [_a5], "V.1": [_v1], "C.1": [_c1], "C.2": [_c2, _c2_specified], "C.3": [_c3]}

__all__ = ["MUTATORS"]
