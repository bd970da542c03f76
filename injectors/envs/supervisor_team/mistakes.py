"""Error rules of `supervisor_team` (tried before the generic ones): the team's own kinds of mistakes.

Where each rule acts (see `env` for the steps): the supervisor's plan, its first handoff (R.4, PL.1, PL.2, PL.3,
C.1); the researcher's look-ups (A.1, A.2, A.3, A.6, V.2) and its report (R.1, C.2); the supervisor's brief to the
calculator (R.2, V.1, A.5, C.1, C.3); the calculator's expression (R.3, A.4); the supervisor's answer (A.4).
Each error is one the simulated agents after it act on, so it reaches the answer.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, change_a_number
from ..agents_desk.wire import render_call
from ..base import parse_action
from .policy import HANDOFF, tool_arguments
from .world import COMPUTE_BRIEF, FIGURE, ITEMS, LOOKUP_BRIEF, PLAN_FORMULA, PLAN_LOOKUP, money

_QUANTITY = re.compile(r"\b(\d+) \* ")


def _handoff(inp: GenInput, to: str) -> tuple[str, str] | None:
    """(thought, worker) of a supervisor step that hands work to `to` ("" = any worker)."""
    action = parse_action(inp.text)
    if inp.agent != "supervisor" or action is None or not action.tool.startswith("transfer_to_"):
        return None
    worker = action.tool.removeprefix("transfer_to_")
    return (action.thought, worker) if to in ("", worker) else None


def _plan(inp: GenInput) -> str | None:
    """The thought of the supervisor's plan (its first handoff), or None."""
    found = _handoff(inp, "researcher")
    return found[0] if found and inp.kind == StepKind.plan and PLAN_FORMULA.search(found[0]) else None


# -- the plan ------------------------------------------------------------------------
def _r4(inp: GenInput) -> Generated | None:
    """The plan misreads the question: one unit of each item, where it asks for several."""
    plan = _plan(inp)
    if plan is None:
        return None
    found = PLAN_FORMULA.search(plan)
    if found is None:  # `_plan` keeps only plans with the formula line
        return None
    formula = found.group(1)
    new = _QUANTITY.sub("", formula)
    return Generated(render_call(HANDOFF["researcher"], {}, plan.replace(formula, new)),
                     f"plans to compute {new}, one unit of each item, where the question asks for {formula}")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan looks up only the first item, though its formula needs the prices of both."""
    plan = _plan(inp)
    found = PLAN_LOOKUP.search(plan or "")
    brief = LOOKUP_BRIEF.search(plan or "")
    if plan is None or found is None or brief is None or " and " not in found.group(3):
        return None
    first, dropped = found.group(3).split(" and ")[0], found.group(3).split(" and ")[1]
    text = plan.replace(found.group(0), found.group(0).replace(found.group(3), first))
    text = text.replace(brief.group(0), brief.group(0).replace(brief.group(2), first))
    return Generated(render_call(HANDOFF["researcher"], {}, text),
                     f"plans to look up only {first}'s price, though its formula also needs {dropped}'s")


def _pl2(inp: GenInput) -> Generated | None:
    """The plan gives the look-up to an inventory agent the team does not have."""
    plan = _plan(inp)
    if plan is None:
        return None
    text = plan.replace("1. researcher:", "1. inventory:").replace("researcher, look up", "inventory, look up")
    return Generated(render_call("transfer_to_inventory", {}, text),
                     "plans the look-up for an inventory agent, which the team does not have (no such handoff)")


def _pl3(inp: GenInput) -> Generated | None:
    """The plan drifts to the items' shipping costs, a related figure, instead of their unit prices."""
    plan = _plan(inp)
    if plan is None:
        return None
    return Generated(render_call(HANDOFF["researcher"], {}, plan.replace("unit prices", "shipping costs")),
                     "plans around the items' shipping costs where the question asks what they cost at the unit prices")


def _c1_plan(inp: GenInput) -> Generated | None:
    """The supervisor hands the look-up to the calculator, which has no look-up tool."""
    plan = _plan(inp)
    if plan is None:
        return None
    text = plan.replace("researcher, look up", "calculator, look up")
    return Generated(render_call(HANDOFF["calculator"], {}, text), "hands the price look-up to the calculator, not the researcher")


# -- the researcher ------------------------------------------------------------------
def _lookup(inp: GenInput) -> dict | None:
    if inp.agent != "researcher" or inp.kind != StepKind.tool_call:
        return None
    args = tool_arguments(inp.text)
    return args if args and isinstance(args.get("item"), str) else None


