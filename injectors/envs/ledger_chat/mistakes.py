"""Error rules of `ledger_chat` (tried before the generic ones): mistakes in the analyst's, reviewer's and reporter's replies.

Where each rule acts (see `ledger_chat.env` for the steps): the analyst's plan (R.4, A.5), its queries (A.2, A.3),
its calculation (R.2, V.1) and its report (R.3); the reviewer's verdict (V.2, C.1, C.2); the reporter's answer (R.1,
R.3, A.4, C.3). Each carries to the answer because the reviewer checks what it can see (a result line, the figures'
filters as the plan names them, the decimals) and not the data: the analyst names its figures as its plan does, the
reporter reports what the approval tells it.
"""

from __future__ import annotations

import json
import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.envs.docs_team.calculator import calculate
from faultlens.injectors.generators import Generated, GenInput, perturb_number, slipped_digits, unseen_numbers
from .policy import (APPROVED_VALUE, CALCULATE, PLAN_FIGURE, QUERY, REPORT_COMPUTATION, REPORT_FIGURE, RESULT,
                     asked_decimals, plan_text, read_question, report_text)
from .world import ALL, CATEGORIES, DEPARTMENTS, FORMULAS, QUARTERS, decimals_of, figure, figure_label, rounded

_ANSWER = re.compile(r"^ANSWER: (-?\d+(?:\.\d+)?)$", re.M)
_QUERY_RESULT = re.compile(r": (-?\d+(?:\.\d+)?) \((\d+) rows\)$", re.M)
_POOLS = {"department": DEPARTMENTS, "quarter": QUARTERS, "category": CATEGORIES}


def _tool_args(inp: GenInput, tool: str) -> dict | None:
    action = inp.action if inp.agent == "analyst" and inp.kind == StepKind.tool_call else None
    if action is None or action.tool != tool:
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return args if isinstance(args, dict) else None


def _call(tool: str, args: dict) -> str:
    return f"Action: {tool}\n{json.dumps(args, ensure_ascii=False)}"


def _plan_question(inp: GenInput) -> dict | None:
    if inp.agent != "analyst" or inp.kind != StepKind.plan or not inp.text.startswith("Plan:"):
        return None
    return read_question(inp.task_query)


def _made_up_report(inp: GenInput, plan_figures: list[tuple[str, str, str]], q: dict) -> str | None:
    """A report in the analyst's form on the plan's figures with values made up (a count for a count)."""
    labels = [label for _, label, _ in plan_figures]
    if len(labels) != 2:
        return None
    rng = inp.rng
    a = f"{rng.randint(8_000, 60_000)}.{rng.randint(0, 99):02d}"
    b = str(rng.randint(3, 14)) if labels[1].startswith("count") else f"{rng.randint(20_000, 150_000)}.{rng.randint(0, 99):02d}"
    expression = FORMULAS[q["family"]].replace("A", a).replace("B", b)
    computed = calculate(expression)
    if not re.fullmatch(r"-?\d+(\.\d+)?", computed):
        return None
    return report_text([("A", labels[0], a), ("B", labels[1], b)], expression, computed, rounded(computed, q["decimals"]))


# -- the analyst's plan -----------------------------------------------------------------------------------
def _r4(inp: GenInput) -> Generated | None:
    """The plan answers a neighbouring question (its figures still name what the question names)."""
    q = _plan_question(inp)
    if q is None:
        return None
    family = q["family"]
    if family == "share":
        why = f"{q['department']}'s share of its own yearly spending"
        text = plan_text(q).replace(f"2. query_ledger: {figure_label(figure('sum', ALL, q['quarter']))}",
                                    f"2. query_ledger: {figure_label(figure('sum', q['department']))}")
    elif family == "growth":
        text, why = plan_text({**q, "quarter": q["quarter2"], "quarter2": q["quarter"]}), "the change in the other direction"
    elif family == "gap":
        text, why = plan_text({**q, "department": q["department2"], "department2": q["department"]}), "the gap the other way round"
    else:
        text = plan_text(q).replace(f"2. query_ledger: {figure_label(figure('count', q['department'], q['quarter']))}",
                                    f"2. query_ledger: {figure_label(figure('count', ALL, q['quarter']))}")
        why = "the amount per transaction of the whole company's count"
    if text == inp.text:
        return None
    return Generated(text, f"plans for {why}, not what the question asks")


def _a5(inp: GenInput) -> Generated | None:
    """The analyst reports figures and a result at once, in place of its plan, without querying the ledger."""
    q = _plan_question(inp)
    if q is None:
        return None
    text = _made_up_report(inp, PLAN_FIGURE.findall(inp.text), q)
    if text is None:
        return None
    return Generated(text, "reports figures and a result before querying the ledger at all")


