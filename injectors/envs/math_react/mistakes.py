"""Error rules specific to `math_react` (tried before the generic rules of each mode).

Each rule takes a `GenInput` and returns a `Generated` (the rewritten action and
a one-line reason for the gold label) or None when it does not fit the step.
Where a mode has several natural forms, the rule picks one with `inp.rng`.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, change_a_number, numbers, perturb_number
from ..base import parse_action, render_action
from .world import UNIT_GROUPS, calculate, convert, parse_plan, render_plan, tool_value

_STEP = re.compile(r"^Step (\d+):", re.M)


def _plan(inp: GenInput):
    if inp.kind != StepKind.plan or not inp.text.startswith("Plan:"):
        return None
    plan = parse_plan(inp.text)
    return plan or None


def _prefix_plan(inp: GenInput):
    for p in inp.prefix:
        if p.text.startswith("Plan:"):
            return parse_plan(p.text)
    return []


def _action(inp: GenInput, tool: str | None = None):
    action = parse_action(inp.text) if inp.kind == StepKind.tool_call else None
    if action is None or (tool and action.tool != tool):
        return None
    return action


# -- the plan ---------------------------------------------------------------

def plan_r4(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    answer = plan[-1]
    before = plan[-2] if len(plan) >= 2 else None
    if answer[0] == "answer" and before and before[0] == "convert" and before[2] == answer[1]:
        m = re.match(r"^(\w+) (\S+) to (\S+)$", before[1])
        if m and not re.match(r"-?\d", m.group(1)):
            new = plan[:-2] + [("answer", m.group(1), m.group(2))]
            return Generated(render_plan(new), f"the plan answers in {m.group(2)} although the question asks for {m.group(3)}")
    # ignore a stated factor or term of the last calculation
    for k in range(len(plan) - 1, -1, -1):
        op, arg, name = plan[k]
        if op != "calculate":
            continue
        terms = list(re.finditer(r" ([*/+-]) (\d+(?:\.\d+)?)(?![\w.])", arg))
        terms = [t for t in terms if t.group(2) not in ("1", "100", "60")]
        if terms and len(re.findall(r" [*/+-] ", arg)) >= 2:
            t = inp.rng.choice(terms)
            plan = list(plan)
            plan[k] = (op, arg[: t.start()] + arg[t.end():], name)
            return Generated(render_plan(plan), f"the plan leaves out the '{t.group(1)} {t.group(2)}' the question states")
    return None


def plan_pl1(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    converts = [k for k, (op, arg, _) in enumerate(plan) if op == "convert" and re.match(r"^-?\d", arg)]
    if not converts:
        return None
    k = inp.rng.choice(converts)
    raw = plan[k][1].split(" ")[0]
    name = plan[k][2]
    rest = [(op, re.sub(rf"(?<![\w]){name}(?![\w])", raw, arg), out) if op != "answer" else (op, arg, out)
            for op, arg, out in plan[k + 1:]]
    if any(op == "answer" and arg == name for op, arg, _ in rest):
        return None
    new = plan[:k] + rest
    return Generated(render_plan(new), f"the plan skips converting {plan[k][1].split(' to ')[0]} and uses the raw number")


def plan_pl2(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    for k, (op, arg, name) in enumerate(plan):
        m = re.match(r"^(\S+) (\S+) to (\S+)$", arg) if op == "convert" else None
        if m:
            group = next((g for g in UNIT_GROUPS if m.group(3) in g), [])
            other = next(g for g in UNIT_GROUPS if g is not group and g != group)
            unit = inp.rng.choice(other)
            plan = list(plan)
            plan[k] = (op, f"{m.group(1)} {m.group(2)} to {unit}", name)
            return Generated(render_plan(plan), f"the plan converts {m.group(2)} to {unit}, which measure different things")
    return None


def plan_pl3(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None or plan[-1][0] != "answer" or len(plan) < 3:
        return None
    earlier = [name for op, _, name in plan[:-2] if op != "answer"]
    if not earlier:
        return None
    name = inp.rng.choice(earlier)
    new = list(plan[:-1]) + [("answer", name, plan[-1][2])]
    return Generated(render_plan(new), f"the plan ends by reporting {name} instead of {plan[-1][1]}")


def plan_r2(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    calcs = [k for k, (op, _, _) in enumerate(plan) if op == "calculate"]
    inp.rng.shuffle(calcs)
    for k in calcs:
        op, arg, name = plan[k]
        m = re.match(r"^(\S+) (/|-) (\S+)$", arg)
        if m:
            new_arg = f"{m.group(3)} {m.group(2)} {m.group(1)}"
            reason = f"the plan computes {new_arg}, the wrong way round"
        elif " * " in arg and " / " in arg:
            new_arg = arg.replace(" / ", " * ", 1)
            reason = "the plan multiplies where it must divide"
        elif " / " in arg:
            new_arg = arg.replace(" / ", " * ", 1)
            reason = "the plan multiplies where it must divide"
        else:
            continue
        plan = list(plan)
        plan[k] = (op, new_arg, name)
        return Generated(render_plan(plan), reason)
    return None


def plan_r1(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None:
        return None
    text = inp.text
    found = [m for m in numbers(text) if not re.match(r"^\d+\. ", text[m.start():]) and text[m.start() - 1] != "\n"]
    found = [m for m in found if m.group(0) not in ("100", "60")]
    if not found:
        return None
    m = inp.rng.choice(found)
    new = perturb_number(m.group(0), inp.rng)
    return Generated(text[: m.start()] + new + text[m.end():], f"the plan uses {new}, a figure the problem never gives, for {m.group(0)}")


def plan_a5(inp: GenInput) -> Generated | None:
    plan = _plan(inp)
    if plan is None or len(plan) < 3:
        return None
    first = plan[0]
    return Generated(render_plan([first, ("answer", first[2], plan[-1][2])]), "the plan answers after its first step")


# -- acting steps -------------------------------------------------------------

def _values(inp: GenInput) -> list[str]:
    out = []
    for p in inp.prefix:
        if p.kind == StepKind.tool_result.value:
            v = tool_value("convert", p.text) or tool_value("calculate", p.text)
            if v is not None:
                out.append(v)
    return out


def call_r3(inp: GenInput) -> Generated | None:
    action = _action(inp, "calculate")
    if action is None or action.thought.startswith("Check"):
        return None
    changed = change_a_number(action.argument, inp.rng)
    if changed is None:
        return None
    argument, old, new = changed
    return Generated(render_action(action.tool, argument, action.thought), f"copies {old} as {new} into the calculation")


def answer_r3(inp: GenInput) -> Generated | None:
    if inp.kind != StepKind.final_answer:
        return None
    m = re.search(r"^Answer: (-?[\d.]+) (\S+)$", inp.text, re.M)
    if m is None:
        return None
    value = float(m.group(1))
    new = inp.rng.choice([f"{value:.1f}0", f"{round(value):.2f}", f"{value * inp.rng.choice([10, 0.1]):.2f}"])
    if float(new) == value:
        new = perturb_number(m.group(1), inp.rng)
    return Generated(inp.text[: m.start(1)] + new + inp.text[m.end(1):], f"rounds or shifts {m.group(1)} to {new} in the answer")


def call_a1(inp: GenInput) -> Generated | None:
    action = _action(inp)
    if action is None:
        return None
    if action.tool == "convert":
        number = action.argument.split(" ")[0]
        return Generated(render_action("calculate", number, action.thought), "calls calculate where a unit conversion was needed")
    return Generated(render_action("convert", action.argument, action.thought), "calls convert for an arithmetic step")


def call_a2(inp: GenInput) -> Generated | None:
    action = _action(inp, "convert")
    m = re.match(r"^(\S+) (\S+) to (\S+)$", action.argument) if action else None
    if m is None:
        return None
    group = next((g for g in UNIT_GROUPS if m.group(2) in g), None)
    if not group:
        return None
    unit = inp.rng.choice([u for u in group if u not in (m.group(2), m.group(3))])
    return Generated(render_action("convert", f"{m.group(1)} {unit} to {m.group(3)}", action.thought),
                     f"converts from {unit} where the quantity is in {m.group(2)}")


def call_a3(inp: GenInput) -> Generated | None:
    action = _action(inp)
    step = _STEP.search(inp.text)
    plan = _prefix_plan(inp)
    if action is None or step is None or not plan or inp.rng.random() < 0.3:
        return None  # the generic rule (a tool that does not exist) then applies
    k = int(step.group(1))
    if not 1 <= k <= len(plan):
        return None
    out = calculate(action.argument, None) if action.tool == "calculate" else convert(action.argument, None)  # type: ignore[arg-type]
    value = tool_value(action.tool, out)
    if value is None:
        return None
    claimed = perturb_number(value, inp.rng)
    name = plan[k - 1][2]
    return Generated(f"Step {k}: I worked this out already, no need for the tool.\nNote: {name} = {claimed}",
                     f"claims a {action.tool} result ({claimed}) without running the tool")


def call_a6(inp: GenInput) -> Generated | None:
    action = _action(inp)
    step = _STEP.search(inp.text)
    if action is None or step is None:
        return None
    for p in reversed(inp.prefix):
        if p.kind == StepKind.tool_call.value and _STEP.search(p.text) and p.text != inp.text:
            earlier = parse_action(p.text)
            if earlier is None:
                return None
            thought = _STEP.sub(f"Step {step.group(1)}:", earlier.thought)
            return Generated(render_action(earlier.tool, earlier.argument, thought), "runs the previous step's call again instead of the next one")
    return None


def call_v1(inp: GenInput) -> Generated | None:
    action = _action(inp, "calculate")
    if action is None or action.thought.startswith("Check"):
        return None
    values = _values(inp)
    here = [m for m in numbers(action.argument) if m.group(0) in values]
    if not here:
        return None
    m = inp.rng.choice(here)
    others = [v for v in values if v != m.group(0) and v not in action.argument]
    if not others:
        return None
    new = inp.rng.choice(others)
    argument = action.argument[: m.start()] + new + action.argument[m.end():]
    return Generated(render_action("calculate", argument, action.thought), f"uses {new}, an earlier result, in place of {m.group(0)}")


def check_v2(inp: GenInput) -> Generated | None:
    action = _action(inp, "calculate")
    if action is None or not action.thought.startswith("Check"):
        return None
    m = re.match(r"^(\S+) (/|-|\*|\+) (\S+)(.*)$", action.argument)
    if m is None:
        return None
    if m.group(2) in "/-":
        argument = f"{m.group(3)} {m.group(2)} {m.group(1)}{m.group(4)}"
    else:
        argument = f"{m.group(1)} {'-' if m.group(2) == '+' else '/'} {m.group(3)}{m.group(4)}"
    return Generated(render_action("calculate", argument, action.thought), "the check recomputes a different expression and overrides a right result")


def note_r3(inp: GenInput) -> Generated | None:
    m = re.match(r"^Note: (\w+) = (-?[\d.]+)$", inp.text) if inp.kind == StepKind.message else None
    if m is None:
        return None
    new = perturb_number(m.group(2), inp.rng)
    return Generated(f"Note: {m.group(1)} = {new}", f"notes {m.group(1)} as {new} where the tool gave {m.group(2)}")


def note_a5(inp: GenInput) -> Generated | None:
    m = re.match(r"^Note: (\w+) = (-?[\d.]+)$", inp.text) if inp.kind == StepKind.message else None
    plan = _prefix_plan(inp)
    if m is None or not plan or plan[-1][0] != "answer" or plan[-1][1] == m.group(1):
        return None
    return Generated(f"Note: {m.group(1)} = {m.group(2)}\nAnswer: {float(m.group(2)):.2f} {plan[-1][2]}",
                     f"answers with {m.group(1)}, an intermediate value, before finishing the plan")


def note_v1(inp: GenInput) -> Generated | None:
    m = re.match(r"^Note: (\w+) = (-?[\d.]+)$", inp.text) if inp.kind == StepKind.message else None
    if m is None:
        return None
    others = [v for v in _values(inp) if v != m.group(2)]
    if not others:
        return None
    new = inp.rng.choice(others)
    return Generated(f"Note: {m.group(1)} = {new}", f"notes {m.group(1)} as {new}, an earlier result, instead of {m.group(2)}")


MUTATORS = {
    "R.1": [plan_r1],
    "R.2": [plan_r2],
    "R.3": [call_r3, note_r3, answer_r3],
    "R.4": [plan_r4],
    "PL.1": [plan_pl1],
    "PL.2": [plan_pl2],
    "PL.3": [plan_pl3],
    "A.1": [call_a1],
    "A.2": [call_a2],
    "A.3": [call_a3],
    "A.5": [note_a5, plan_a5],
    "A.6": [call_a6],
    "V.1": [call_v1, note_v1],
    "V.2": [check_v2],
}

__all__ = ["MUTATORS"]