def _a1(inp: GenInput) -> Generated | None:
    """The researcher calls lookup_shipping, a real tool but the wrong one: the shipping cost goes out as the price."""
    args, action = _lookup(inp), inp.action
    if args is None or action is None or action.tool != "lookup_price":
        return None
    return Generated(render_call("lookup_shipping", args, action.thought),
                     f"calls lookup_shipping for {args['item']} where its brief asks for the unit price (lookup_price)")


def _a2(inp: GenInput) -> Generated | None:
    """The researcher looks up another item of the catalogue than the one it means (and reports it as that one)."""
    args, action = _lookup(inp), inp.action
    if args is None or action is None:
        return None
    named = set(re.findall(r"\b(%s)\b" % "|".join(ITEMS), inp.task_query))
    others = [i for i in ITEMS if i not in named and i != args["item"]]
    other = inp.rng.choice(others)
    return Generated(render_call(action.tool, {**args, "item": other}, action.thought.replace(args["item"], other)),
                     f"looks up {other} where it means {args['item']}")


def _found(inp: GenInput) -> list[tuple[str, str]]:
    """(item, figure) of the researcher's look-ups before the step."""
    return [(m.group(1), m.group(2)) for p in inp.prefix if p.agent == "researcher" and p.kind == StepKind.tool_result.value
            for m in [FIGURE.search(p.text.replace(":", ""))] if m]


def _brief_items(inp: GenInput) -> list[str]:
    for p in reversed(inp.prefix):
        m = LOOKUP_BRIEF.search(p.text) if p.agent == "supervisor" else None
        if m:
            return [i.strip() for i in m.group(2).split(",") if i.strip()]
    return []


def _a3(inp: GenInput) -> Generated | None:
    """The researcher reports an item's price without calling any look-up tool (the figure is made up)."""
    args = _lookup(inp)
    items = _brief_items(inp)
    if args is None or not items:
        return None
    figures = dict(_found(inp))
    made = {i: figures.get(i) or money(inp.rng.randint(150, 2500) / 100) for i in items}
    invented = [i for i in items if i not in figures]
    return Generated("Unit prices: " + ", ".join(f"{i} ${f}" for i, f in made.items()) + ".",
                     f"reports a price for {', '.join(invented)} without calling a look-up tool (made up)")


def _v2(inp: GenInput) -> Generated | None:
    """The researcher reports after pricing one item of two, saying every item of its brief is priced."""
    args = _lookup(inp)
    items, found = _brief_items(inp), _found(inp)
    if args is None or len(found) != 1 or len(items) < 2:
        return None
    item, figure = found[0]
    return Generated(f"Unit prices: {item} ${figure}. Checked: every item of the brief is priced.",
                     f"reports the look-up as complete and checked with {args['item']} not yet priced")


def _a6(inp: GenInput) -> Generated | None:
    """The researcher repeats its previous look-up instead of moving on to the next item (and takes the repeat's
    figure for that item)."""
    args = _lookup(inp)
    previous = next((p.text for p in reversed(inp.prefix) if p.agent == "researcher" and p.kind == StepKind.tool_call.value), None)
    repeated = tool_arguments(previous) if previous is not None else None
    if args is None or previous is None or previous == inp.text or repeated is None:
        return None
    return Generated(previous, f"repeats its look-up of {repeated.get('item')} instead of looking up {args['item']}")


def _report(inp: GenInput) -> list[tuple[str, str]] | None:
    if inp.agent != "researcher" or inp.kind != StepKind.message:
        return None
    return FIGURE.findall(inp.text) or None


def _c2(inp: GenInput) -> Generated | None:
    """The researcher's report gives the two items' figures the other way round."""
    figures = _report(inp)
    if not figures or len(figures) < 2 or figures[0][1] == figures[1][1]:
        return None
    (a, fa), (b, fb) = figures[:2]
    text = inp.text.replace(f"{a} ${fa}", f"{a} $<A>").replace(f"{b} ${fb}", f"{b} ${fa}").replace("<A>", fb)
    return Generated(text, f"reports {a} at ${fb} and {b} at ${fa}, the other way round from its look-ups")


def _r1(inp: GenInput) -> Generated | None:
    """The researcher's report states a price that none of its look-ups returned."""
    if not _report(inp):
        return None
    changed = change_a_number(inp.text, inp.rng)
    if changed is None or changed[2] in " ".join(p.text for p in inp.prefix):
        return None
    text, old, new = changed
    return Generated(text, f"reports ${new}, a figure none of its look-ups returned, where the look-up said ${old}")


# -- the supervisor's brief to the calculator -------------------------------------------
def _brief(inp: GenInput) -> tuple[str, str] | None:
    """(thought, expression) of the supervisor's brief to the calculator."""
    found = _handoff(inp, "calculator")
    if not found:
        return None
    m = COMPUTE_BRIEF.search(found[0])
    return (found[0], m.group(1)) if m and inp.kind == StepKind.message else None