# -- the analyst's queries and calculation ----------------------------------------------------------------
def _a2(inp: GenInput) -> Generated | None:
    """A query with one filter set to another value the ledger has (the report still names the planned one)."""
    args = _tool_args(inp, QUERY)
    if args is None:
        return None
    keys = [k for k in ("department", "quarter", "category") if args.get(k) not in (None, ALL)]
    if not keys:
        return None
    key = inp.rng.choice(keys)
    old = str(args[key])
    new = inp.rng.choice([v for v in _POOLS[key] if v.lower() != old.lower()])
    return Generated(_call(QUERY, {**args, key: new}), f"queries {key} {new} where the plan says {old}")


def _a3(inp: GenInput) -> Generated | None:
    """The analyst reports as if it had queried the ledger, with figures it made up, instead of the query."""
    if _tool_args(inp, QUERY) is None:
        return None
    plan = next((p.text for p in reversed(inp.prefix) if p.agent == "analyst" and p.text.startswith("Plan:")), "")
    q = read_question(inp.task_query)
    text = _made_up_report(inp, PLAN_FIGURE.findall(plan), q) if q else None
    if text is None:
        return None
    return Generated(text, "reports figures as queried without querying the ledger (they appear nowhere)")


_SHAPES = ((re.compile(r"^\((\S+) - (\S+)\) / (\S+) \* 100$"), lambda m: f"({m[1]} - {m[2]}) / {m[1]} * 100", "the later figure"),
           (re.compile(r"^(\S+) / (\S+) \* 100$"), lambda m: f"{m[2]} / {m[1]} * 100", "the part"),
           (re.compile(r"^(\S+) - (\S+)$"), lambda m: f"{m[1]} + {m[2]}", "a sum"),
           (re.compile(r"^(\S+) / (\S+)$"), lambda m: f"{m[2]} / {m[1]}", "the sum"))


def _r2(inp: GenInput) -> Generated | None:
    """The calculation combines the right figures the wrong way (the wrong base of a ratio, a sum for a gap)."""
    args = _tool_args(inp, CALCULATE)
    expression = str((args or {}).get("expression", ""))
    for shape, rewrite, what in _SHAPES:
        m = shape.match(expression)
        if m:
            new = rewrite(m)
            return Generated(_call(CALCULATE, {"expression": new}), f"calculates {new} (over {what}) where {expression} was needed")
    return None


def _v1(inp: GenInput) -> Generated | None:
    """The calculation takes a query's row count for its value (both are in the query's result)."""
    args = _tool_args(inp, CALCULATE)
    expression = str((args or {}).get("expression", ""))
    if not expression:
        return None
    for item in inp.prefix:
        m = _QUERY_RESULT.search(item.text) if item.kind == StepKind.tool_result.value else None
        if m and re.search(rf"(?<![\d.]){re.escape(m.group(1))}(?![\d.])", expression) and m.group(1) != m.group(2):
            new = re.sub(rf"(?<![\d.]){re.escape(m.group(1))}(?![\d.])", m.group(2), expression, count=1)
            return Generated(_call(CALCULATE, {"expression": new}), f"uses the query's {m.group(2)} rows in place of its "
                             f"value {m.group(1)}")
    return None


# -- the analyst's report -----------------------------------------------------------------------------------
def _r3_report(inp: GenInput) -> Generated | None:
    """The report writes the calculator's result down with its digits slipped (and rounds that)."""
    if inp.agent != "analyst" or inp.kind != StepKind.message:
        return None
    computation, result = REPORT_COMPUTATION.search(inp.text), RESULT.search(inp.text)
    if computation is None or result is None:
        return None
    old = computation.group(2)
    new = perturb_number(old.lstrip("-"), inp.rng)
    new = ("-" if old.startswith("-") else "") + new
    value = rounded(new, decimals_of(result.group(1)))
    if value == result.group(1):
        return None
    text = inp.text.replace(computation.group(0), f"- Computation: {computation.group(1)} = {new}")
    return Generated(text.replace(result.group(0), f"Result: {value}"), f"writes the calculator's {old} as {new}")


# -- the reviewer's verdict ---------------------------------------------------------------------------------
def _verdict(inp: GenInput) -> bool:
    return inp.agent == "reviewer" and inp.kind == StepKind.message


def _last_result(inp: GenInput) -> str | None:
    report = next((p.text for p in reversed(inp.prefix) if p.agent == "analyst" and p.text.startswith("Report:")), "")
    m = RESULT.search(report)
    return m.group(1) if m else None


