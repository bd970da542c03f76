"""Error rules specific to `table_qa` (tried before the generic rules of each mode)."""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput
from ..base import parse_action, render_action
from .world import CATEGORIES, REGIONS, YEARS


def _plan(inp: GenInput) -> bool:
    return inp.kind == StepKind.plan and inp.text.startswith("Plan:")


def _main_code(inp: GenInput):
    action = parse_action(inp.text) if inp.kind == StepKind.tool_call else None
    if action is None or action.argument.startswith(("# check", "# look")):
        return None
    return action


def plan_r4(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    m = re.search(r"^- compute (sum|avg|count) of (units \* price|units|price|rows)(.*)$", inp.text, re.M)
    if m is None:
        return None
    op, expr, rest = m.groups()
    swap = {"units": ("sum", "price"), "price": ("avg", "units"), "units * price": ("sum", "units"), "rows": ("sum", "units")}
    new_op, new_expr = swap[expr]
    if op == "avg":
        new_op = "avg"
    line = f"- compute {new_op} of {new_expr}{rest}"
    return Generated(inp.text[: m.start()] + line + inp.text[m.end():], f"the plan computes {new_op} of {new_expr}, not what the question asks")


def plan_r1(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    m = re.search(r"^- filter (region|category|year) = (\w+)$", inp.text, re.M)
    if m is None:
        return None
    pool = {"region": REGIONS, "category": CATEGORIES, "year": [str(y) for y in YEARS]}[m.group(1)]
    seen = inp.task_query + inp.prefix_text()
    choices = [v for v in pool if v != m.group(2) and v not in seen]
    if not choices:
        return None
    new = inp.rng.choice(choices)
    return Generated(inp.text[: m.start(2)] + new + inp.text[m.end(2):], f"the plan filters on {m.group(1)} {new}, which the question never mentions")


def plan_pl1(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    filters = list(re.finditer(r"^- filter .+\n", inp.text, re.M))
    if len(filters) < 2:
        return None
    drop = inp.rng.choice(filters)
    return Generated(inp.text[: drop.start()] + inp.text[drop.end():], f"the plan leaves out a condition of the question ({drop.group(0)[2:].strip()})")


def plan_pl2(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    m = re.search(r"^- compute", inp.text, re.M)
    if m is None:
        return None
    extra = inp.rng.choice(["- filter month = March\n", "- filter status = shipped\n", "- filter customer = retail\n"])
    return Generated(inp.text[: m.start()] + extra + inp.text[m.start():], f"the plan filters on a column the table does not have ({extra[9:].strip()})")


def plan_r2(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    if "take the largest" in inp.text:
        return Generated(inp.text.replace("take the largest", "take the smallest"), "the plan takes the smallest total for the region that sold the most")
    m = re.search(r"^- filter (\w+) > (\d+)$", inp.text, re.M)
    if m:
        return Generated(inp.text[: m.start()] + f"- filter {m.group(1)} < {m.group(2)}" + inp.text[m.end():],
                         "the plan turns 'more than' into 'less than'")
    return None


def plan_a5(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    guess = inp.rng.choice(["0", "12", "36", "North", "150"])
    return Generated(inp.text + f"\nThe table is small enough to read directly.\nAnswer: {guess}", "answers before running any code")


def code_r3(inp: GenInput) -> Generated | None:
    action = _main_code(inp)
    if action is None or "ROUND(" not in action.argument:
        return None
    argument = action.argument.replace(", 2)", ", 0)", 1)
    return Generated(render_action(action.tool, argument, action.thought, code=True), "rounds the result to whole units instead of 2 decimals")


def code_r4(inp: GenInput) -> Generated | None:
    action = _main_code(inp)
    if action is None or " > " not in action.argument:
        return None
    return Generated(render_action(action.tool, action.argument.replace(" > ", " >= ", 1), action.thought, code=True),
                     "counts 'at least' where the question says 'more than'")


def check_v2(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.kind == StepKind.tool_call else None
    if action is None or not action.argument.startswith("# check"):
        return None
    argument = re.sub(r" WHERE .+?\"\)", '")', action.argument)
    return Generated(render_action(action.tool, argument, action.thought, code=True), "the check counts every row, so it cannot catch a bad filter")


def final_v1(inp: GenInput) -> Generated | None:
    if inp.kind != StepKind.final_answer:
        return None
    m = re.search(r"matched (\d+) rows\.\nAnswer: (.+)$", inp.text)
    if m is None or m.group(1) == m.group(2):
        return None
    return Generated(inp.text[: m.start(2)] + m.group(1), f"answers with the row count {m.group(1)} from the check instead of the query's result")


MUTATORS = {
    "R.1": [plan_r1],
    "R.4": [plan_r4, code_r4],
    "PL.1": [plan_pl1],
    "PL.2": [plan_pl2],
    "R.2": [plan_r2],
    "A.5": [plan_a5],
    "R.3": [code_r3],
    "V.2": [check_v2],
    "V.1": [final_v1],
}
