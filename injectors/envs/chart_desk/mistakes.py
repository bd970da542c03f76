"""Error rules of `chart_desk` (tried before the generic ones): the desk's own kinds of mistakes.

Each rule reads one step in the environment's action form (`agents_desk.wire`):
the lead's plan (with its first `ask_chart_reader` delegation), a later
delegation (`ask_chart_reader` to zoom, `ask_calculator` with the expression),
its `final_result` answer; the reader's `view_chart` call or its readings (the
chart's image is the step's media); the calculator's `evaluate` call or its
`Result:`. Perception rules (P.1-P.3) misread the chart the way a look at an
image goes wrong, inside the y axis, so the lead's check lets them through.
"""

from __future__ import annotations

import json
import re
from typing import Any

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, Rule, change_a_number
from ..agents_desk.wire import render_call
from ..chart_qa import perception
from ..chart_qa.perception import Readings, render as _render
from ..chart_qa.world import compute, parse_plan, parse_readings
from .policy import RESULT, answer_call
from .world import CHART_ID, chart_task


def _call(inp: GenInput, agent: str, *tools: str) -> tuple[str, dict[str, Any], str] | None:
    """(tool, arguments, thought) of `agent`'s step when it calls one of `tools`."""
    action = inp.action
    if inp.agent != agent or action is None or action.tool not in tools:
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return (action.tool, args, action.thought) if isinstance(args, dict) else None


def _values(inp: GenInput) -> dict[str, int]:
    """Every reading the reader passed on before the step (a later re-read wins)."""
    values: dict[str, int] = {}
    for p in inp.prefix:
        if p.agent == "chart_reader" and p.kind == StepKind.message.value:
            values.update(parse_readings(p.text)[1])
    return values


def _plan_of(inp: GenInput) -> dict[str, str]:
    return parse_plan(next((p.text for p in inp.prefix if p.agent == "lead" and p.text.startswith("Plan:")), ""))


# -- P.1, P.2, P.3: the reader misreads the image ------------------------------
def _readings(inp: GenInput) -> Readings | None:
    """The reader's readings step, its chart known by the id it names."""
    if inp.agent != "chart_reader" or inp.kind != StepKind.message:
        return None
    name, values = parse_readings(inp.text)
    chart = CHART_ID.search(inp.text)
    if not values or chart is None:
        return None
    try:
        task = chart_task(chart.group(1))
    except KeyError:
        return None
    return Readings(name, list(values.items()), task, task.metadata["ymax"])


# -- the lead's plan ---------------------------------------------------------------
def _plan(inp: GenInput) -> tuple[dict[str, str], str] | None:
    found = _call(inp, "lead", "ask_chart_reader")
    if found is None or inp.kind != StepKind.plan:
        return None
    plan = parse_plan(found[2])
    return (plan, found[2]) if "compute" in plan and "read" in plan else None


def _replan(thought: str, reason: str, **lines: str) -> Generated:
    """The plan with some of its lines replaced, and the delegation that follows from its `read` line."""
    for key, value in lines.items():
        thought = re.sub(rf"^- {key}: .+$", f"- {key}: {value}", thought, count=1, flags=re.M)
    read = parse_plan(thought)["read"]
    return Generated(render_call("ask_chart_reader", {"instruction": f"read {read}"}, thought), reason)


