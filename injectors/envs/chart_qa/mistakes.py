"""Error rules specific to `chart_qa` (tried before the generic rules of each mode).

The perception rules (P.1, P.2, P.3) are shared with `chart_desk`
(`perception.py`); here they find the perceiver's readings and the chart
through the last chart id and y axis shown before it, as the simulated
perceiver does.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, Rule, change_a_number
from ..base import parse_action, render_action
from . import perception
from .perception import Readings
from .world import (
    AXIS,
    CHART_ID,
    chart_task,
    compute,
    parse_plan,
    parse_readings,
)


def _readings(inp: GenInput) -> Readings | None:
    """The perceiver's readings step, its chart known by the last id and axis shown before it."""
    if inp.agent != "perceiver" or inp.kind != StepKind.message:
        return None
    name, values = parse_readings(inp.text)
    if not values:
        return None
    seen = inp.prefix_text()
    ids = CHART_ID.findall(seen)
    if not ids:
        return None
    try:
        task = chart_task(ids[-1])
    except KeyError:
        return None
    axis = AXIS.findall(seen)
    ymax = int(axis[-1]) if axis else task.metadata["ymax"]
    return Readings(name, list(values.items()), task, ymax)


# -- analyst: plan ----------------------------------------------------------

def _plan(inp: GenInput) -> dict[str, str] | None:
    if inp.agent != "analyst" or inp.kind != StepKind.plan:
        return None
    plan = parse_plan(inp.text)
    return plan if "compute" in plan and "read" in plan else None


def _replace_line(text: str, key: str, value: str) -> str:
    return re.sub(rf"^- {key}: .+$", f"- {key}: {value}", text, count=1, flags=re.M)


def plan_r4(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    c = plan["compute"]
    if "highest" in c or "lowest" in c:
        new = c.replace("highest", "lowest") if "highest" in c else c.replace("lowest", "highest")
        return Generated(_replace_line(inp.text, "compute", new), "the plan looks for the opposite extreme from the one asked")
    if c.startswith("the first label with a value above"):
        return Generated(_replace_line(inp.text, "compute", "the label with the highest value"),
                         "the plan looks for the peak instead of the first year above the threshold")
    if " - " in c:
        return Generated(_replace_line(inp.text, "compute", c.replace(" - ", " + ")), "the plan adds where the question asks for a difference")
    if " + " in c:
        return Generated(_replace_line(inp.text, "compute", "the label with the highest value"),
                         "the plan looks for the largest value where the question asks for a total")
    return None


def plan_pl1(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    terms = re.findall(r"\w+", plan["compute"])
    if " + " not in plan["compute"] and " - " not in plan["compute"]:
        return None
    kept = plan["compute"].rsplit(" ", 2)[0]
    read = plan["read"]
    dropped = terms[-1]
    read = re.sub(rf",? {re.escape(dropped)}\b", "", read, count=1)
    text = _replace_line(_replace_line(inp.text, "compute", kept), "read", read)
    return Generated(text, f"the plan leaves out {dropped}, which the question needs")


def plan_pl2(inp: GenInput) -> Generated | None:
    if _plan(inp) is None:
        return None
    return Generated(_replace_line(inp.text, "read", "the data table exported with export_csv"),
                     "the plan relies on exporting the chart's data, which no tool can do")


def plan_r2(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None or not re.fullmatch(r"\w+ - \w+", plan["compute"]):
        return None
    a, b = plan["compute"].split(" - ")
    return Generated(_replace_line(inp.text, "compute", f"{b} - {a}"), "the plan subtracts in the wrong direction")


# -- analyst: delegation, check, result -------------------------------------

def _delegation(inp: GenInput) -> re.Match | None:
    if inp.agent != "analyst" or inp.kind != StepKind.message:
        return None
    return re.match(r"^perceiver: (read|zoom on) (.+)$", inp.text)


def delegation_c1(inp: GenInput) -> Generated | None:
    m = _delegation(inp)
    if m is None:
        return None
    return Generated("answerer: " + inp.text.split(": ", 1)[1], "the analyst sends the reading to the answerer, who cannot see the chart")


def delegation_a5(inp: GenInput) -> Generated | None:
    m = _delegation(inp)
    if m is None or m.group(1) != "read":
        return None
    words = [w for w in re.findall(r"\b[A-Z][a-z]+\b|\b\d{4}\b", inp.task_query) if w not in ("Which", "How", "What", "In", "By")]
    guess = words[0] if words and inp.rng.random() < 0.5 else str(inp.rng.randrange(5, 60))
    return Generated(f"The title already tells us enough.\nResult: {guess}", "the analyst reports a result before anything was read")


def delegation_pl3(inp: GenInput) -> Generated | None:
    m = _delegation(inp)
    if m is None or m.group(1) != "read":
        return None
    return Generated("perceiver: describe the chart's colours and layout", "the analyst turns to describing the chart instead of reading the values the question needs")


def check_v2(inp: GenInput) -> Generated | None:
    m = _delegation(inp)
    if m is None or m.group(1) != "zoom on":
        return None
    plan_text = next((p.text for p in inp.prefix if p.agent == "analyst" and p.text.startswith("Plan:")), "")
    plan = parse_plan(plan_text)
    values: dict[str, int] = {}
    for p in inp.prefix:
        if p.agent == "perceiver":
            values.update(parse_readings(p.text)[1])
    expr, direct = compute(plan.get("compute", ""), values)
    head = "Check: the readings look fine."
    if direct is not None:
        if direct == "unknown":
            return None
        return Generated(f"{head}\nResult: {direct}", "the check passes a reading that is off the chart")
    assert expr is not None  # compute gives an expression whenever it gives no direct result
    return Generated(render_action("calculate", expr, head), "the check passes a reading that is off the chart")


def calc_r3(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "analyst" and inp.kind == StepKind.tool_call else None
    if action is None or action.tool != "calculate":
        return None
    changed = change_a_number(action.argument, inp.rng)
    if changed is None:
        return None
    argument, old, new = changed
    return Generated(render_action(action.tool, argument, action.thought), f"the analyst copies {old} as {new} into the expression")


def answerer_c3(inp: GenInput) -> Generated | None:
    if inp.agent != "answerer":
        return None
    current = inp.text.removeprefix("Answer: ").strip()
    values: dict[str, int] = {}
    for p in inp.prefix:
        if p.agent == "perceiver":
            values.update(parse_readings(p.text)[1])
    options = sorted({str(v) for v in values.values()} - {current})
    if not options:
        return None
    new = inp.rng.choice(options)
    return Generated(f"Answer: {new}", f"the answerer takes the reading {new} as the answer instead of the analyst's result")


MUTATORS: dict[str, list[Rule]] = {
    **perception.rules(_readings),
    "R.4": [plan_r4],
    "PL.1": [plan_pl1],
    "PL.2": [plan_pl2],
    "PL.3": [delegation_pl3],
    "R.2": [plan_r2],
    "A.5": [delegation_a5],
    "C.1": [delegation_c1],
    "V.2": [check_v2],
    "R.3": [calc_r3],
    "C.3": [answerer_c3],
}
