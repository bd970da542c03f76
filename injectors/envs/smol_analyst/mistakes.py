"""Error rules of `smol_analyst` (tried before the generic ones): mistakes in the agents' code actions.

Where each rule acts (see `smol_analyst` for the steps): the analyst's plan (R.4, PL.1), its delegation to the
data agent (A.5, C.1), the data agent's look-up code (A.1, A.2, A.3) and its report (C.2), the analyst's check of
the report, where it copies the figures into lists (R.1, V.1, V.2), and its computation (R.2, R.3, A.4, C.3).
"""

from __future__ import annotations

import re
import statistics

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, change_a_number
from .tasks import MONTHS, operation_phrase, read_operation

_LOOKUP = re.compile(r'(lookup_sales|lookup_targets)\("([A-Za-z]+)"\)')
_REPORT = re.compile(r'final_answer\("([^"]*)"\)')
_LIST = re.compile(r"^([a-z]+) = \[([\d, ]+)\]$", re.M)
_DELEGATION = re.compile(r'data_agent\(task="Look up the monthly sales of ([^"]+)\."\)')
_COMPUTE = re.compile(r"^result = (.+)$", re.M)


def _a2(inp: GenInput) -> Generated | None:
    """The data agent looks up another region than the one it labels (the figures go out under the wrong name)."""
    found = [region for _, region in _LOOKUP.findall(inp.text)]
    if inp.kind != StepKind.tool_call or not found:
        return None
    region = inp.rng.choice(found)
    others = [r for g in inp.distractors for r in g if r != region and r not in found]
    if not others:
        return None
    other = inp.rng.choice(others)
    text = re.sub(rf'(lookup_sales|lookup_targets)\("{region}"\)', rf'\1("{other}")', inp.text, count=1)
    return Generated(text, f"calls the look-up with {other!r} instead of {region!r}")


def _a1(inp: GenInput) -> Generated | None:
    """The data agent calls lookup_targets, a real tool but the wrong one: the targets go out as the sales."""
    if inp.kind != StepKind.tool_call or "lookup_sales(" not in inp.text:
        return None
    return Generated(inp.text.replace("lookup_sales(", "lookup_targets("),
                     "calls lookup_targets where the task asks for the sales (lookup_sales)")


def _a3(inp: GenInput) -> Generated | None:
    """The data agent reports figures as looked up without calling any look-up tool (they are made up)."""
    regions = [region for _, region in _LOOKUP.findall(inp.text)]
    if inp.kind != StepKind.tool_call or inp.agent != "data_agent" or not regions:
        return None
    lines = [f"{r}: {', '.join(str(inp.rng.randint(10, 99)) for _ in range(MONTHS))}" for r in dict.fromkeys(regions)]
    report = "\\n".join(lines)
    return Generated(f"Thought: I have looked up the monthly sales of {', '.join(dict.fromkeys(regions))}.\n<code>\n"
                     f"final_answer(\"{report}\")\n</code>",
                     "reports figures as looked up without calling lookup_sales (they appear nowhere)")


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


def _c1(inp: GenInput) -> Generated | None:
    """The analyst delegates the wrong sub-task: the regions' sales targets where its plan needs their sales."""
    m = _DELEGATION.search(inp.text)
    if inp.agent != "analyst" or m is None:
        return None
    text = inp.text.replace(m.group(0), f'data_agent(task="Look up the monthly sales targets of {m.group(1)}.")')
    return Generated(text, f"asks data_agent for the sales targets of {m.group(1)} where the plan needs their sales")


_SWAPS = [("sum({a}) + sum({b})", "sum({a}) - sum({b})"), ("max({a}) - max({b})", "max({a}) - min({b})"),
          ("round(sum({a}) / len({a}), 1)", "round(sum({a}) / (len({a}) + 1), 1)")]
# Slips in carrying out the right computation: a month left out of a sum (off by one), the mean cut to an integer.
_SLIPS = [("sum({a}) + sum({b})", "sum({a}[1:]) + sum({b})", "sums {a} from its second month (off by one)"),
          ("max({a}) - max({b})", "max({a}[:-1]) - max({b})", "takes {a}'s best month over all but its last month"),
          ("round(sum({a}) / len({a}), 1)", "sum({a}) // len({a})", "divides with // (the mean cut to an integer)")]


def _operands(expression: str) -> tuple[str, str]:
    names = re.findall(r"\b([a-z]+)\)", expression)
    a, b = (names + names)[:2]
    return a, b


