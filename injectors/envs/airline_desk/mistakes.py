"""Error rules of `airline_desk` (tried before the generic ones): mistakes in the coordinator's and members' replies.

Where each rule acts (see `airline_desk.env` for the steps): the coordinator's plan and its delegations (R.4, A.5,
C.1), the members' look-ups (A.2, A.3) and their reports to the coordinator (R.1, C.2, V.1), the coordinator's
calculation (R.2) and its answer (R.3, A.4, C.3). The coordinator follows its own plan, reads the records' lines by
item and the policy's lines in the order it asked, so each of these carries to the answer.
"""

from __future__ import annotations

import json
import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import (Generated, GenInput, answer_line, answer_with_unit, guessed_answer,
                                           replace_span, slipped_answer, slipped_digits, unseen_numbers)
from .policy import DELEGATE, PLAN_FORMULA, POLICY_TASK, REPORT_LINE, delegation, policy_task
from .world import FARES, POLICY_ITEMS, read_booking, read_policy

_LOOKUP = re.compile(r'"(booking_id|fare_class)": "([^"]+)"')
_EXPRESSION = re.compile(r'"expression": "([^"]+)"')
_OPERATOR = re.compile(r" ([-+*]) ")
_BOOKING_ID = re.compile(r"^BK-\d{4}$")


def _swap_operator(text: str) -> tuple[str, str, str] | None:
    """`text` with its first + or - swapped for the other, and (old, new); None if it has neither."""
    m = re.search(r" ([-+]) ", text)
    if m is None:
        return None
    new = "+" if m.group(1) == "-" else "-"
    return text[: m.start()] + f" {new} " + text[m.end():], m.group(1), new


def _r4(inp: GenInput) -> Generated | None:
    """The coordinator's plan combines the quantities the wrong way (a sum where a difference is needed, or back)."""
    m = PLAN_FORMULA.search(inp.text) if inp.kind == StepKind.plan else None
    swapped = _swap_operator(m.group(1)) if m else None
    if m is None or swapped is None:
        return None
    formula = swapped[0]
    return Generated(inp.text.replace(m.group(0), f"3. calculate: {formula}"),
                     f"plans to compute {formula} where the policy needs {m.group(1)}")


def _a5(inp: GenInput) -> Generated | None:
    """The coordinator answers before any member has reported."""
    return guessed_answer(inp, "coordinator", "Requests like this usually come to about this much.",
                          "records or policy has reported anything")


def _delegated(inp: GenInput) -> tuple[dict, str] | None:
    """The coordinator's delegation in the step (its arguments, its thought), or None."""
    if inp.agent != "coordinator" or inp.kind not in (StepKind.plan, StepKind.message) or f"Action: {DELEGATE}" not in inp.text:
        return None
    thought, _, rest = inp.text.partition(f"\nAction: {DELEGATE}\n")
    try:
        args = json.loads(rest)
    except json.JSONDecodeError:
        return None
    return (args, thought) if isinstance(args, dict) else None


def _c1(inp: GenInput) -> Generated | None:
    """The coordinator asks policy for another item than the one its plan needs."""
    found = _delegated(inp)
    if found is None or found[0].get("member_id") != "policy":
        return None
    args, thought = found
    fare = POLICY_TASK.search(str(args.get("task", "")))
    asked = re.findall(r"^- (.+)$", str(args.get("task", "")), re.M)
    if fare is None or not asked:
        return None
    i = inp.rng.randrange(len(asked))
    wrong = asked[i]
    asked[i] = inp.rng.choice([p for p in POLICY_ITEMS if p not in asked])
    return Generated(delegation("policy", policy_task(fare.group(1), asked), thought),
                     f"asks policy for the {asked[i]} where the plan needs the {wrong}")


def _a2(inp: GenInput) -> Generated | None:
    """A member looks up another booking of the desk's, or another fare class (and reports from it)."""
    m = _LOOKUP.search(inp.text) if inp.kind == StepKind.tool_call and inp.agent in ("records", "policy") else None
    if m is None:
        return None
    field, old = m.group(1), m.group(2)
    if field == "booking_id":
        choices = sorted({v for g in inp.distractors for v in g if _BOOKING_ID.match(v)} - {old, old.upper()})
    else:
        choices = [f for f in FARES if f != old]
    if not choices:
        return None
    new = inp.rng.choice(choices)
    what = "booking" if field == "booking_id" else "fare class"
    return Generated(inp.text.replace(m.group(0), f'"{field}": "{new}"'), f"looks up {what} {new} instead of {old}")