def _r2(inp: GenInput) -> Generated | None:
    """The supervisor combines the right figures the wrong way (+ for -, - for +)."""
    brief = _brief(inp)
    if brief is None:
        return None
    thought, expr = brief
    if "(" in expr:
        new = expr.replace(" - (", " + (", 1)
    elif " - " in expr:
        new = expr.replace(" - ", " + ", 1)
    else:
        new = expr.replace(" + ", " - ", 1)
    return Generated(render_call(HANDOFF["calculator"], {}, thought.replace(expr, new)), f"asks for {new} where {expr} answers the question")


def _v1(inp: GenInput) -> Generated | None:
    """The supervisor's brief uses the other item's quantity for the first item (the question's figure is lost)."""
    brief = _brief(inp)
    if brief is None:
        return None
    thought, expr = brief
    quantities = _QUANTITY.findall(expr)
    if len(quantities) < 2 or quantities[0] == quantities[1]:
        return None
    new = _QUANTITY.sub(f"{quantities[1]} * ", expr, count=1)
    return Generated(render_call(HANDOFF["calculator"], {}, thought.replace(expr, new)),
                     f"uses a quantity of {quantities[1]} for the first item, where the question gives {quantities[0]}")


def _a5(inp: GenInput) -> Generated | None:
    """The supervisor answers with the first reported price instead of having the calculator compute the answer."""
    brief = _brief(inp)
    figures = [f for p in inp.prefix if p.agent == "researcher" and p.kind == StepKind.message.value for _, f in FIGURE.findall(p.text)]
    if brief is None or not figures:
        return None
    return Generated(f"The researcher has reported the figures.\nANSWER: {figures[0]}",
                     "answers with the first reported price before the calculator computed the answer")


def _c1_brief(inp: GenInput) -> Generated | None:
    """The supervisor hands the computation to the researcher, which has no calculator."""
    brief = _brief(inp)
    if brief is None:
        return None
    return Generated(render_call(HANDOFF["researcher"], {}, brief[0].replace("calculator, compute", "researcher, compute")),
                     "hands the computation to the researcher, not the calculator")


def _c3(inp: GenInput) -> Generated | None:
    """The supervisor leaves the computation to the calculator working from the researcher's report alone."""
    brief = _brief(inp)
    if brief is None:
        return None
    thought, expr = brief
    return Generated(render_call(HANDOFF["calculator"], {}, thought.replace(expr, "the sum of the figures in the researcher's report")),
                     "relies on the calculator to work the answer out from the researcher's report, without the question's quantities")


# -- the calculator and the answer -----------------------------------------------------
def _expression(inp: GenInput) -> str | None:
    if inp.agent != "calculator" or inp.kind != StepKind.tool_call:
        return None
    args = tool_arguments(inp.text)
    return args.get("expression") if args and isinstance(args.get("expression"), str) else None


def _r3(inp: GenInput) -> Generated | None:
    """The calculator copies a price into its expression with two digits swapped."""
    expr, action = _expression(inp), inp.action
    prices = [m for m in re.finditer(r"\d+\.(\d)(\d)", expr or "") if m.group(1) != m.group(2)]
    if expr is None or action is None or not prices:
        return None
    m = inp.rng.choice(prices)
    new_price = m.group(0)[:-2] + m.group(2) + m.group(1)
    new = expr[: m.start()] + new_price + expr[m.end():]
    return Generated(render_call("calculate", {"expression": new}, action.thought),
                     f"copies {m.group(0)} as {new_price} into the expression")


def _a4(inp: GenInput) -> Generated | None:
    """The calculator writes × for *, which its tool cannot parse; or the supervisor answers without the ANSWER line."""
    expr, action = _expression(inp), inp.action
    if expr is not None and action is not None and " * " in expr:
        return Generated(render_call("calculate", {"expression": expr.replace(" * ", " × ")}, action.thought),
                         "writes the expression with × signs, which the calculate tool cannot parse")
    m = re.search(r"^ANSWER: (.+)$", inp.text, re.M)
    if inp.agent == "supervisor" and inp.kind == StepKind.final_answer and m:
        return Generated(inp.text[: m.start()] + f"The answer is ${m.group(1)}.", "gives the answer without the required 'ANSWER: <value>' line")
    return None


MUTATORS = {
    "R.1": [_r1], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4],
    "PL.1": [_pl1], "PL.2": [_pl2], "PL.3": [_pl3],
    "A.1": [_a1], "A.2": [_a2], "A.3": [_a3], "A.4": [_a4], "A.5": [_a5], "A.6": [_a6],
    "V.1": [_v1], "V.2": [_v2],
    "C.1": [_c1_plan, _c1_brief], "C.2": [_c2], "C.3": [_c3],
}