def _r2(inp: GenInput) -> Generated | None:
    """The analyst's computation combines the right figures the wrong way."""
    m = _COMPUTE.search(inp.text)
    if inp.agent != "analyst" or m is None:
        return None
    a, b = _operands(m.group(1))
    for right, wrong in _SWAPS:
        if m.group(1) == right.format(a=a, b=b):
            new = wrong.format(a=a, b=b)
            return Generated(inp.text.replace(m.group(0), f"result = {new}"), f"computes {new} where {m.group(1)} was needed")
    return None


def _r3(inp: GenInput) -> Generated | None:
    """The analyst computes the right quantity with a numerical slip (a month left out, integer division)."""
    m = _COMPUTE.search(inp.text)
    if inp.agent != "analyst" or m is None:
        return None
    a, b = _operands(m.group(1))
    for right, wrong, why in _SLIPS:
        if m.group(1) == right.format(a=a, b=b):
            return Generated(inp.text.replace(m.group(0), f"result = {wrong.format(a=a, b=b)}"), why.format(a=a))
    return None


_ANSWER = "final_answer(result)"


def _a4(inp: GenInput) -> Generated | None:
    """The analyst's final answer is a sentence, not the bare number the task asks for."""
    if inp.agent != "analyst" or inp.kind != StepKind.final_answer or _ANSWER not in inp.text:
        return None
    form = inp.rng.choice(['final_answer(f"{result} units")', 'final_answer(f"The answer is {result}.")',
                           'final_answer(f"about {result}")'])
    return Generated(inp.text.replace(_ANSWER, form), "gives the answer as a sentence, not a bare number")


def _c3(inp: GenInput) -> Generated | None:
    """The analyst hands back the data agent's report as the answer instead of computing from it."""
    if inp.agent != "analyst" or inp.kind != StepKind.final_answer or _ANSWER not in inp.text:
        return None
    return Generated("Thought: data_agent has answered; I pass its answer on.\n<code>\nfinal_answer(data)\n</code>",
                     "returns the data agent's report as the answer without computing what the question asks")


def _lists(inp: GenInput) -> list[re.Match] | None:
    """The figure lists of the analyst's check of a report (None if this is not that step)."""
    if inp.agent != "analyst" or inp.kind != StepKind.tool_call or "months\")" not in inp.text:
        return None
    return list(_LIST.finditer(inp.text)) or None


def _r1(inp: GenInput) -> Generated | None:
    """The analyst's copy of the figures has a month whose figure appears nowhere in the run."""
    found = _lists(inp)
    if found is None:
        return None
    m = inp.rng.choice(found)
    values = m.group(2).split(", ")
    i = inp.rng.randrange(len(values))
    seen = inp.prefix_text() + inp.text
    choices = [v for v in range(10, 100) if not re.search(rf"(?<!\d){v}(?!\d)", seen)]
    if not choices:
        return None
    new, old = str(inp.rng.choice(choices)), values[i]
    values[i] = new
    text = inp.text[: m.start(2)] + ", ".join(values) + inp.text[m.end(2):]
    return Generated(text, f"copies month {i + 1} of {m.group(1)} as {new}, a figure found nowhere in the run, instead of {old}")


def _v1(inp: GenInput) -> Generated | None:
    """The analyst's copy gives one region the figures of the other (it lost track of whose figures were whose)."""
    found = _lists(inp)
    if found is None or len(found) < 2:
        return None
    a, b = inp.rng.sample(found[:2], 2)
    text = inp.text[: a.start(2)] + b.group(2) + inp.text[a.end(2):]
    return Generated(text, f"copies {b.group(1)}'s figures, read a moment earlier, as {a.group(1)}'s")


def _v2(inp: GenInput) -> Generated | None:
    """The analyst's check rejects a right figure as a partial month and leaves it out."""
    found = _lists(inp)
    if found is None:
        return None
    m = inp.rng.choice(found)
    values = [int(v) for v in m.group(2).split(", ")]
    middle = statistics.median(values)
    i = max(range(len(values)), key=lambda k: (abs(values[k] - middle), -k))
    kept = values[:i] + values[i + 1:]
    region = m.group(1)
    text = inp.text[: m.start(2)] + ", ".join(map(str, kept)) + inp.text[m.end(2):]
    text = re.sub(r"^Thought: .*$", f"Thought: I copy the figures and check them. {region.capitalize()}'s month {i + 1} "
                  f"({values[i]}) is far from its other months, so it looks like a partial month; I leave it out.",
                  text, count=1, flags=re.M)
    return Generated(text, f"rejects {region}'s month {i + 1} ({values[i]}), a right figure, as a partial month")


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


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4], "PL.1": [_pl1], "A.1": [_a1], "A.2": [_a2],
            "A.3": [_a3], "A.4": [_a4], "A.5": [_a5], "V.1": [_v1], "V.2": [_v2], "C.1": [_c1], "C.2": [_c2],
            "C.3": [_c3]}