def plan_r4(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None:
        return None
    plan, thought = got
    c = plan["compute"]
    if "highest" in c or "lowest" in c:
        new = c.replace("highest", "lowest") if "highest" in c else c.replace("lowest", "highest")
        return _replan(thought, "the plan looks for the opposite extreme from the one asked", compute=new)
    if c.startswith("the first label with a value above"):
        return _replan(thought, "the plan looks for the peak instead of the first year above the threshold",
                       compute="the label with the highest value")
    if " - " in c:
        return _replan(thought, "the plan adds where the question asks for a difference", compute=c.replace(" - ", " + "))
    if " + " in c:
        return _replan(thought, "the plan looks for the largest value where the question asks for a total",
                       compute="the label with the highest value", read="every bar")
    return None


def plan_pl1(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None or (" + " not in got[0]["compute"] and " - " not in got[0]["compute"]):
        return None
    plan, thought = got
    kept, dropped = plan["compute"].rsplit(" ", 2)[0], plan["compute"].rsplit(" ", 1)[-1]
    read = re.sub(rf",? (and )?{re.escape(dropped)}\b", "", plan["read"], count=1)
    return _replan(thought, f"the plan leaves out {dropped}, which the question needs", compute=kept, read=read)


def plan_pl2(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None:
        return None
    return _replan(got[1], "the plan relies on exporting the chart's data, which no tool can do",
                   read="the data table exported with export_csv")


def plan_pl3(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None:
        return None
    return _replan(got[1], "the plan sets out to describe the chart's design instead of answering the question",
                   read="the colours and layout of the chart", compute="a description of the design", answer="the description")


def plan_r2(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None or not re.fullmatch(r"\w+ - \w+", got[0]["compute"]):
        return None
    a, b = got[0]["compute"].split(" - ")
    return _replan(got[1], "the plan subtracts in the wrong direction", compute=f"{b} - {a}")


def plan_c1(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None:
        return None
    return Generated(render_call("ask_calculator", {"expression": f"read {got[0]['read']}"}, got[1]),
                     "the lead asks the calculator, who cannot see the chart, for the readings")


def plan_a5(inp: GenInput) -> Generated | None:
    got = _plan(inp)
    if got is None:
        return None
    words = [w for w in re.findall(r"\b[A-Z][a-z]+\b|\b\d{4}\b", inp.task_query) if w not in ("Which", "How", "What", "In", "By")]
    guess = words[0] if words and inp.rng.random() < 0.5 else str(inp.rng.randrange(5, 60))
    return Generated(answer_call(guess, "The question and the chart's title say enough.", got[1]),
                     "the lead answers before anything was read")


# -- the lead's delegations and answer ------------------------------------------------
def _expression(inp: GenInput) -> tuple[str, str] | None:
    """(expression, thought) of the lead's `ask_calculator` delegation."""
    found = _call(inp, "lead", "ask_calculator")
    if found is None or inp.kind != StepKind.message:
        return None
    return str(found[1].get("expression", "")), found[2]


def calc_c2(inp: GenInput) -> Generated | None:
    got = _expression(inp)
    changed = change_a_number(got[0], inp.rng) if got else None
    if got is None or changed is None:
        return None
    expr, old, new = changed
    return Generated(render_call("ask_calculator", {"expression": expr}, got[1]),
                     f"the lead passes the reading {old} to the calculator as {new}")


def calc_v1(inp: GenInput) -> Generated | None:
    got = _expression(inp)
    if got is None or got[0].count(" ") < 4:  # only sums of three or more readings
        return None
    kept = got[0].rsplit(" ", 2)[0]
    return Generated(render_call("ask_calculator", {"expression": kept}, got[1]),
                     "the lead's expression loses one of the readings the plan adds up")


def calc_a5(inp: GenInput) -> Generated | None:
    got = _expression(inp)
    values = _values(inp)
    if got is None or not values:
        return None
    first = next(iter(values.values()))
    return Generated(answer_call(str(first), f"The reader reports {first}.", got[1]),
                     "the lead answers with the first reading before computing what the question asks")


def zoom_c1(inp: GenInput) -> Generated | None:
    found = _call(inp, "lead", "ask_chart_reader")
    if found is None or inp.kind != StepKind.message or "zoom on" not in str(found[1].get("instruction")):
        return None
    return Generated(render_call("ask_calculator", {"expression": str(found[1]["instruction"])}, found[2]),
                     "the lead sends the re-read to the calculator, who cannot see the chart")


def check_v2(inp: GenInput) -> Generated | None:
    found = _call(inp, "lead", "ask_chart_reader")
    if found is None or inp.kind != StepKind.message or "zoom on" not in str(found[1].get("instruction")):
        return None
    plan, values = _plan_of(inp), _values(inp)
    expr, direct = compute(plan.get("compute", ""), values)
    head = "Check: the readings look fine."
    if direct is not None:
        if direct == "unknown":
            return None
        return Generated(answer_call(direct, f"From the readings: {plan.get('compute', '')} is {direct}.", head),
                         "the check passes a reading that fails it")
    return Generated(render_call("ask_calculator", {"expression": expr}, head), "the check passes a reading that fails it")


def _final(inp: GenInput) -> tuple[dict[str, Any], str] | None:
    found = _call(inp, "lead", "final_result")
    return (found[1], found[2]) if found is not None and inp.kind == StepKind.final_answer else None


def final_a4(inp: GenInput) -> Generated | None:
    got = _final(inp)
    if got is None:
        return None
    args, thought = got
    answer = str(args.get("answer", ""))
    unit = "units" if re.fullmatch(r"-?\d+(\.\d+)?", answer) else "(from the chart)"
    return Generated(render_call("final_result", {**args, "answer": f"{answer} {unit}"}, thought),
                     "the answer carries words where a bare number or label is required")


def final_c3(inp: GenInput) -> Generated | None:
    got = _final(inp)
    values = _values(inp)
    if got is None or not values:
        return None
    args, thought = got
    current = str(args.get("answer", ""))
    options = sorted({str(v) for v in values.values()} - {current}) if re.fullmatch(r"-?\d+", current) else \
        sorted(set(values) - {current})
    if not options:
        return None
    new = inp.rng.choice(options)
    return Generated(answer_call(new, f"The chart reader's readings give {new}.", thought),
                     f"the lead takes the reader's {new} as the answer without the computation the question needs")


def final_r2(inp: GenInput) -> Generated | None:
    got = _final(inp)
    values = _values(inp)
    if got is None or str(got[0].get("answer")) not in values or len(values) < 3:
        return None
    args, thought = got
    ranked = sorted(values, key=lambda k: values[k], reverse=True)
    new = ranked[1] if ranked[0] == args["answer"] else ranked[-2] if ranked[-1] == args["answer"] else ranked[0]
    return Generated(answer_call(new, f"{new} stands out among the readings ({new} = {values[new]}).", thought),
                     f"the lead concludes {new} from readings that single out {args['answer']}")


def final_r1(inp: GenInput) -> Generated | None:
    got = _final(inp)
    if got is None:
        return None
    args, thought = got
    answer, seen = str(args.get("answer", "")), inp.task_query + inp.prefix_text()
    if re.fullmatch(r"-?\d+", answer):
        options = [str(int(answer) + d) for d in (-7, -4, 6, 9, 13) if str(int(answer) + d) not in seen]
    else:
        options = [x for group in inp.distractors[:1] for x in group if x not in seen] if inp.distractors else []
    if not options:
        return None
    new = inp.rng.choice(sorted(options))
    return Generated(answer_call(new, f"The chart gives {new}.", thought), f"the lead answers {new}, which nothing it was given says")


# -- the reader and the calculator ------------------------------------------------
def _asked(inp: GenInput) -> str | None:
    """What the lead asked the reader to read (the delegation before a reader's step)."""
    instruction = next((p.text for p in reversed(inp.prefix) if p.agent == "lead"), "")
    asked = re.search(r'"instruction": "read ([^"]+)"', instruction)
    return asked.group(1) if asked else None


def view_a2(inp: GenInput) -> Generated | None:
    found, asked = _call(inp, "chart_reader", "view_chart"), _asked(inp)
    if found is None or found[1].get("view") != "full" or asked is None:
        return None
    if asked.startswith("every"):
        labels = inp.distractors[0] if inp.distractors else []
    else:
        labels = [w.strip() for w in re.split(r",| and ", asked.split(" of ")[0]) if w.strip()]
    if len(labels) < 2:
        return None
    return Generated(render_call("view_chart", {"view": labels[0]}, f"Zooming on {labels[0]}."),
                     f"zooms on {labels[0]} alone where the whole chart was needed")


def view_a1(inp: GenInput) -> Generated | None:
    found = _call(inp, "chart_reader", "view_chart")
    if found is None:
        return None
    return Generated(render_call("evaluate", {"expression": str(found[1].get("view", "full"))}, "Reading the chart."),
                     "the reader calls the calculator's evaluate instead of view_chart")


def view_a3(inp: GenInput) -> Generated | None:
    found, asked = _call(inp, "chart_reader", "view_chart"), _asked(inp)
    if found is None or asked is None or asked.startswith("every"):
        return None
    labels = [w.strip() for w in re.split(r",| and ", asked.split(" of ")[0]) if w.strip()]
    pairs = ", ".join(f"{label} = {inp.rng.randrange(5, 60)}" for label in labels)
    return Generated(f"I have viewed the chart.\nReadings (values): {pairs}",
                     "the reader reports readings from a view_chart call it never made")


def eval_a2(inp: GenInput) -> Generated | None:
    found = _call(inp, "calculator", "evaluate")
    changed = change_a_number(str(found[1].get("expression", "")), inp.rng) if found else None
    if found is None or changed is None:
        return None
    expr, old, new = changed
    return Generated(render_call("evaluate", {"expression": expr}, found[2]), f"evaluates with {new} where it was given {old}")


def _result(inp: GenInput) -> str | None:
    if inp.agent != "calculator" or inp.kind != StepKind.message:
        return None
    m = RESULT.search(inp.text)
    return m.group(1) if m and re.fullmatch(r"-?\d+", m.group(1)) else None


def result_r3(inp: GenInput) -> Generated | None:
    value = _result(inp)
    if value is None:
        return None
    new = str(int(value) + inp.rng.choice([-10, -2, -1, 1, 2, 10]))
    return Generated(f"Result: {new}", f"reports {new} where the expression comes to {value}")


def result_c2(inp: GenInput) -> Generated | None:
    value = _result(inp)
    if value is None or abs(int(value)) < 10:
        return None
    new = value[:-1] + "." + value[-1]
    return Generated(f"Result: {new}", f"passes the result {value} on as {new}")


def result_a4(inp: GenInput) -> Generated | None:
    value = _result(inp)
    if value is None:
        return None
    return Generated(f"Result: {value} (rounded)", "the result carries words where a bare number is required")


def plan_pl1_some(inp: GenInput) -> Generated | None:
    """A plan over every bar that reads only the first few."""
    got = _plan(inp)
    labels = inp.distractors[0] if inp.distractors else []
    if got is None or not got[0]["read"].startswith("every") or len(labels) < 5:
        return None
    plan, thought = got
    of = re.search(r" of (\w+)$", plan["read"])
    read = ", ".join(labels[:3]) + (f" of {of.group(1)}" if of else "")
    return _replan(thought, f"the plan reads only {', '.join(labels[:3])} where the question needs every label", read=read)


def final_r3(inp: GenInput) -> Generated | None:
    got = _final(inp)
    if got is None or not re.fullmatch(r"-?\d+", str(got[0].get("answer"))):
        return None
    args, thought = got
    answer = int(args["answer"])
    expr = re.match(r"^(.+?) = -?\d+", str(args.get("reasoning", "")))
    if expr is None:  # a value read off the chart: converted out of the axis's thousands
        new = str(answer * 1000)
        return Generated(answer_call(new, f"{answer} thousand on the axis, that is {new}.", thought),
                         f"the lead converts {answer} into {new} although the question asks in the chart's units")
    new = str(answer + inp.rng.choice([-10, -1, 1, 10]))
    return Generated(answer_call(new, f"{expr.group(1)} = {new}.", thought), f"the lead works {expr.group(1)} out as {new}")


def final_v1(inp: GenInput) -> Generated | None:
    got = _final(inp)
    values = _values(inp)
    if got is None or str(got[0].get("answer")) not in values or len(values) < 3:
        return None
    args, thought = got
    answer = str(args["answer"])
    other = inp.rng.choice(sorted(set(values) - {answer}))
    return Generated(answer_call(other, f"{other} = {values[answer]} is the reading that decides it.", thought),
                     f"the lead attributes {answer}'s reading ({values[answer]}) to {other}")


def reader_c2(inp: GenInput) -> Generated | None:
    """The reader swaps two values as it writes them up: the one that decides the answer and another."""
    got = _readings(inp)
    plan = _plan_of(inp)
    if got is None or len(got[1]) < 2 or " + " in plan.get("compute", ""):  # a sum does not change when two swap
        return None
    name, pairs, _, _ = got
    _, decisive = compute(plan.get("compute", ""), dict(pairs))
    labels = [label for label, _ in pairs]
    i = labels.index(decisive) if decisive in labels else 0
    j = inp.rng.choice([k for k in range(len(pairs)) if k != i])
    if pairs[i][1] == pairs[j][1]:
        return None
    pairs[i], pairs[j] = (pairs[i][0], pairs[j][1]), (pairs[j][0], pairs[i][1])
    return Generated(_render(inp, name, pairs), f"the reader passes the values of {pairs[i][0]} and {pairs[j][0]} on swapped")

def check_v2_reject(inp: GenInput) -> Generated | None:
    """The lead's check rejects a right reading and leaves it out of the computation it delegates."""
    values, expr = _values(inp), _expression(inp)
    numbers = re.findall(r"\d+", expr[0]) if expr else []
    label = next((k for k, v in values.items() if numbers and str(v) == numbers[-1]), None)
    if expr is None or label is None or len(numbers) < 2:
        return None
    head = f"Check: {label} = {numbers[-1]} does not match the chart's scale, so it is left out."
    return Generated(render_call("ask_calculator", {"expression": expr[0].rsplit(" ", 2)[0]}, head),
                     f"the check rejects the right reading of {label}")

MUTATORS: dict[str, list[Rule]] = {
    **perception.rules(_readings),
    "R.1": [final_r1],
    "R.2": [plan_r2, final_r2],
    "R.3": [result_r3, final_r3],
    "R.4": [plan_r4],
    "PL.1": [plan_pl1, plan_pl1_some],
    "PL.2": [plan_pl2],
    "PL.3": [plan_pl3],
    "A.1": [view_a1],
    "A.2": [eval_a2, view_a2],
    "A.3": [view_a3],
    "A.4": [final_a4, result_a4],
    "A.5": [plan_a5, calc_a5],
    "V.1": [calc_v1, final_v1],
    "V.2": [check_v2, check_v2_reject],
    "C.1": [plan_c1, zoom_c1],
    "C.2": [calc_c2, result_c2, reader_c2],
    "C.3": [final_c3],
}

__all__ = ["MUTATORS"]