def _v2(inp: GenInput) -> Generated | None:
    """The reviewer approves an unrounded result, or sends a right one back to be rounded to fewer decimals."""
    if not _verdict(inp):
        return None
    result, asked = _last_result(inp), asked_decimals(inp.task_query)
    if result is None:
        return None
    if inp.text.startswith("REVISE: round"):
        return Generated(f"APPROVED: the report covers what the question asks.\nreporter, please report the result: "
                         f"{result}", f"approves {result} without checking the decimals the question asks ({asked})")
    if inp.text.startswith("APPROVED") and asked >= 1 and rounded(rounded(result, asked - 1), asked) != result:
        fewer = asked - 1
        return Generated(f"REVISE: round the result to {fewer} decimal place{'' if fewer == 1 else 's'} as the question "
                         "asks.", f"sends back a right result to be rounded to {fewer} decimals where the question asks {asked}")
    return None


def _approval(inp: GenInput) -> re.Match | None:
    return APPROVED_VALUE.search(inp.text) if _verdict(inp) and inp.text.startswith("APPROVED") else None


def _c1(inp: GenInput) -> Generated | None:
    """The reviewer hands the reporting to the analyst, so the reporter is given no result to report."""
    m = _approval(inp)
    if m is None:
        return None
    return Generated(inp.text.replace(m.group(0), f"analyst, please report the result: {m.group(1)}"),
                     "hands the final report to the analyst instead of the reporter")


def _c2(inp: GenInput) -> Generated | None:
    """The reviewer passes the approved result on with its digits slipped."""
    m = _approval(inp)
    if m is None:
        return None
    old = m.group(1)
    digits = old.lstrip("-").replace(".", "")
    if len(set(digits)) == 1:
        return None
    new = slipped_digits(old) if "." not in old and not old.startswith("-") else perturb_number(old.lstrip("-"), inp.rng)
    new = ("-" if old.startswith("-") and not new.startswith("-") else "") + new
    if new == old:
        return None
    return Generated(inp.text.replace(m.group(0), f"reporter, please report the result: {new}"),
                     f"tells the reporter {new} where the approved report says {old}")


# -- the reporter's answer ----------------------------------------------------------------------------------
def _answer(inp: GenInput) -> re.Match | None:
    return _ANSWER.search(inp.text) if inp.agent == "reporter" and inp.kind == StepKind.final_answer else None


def _r1(inp: GenInput) -> Generated | None:
    """The reporter answers a value that appears nowhere in the run."""
    m = _answer(inp)
    if m is None:
        return None
    old = m.group(1)
    whole = int(float(old))
    seen = inp.prefix_text() + inp.text
    low, high = sorted((int(whole * 0.6) - 5, int(whole * 1.4) + 5))
    choices = [v for v in unseen_numbers(seen, low, high) if v != whole]
    if not choices:
        return None
    fraction = old.split(".", 1)[1] if "." in old else ""
    new = f"{inp.rng.choice(choices)}" + (f".{fraction}" if fraction else "")
    return Generated(inp.text.replace(old, new), f"answers {new}, a figure nothing in the run states, instead of {old}")


def _r3_answer(inp: GenInput) -> Generated | None:
    """The reporter cuts the approved result's decimals off instead of keeping it as approved."""
    m = _answer(inp)
    if m is None or "." not in m.group(1) or m.group(1).endswith("0"):
        return None
    cut = m.group(1)[:-1]
    cut = cut[:-1] if cut.endswith(".") else cut
    return Generated(inp.text.replace(m.group(1), cut), f"writes {m.group(1)} as {cut}")


def _a4(inp: GenInput) -> Generated | None:
    """The answer line carries a unit, not the bare number asked for."""
    m = _answer(inp)
    if m is None:
        return None
    unit = inp.rng.choice(["%", "EUR", "euros"] if "percentage" in inp.task_query else ["EUR", "euros", "(rounded)"])
    return Generated(inp.text.replace(m.group(0), f"ANSWER: {m.group(1)} {unit}"), "gives the answer with a unit, not a bare number")


def _c3(inp: GenInput) -> Generated | None:
    """The reporter passes the analyst's first figure on as the answer instead of the approved result."""
    m = _answer(inp)
    if m is None:
        return None
    report = next((p.text for p in reversed(inp.prefix) if p.agent == "analyst" and p.text.startswith("Report:")), "")
    figures = REPORT_FIGURE.findall(report)
    if not figures or figures[0][2] == m.group(1):
        return None
    value = figures[0][2]
    return Generated(f"The analyst's report gives {value}.\nANSWER: {value}",
                     "passes the analyst's first figure on as the answer without the computation the question asks")


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3_report, _r3_answer], "R.4": [_r4], "A.2": [_a2], "A.3": [_a3],
            "A.4": [_a4], "A.5": [_a5], "V.1": [_v1], "V.2": [_v2], "C.1": [_c1], "C.2": [_c2], "C.3": [_c3]}