def _a3(inp: GenInput) -> Generated | None:
    """A member reports figures as looked up without looking anything up (they are made up)."""
    if inp.agent not in ("records", "policy") or inp.kind != StepKind.tool_call:
        return None
    m = _LOOKUP.search(inp.text)
    if m is None:
        return None
    rng = inp.rng
    if inp.agent == "records":
        key = m.group(2).upper()
        text = f"{key} fare class: {rng.choice(FARES)}\n{key} paid: {rng.randint(150, 700)}"
    else:
        task = next((p.text for p in reversed(inp.prefix) if "fare policy of the" in p.text), "")
        items = [i for i in POLICY_ITEMS if f"- {i}" in task.replace("\\n", "\n")] or ["change fee"]
        text = "\n".join(f"{m.group(2)} {i}: {rng.randint(3, 9) if i == 'free bags' else rng.randint(30, 300)}" for i in items)
    return Generated(text, "reports figures as looked up without looking anything up (they appear nowhere)")


def _report_lines(inp: GenInput) -> list[re.Match] | None:
    if inp.agent not in ("records", "policy") or inp.kind != StepKind.message:
        return None
    found = [m for m in REPORT_LINE.finditer(inp.text) if m.group(3).isdigit()]
    return found or None


def _with_value(inp: GenInput, m: re.Match, value: str) -> str:
    return replace_span(inp.text, m, value, 3)


def _r1(inp: GenInput) -> Generated | None:
    """A member reports a figure that appears nowhere in the run."""
    found = _report_lines(inp)
    if found is None:
        return None
    m = inp.rng.choice(found)
    seen = inp.prefix_text() + inp.text
    low, high = (3, 9) if m.group(2) == "free bags" else (20, 900)
    choices = unseen_numbers(seen, low, high)
    if not choices:
        return None
    new = str(inp.rng.choice(choices))
    return Generated(_with_value(inp, m, new), f"reports the {m.group(2)} as {new}, a figure no look-up states, "
                     f"instead of {m.group(3)}")


def _c2(inp: GenInput) -> Generated | None:
    """A member passes a figure on to the coordinator with its digits slipped (the look-up says otherwise)."""
    found = _report_lines(inp)
    if found is None:
        return None
    m = inp.rng.choice(found)
    old = m.group(3)
    new = slipped_digits(old)
    return Generated(_with_value(inp, m, new), f"tells the coordinator {new} for the {m.group(2)} where the look-up says {old}")


def _v1(inp: GenInput) -> Generated | None:
    """A member reads the wrong line of its look-up: the taxes as the price paid, or another item of the policy."""
    found = _report_lines(inp)
    if found is None:
        return None
    looked = inp.prefix_text()
    for m in [inp.rng.choice(found), *found]:
        item = m.group(2)
        if item == "paid":
            booking = read_booking(looked[looked.rfind(f"{m.group(1)}: passenger"):]) if f"{m.group(1)}: passenger" in looked else None
            other, value = "taxes", (booking or {}).get("taxes")
        else:
            start = looked.rfind(f"Fare class {m.group(1)}:")
            table = read_policy(looked[start:]) if start >= 0 else {}
            others = [i for i in POLICY_ITEMS if i != item and i in table and str(table[i]) != m.group(3)]
            other = others[0] if others else ""
            value = table.get(other)
        if value is None or str(value) == m.group(3):
            continue
        return Generated(_with_value(inp, m, str(value)), f"reports the {other} ({value}) from the same look-up as "
                         f"the {item}")
    return None


def _r2(inp: GenInput) -> Generated | None:
    """The coordinator's calculation combines the right figures the wrong way."""
    m = _EXPRESSION.search(inp.text) if inp.agent == "coordinator" and inp.kind == StepKind.tool_call else None
    swapped = _swap_operator(m.group(1)) if m else None
    if m is None or swapped is None:
        return None
    expr = swapped[0]
    text = inp.text.replace(m.group(0), f'"expression": "{expr}"').replace(f"{m.group(1)}.", f"{expr}.")
    return Generated(text, f"calculates {expr} where {m.group(1)} was needed")


def _r3(inp: GenInput) -> Generated | None:
    """The coordinator writes the calculator's result down wrong (a digit slipped)."""
    return slipped_answer(inp, "coordinator")


def _a4(inp: GenInput) -> Generated | None:
    """The coordinator's answer line carries a unit, not the bare number asked for."""
    m = answer_line(inp, "coordinator")
    return None if m is None else answer_with_unit(inp, m, ["EUR", "euros", "(approx.)"])


def _c3(inp: GenInput) -> Generated | None:
    """The coordinator answers with the price paid, as records reported it, instead of computing from it."""
    m = answer_line(inp, "coordinator")
    if m is None:
        return None
    paid = [v for _, item, v in REPORT_LINE.findall(inp.prefix_text()) if item == "paid"]
    if not paid or paid[-1] == m.group(1):
        return None
    return Generated(f"Records has the figure.\nANSWER: {paid[-1]}",
                     "passes the price paid on as the answer without the computation the policy asks")


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4], "A.2": [_a2], "A.3": [_a3], "A.4": [_a4],
            "A.5": [_a5], "V.1": [_v1], "C.1": [_c1], "C.2": [_c2], "C.3": [_c3]}
