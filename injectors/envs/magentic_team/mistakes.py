"""Error rules of `magentic_team` (tried before the generic ones).

Each rule edits one step the way such a mistake looks in this team: the
orchestrator's fact sheet, plan or instruction (`To: <speaker>\\n<text>`), the
web surfer's tool calls, the coder's code, the final answer.
"""

from __future__ import annotations

import dataclasses
import json
import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, perturb_number
from .tasks import (SITE, YEARS, derive_line, lookup_line, read_derive, read_figures,
                             read_lookups, read_question, figure_line)

_OTHER_VARIANT = {"growth": {"": "absolute", "absolute": ""}, "per_employee": {"": "inverse", "inverse": ""},
                  "gap": {"": "average", "average": ""}}


def _is_plan(inp: GenInput) -> bool:
    return inp.agent == "orchestrator" and inp.kind == StepKind.plan and inp.text.lstrip().startswith("- ")


def _instruction(inp: GenInput) -> tuple[str, str] | None:
    """(speaker, instruction) of an orchestrator instruction step."""
    if inp.agent != "orchestrator" or inp.kind != StepKind.message or not inp.text.startswith("To: "):
        return None
    head, _, rest = inp.text.partition("\n")
    return head[4:].strip(), rest


def _r4(inp: GenInput) -> Generated | None:
    """The fact sheet, plan or instruction sets out to compute another quantity of the same figures."""
    if inp.agent != "orchestrator" or inp.kind == StepKind.final_answer:
        return None
    d = read_derive(inp.text)
    if d is None:
        return None
    other = dataclasses.replace(d, variant=_OTHER_VARIANT[d.family][d.variant])
    return Generated(inp.text.replace(derive_line(d), derive_line(other)),
                     f"sets out to '{derive_line(other)}' where the request asks to '{derive_line(d)}'")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan leaves out a figure the computation needs, or the step that runs the code."""
    if not _is_plan(inp):
        return None
    looks = read_lookups(inp.text)
    if looks and inp.rng.random() < 0.6:
        look = inp.rng.choice(looks)
        if len(look.years) > 1:
            fewer = dataclasses.replace(look, years=look.years[1:])
            return Generated(inp.text.replace(lookup_line(look), lookup_line(fewer)),
                             f"plans to look up {look.company}'s {look.metric} for {look.years[1:]} only, not {look.years[0]}")
        if len(looks) > 1:
            lines = [l for l in inp.text.splitlines() if lookup_line(look) not in l]
            return Generated("\n".join(lines), f"the plan never looks up {look.company}'s {look.metric}")
    lines = [l for l in inp.text.splitlines() if not l.startswith("- executor:")]
    if len(lines) == len(inp.text.splitlines()):
        return None
    return Generated("\n".join(lines), "the plan has the code written but never run, so no value is computed")


def _pl2(inp: GenInput) -> Generated | None:
    """The plan has the coder download the report pages, which the team's code executor cannot reach."""
    if not _is_plan(inp):
        return None
    looks = read_lookups(inp.text)
    if not looks:
        return None
    kept = [l for l in inp.text.splitlines() if not l.startswith("- web_surfer:")]
    fetch = "- coder: download the annual-report pages with Python (requests) and parse the figures from them."
    return Generated("\n".join([fetch, *kept]), "plans for code to download the report pages, but the executor has no network")


def _a5(inp: GenInput) -> Generated | None:
    """The plan answers from the fact sheet's educated guesses, before anything is looked up."""
    if not _is_plan(inp) or not read_lookups(inp.text):
        return None
    return Generated("- The educated guesses in the fact sheet are close enough; answer with the value they give.",
                     "the plan answers from rough guesses without looking any figure up")


def _c1(inp: GenInput) -> Generated | None:
    """The orchestrator gives the web surfer's look-up to the coder, who has no access to the site."""
    found = _instruction(inp)
    d = read_question(inp.task_query)
    if found is None or found[0] != "web_surfer" or d is None:
        return None
    return Generated(f"To: coder\nPlease write Python code to {derive_line(d)}, from the figures in the fact sheet.",
                     "delegates the computation to the coder before the web surfer has looked up the figures")


def _v2(inp: GenInput) -> Generated | None:
    """The orchestrator takes the coder's unrun estimate as the result (no code is executed to check it)."""
    found = _instruction(inp)
    if found is None or found[0] != "coder":
        return None
    d = read_derive(found[1])
    if d is None:
        return None
    figures = "\n".join(figure_line(k, v) for k, v in read_figures(found[1]).items())
    return Generated(f"To: coder\nPlease {derive_line(d)} from these figures and state the value; there is no need to run "
                     f"code:\n{figures}", "accepts a value stated by the coder without having the code run to verify it")


def _a2(inp: GenInput) -> Generated | None:
    """The web surfer opens a neighbouring year's report page in place of one it needs."""
    if inp.agent != "web_surfer" or inp.kind != StepKind.tool_call:
        return None
    urls = re.findall(rf'"url": "{re.escape(SITE)}/([a-z-]+)/(\d{{4}})"', inp.text)
    if not urls:
        return None
    company, year = inp.rng.choice(urls)
    taken = {int(y) for _, y in urls}
    others = [y for y in YEARS if abs(y - int(year)) == 1 and y not in taken]
    if not others:
        return None
    new = inp.rng.choice(others)
    old_url, new_url = f"{SITE}/{company}/{year}", f"{SITE}/{company}/{new}"
    return Generated(inp.text.replace(json.dumps(old_url), json.dumps(new_url)),
                     f"opens the {new} report ({new_url}) where the {year} one is needed")


_RESULT = re.compile(r"^result = round\((.*), 1\)$", re.M)


def _r2(inp: GenInput) -> Generated | None:
    """The coder's formula combines the right figures the wrong way."""
    m = _RESULT.search(inp.text)
    if inp.agent != "coder" or m is None:
        return None
    expr = m.group(1)
    g = re.fullmatch(r"\((\w+) - (\w+)\) / (\w+) \* 100", expr)
    if g and g.group(2) == g.group(3):
        new, why = f"({g.group(1)} - {g.group(2)}) / {g.group(1)} * 100", "divides the change by the later year's revenue"
    elif (g := re.fullmatch(r"(\w+) \* 1000 / (\w+)", expr)) is not None:
        new, why = f"{g.group(2)} / {g.group(1)}", "divides the headcount by the revenue instead of the reverse"
    elif (g := re.fullmatch(r"\((.*)\) - \((.*)\)", expr)) is not None:
        n = g.group(1).count("+") + 1
        new, why = f"({g.group(1)}) - ({g.group(2)}) / {n}", "subtracts the second company's yearly average from the first's total"
    else:
        return None
    return Generated(inp.text[: m.start(1)] + new + inp.text[m.end(1):], why)


def _a4(inp: GenInput) -> Generated | None:
    """The final answer carries words around the value, so it is no longer a bare number."""
    m = re.search(r"^ANSWER: (.+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    value = m.group(1).strip()
    new = inp.rng.choice([f"ANSWER: about {value}", f"ANSWER: {value} (computed by the team)", f"ANSWER: roughly {value}"])
    return Generated(inp.text[: m.start()] + new + inp.text[m.end():], "the answer is not a bare value after 'ANSWER:'")


_FIGURE_LINE = re.compile(r"^(- [^\n:]+, (?:revenue|headcount), \d{4}: )(-?\d+(?:\.\d+)?)$", re.M)


def _figure_source(inp: GenInput) -> bool:
    """A step that states figures to another agent: the web surfer's report or an instruction to the coder."""
    found = _instruction(inp)
    return (inp.agent == "web_surfer" and inp.kind == StepKind.message) or (found is not None and found[0] == "coder")


def _change_figure(inp: GenInput) -> tuple[str, str, str, str] | None:
    lines = list(_FIGURE_LINE.finditer(inp.text))
    if not _figure_source(inp) or not lines:
        return None
    m = inp.rng.choice(lines)
    new = perturb_number(m.group(2), inp.rng)
    return inp.text[: m.start(2)] + new + inp.text[m.end(2):], m.group(1)[2:-2], m.group(2), new


def _final_value(inp: GenInput, new_value) -> Generated | None:
    """The final answer with its value (in the sentence and the ANSWER line) replaced by `new_value(old)`."""
    m = re.search(r"^ANSWER: (-?\d+(?:\.\d+)?)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    old = m.group(1)
    new = new_value(old)
    if new is None or new == old:
        return None
    return Generated(inp.text.replace(old, new), new)


def _r1(inp: GenInput) -> Generated | None:
    """The web surfer reports a figure that is on no page it opened; or the final answer states a value found nowhere."""
    final = _final_value(inp, lambda old: perturb_number(old.lstrip("-"), inp.rng) if not old.startswith("-")
                         else "-" + perturb_number(old[1:], inp.rng))
    if final is not None:
        return Generated(final.text, f"answers {final.reason}, a value that appears nowhere in the team's work")
    if inp.agent != "web_surfer":
        return None
    changed = _change_figure(inp)
    if changed is None:
        return None
    text, what, old, new = changed
    return Generated(text, f"reports {what} as {new}, a value on no page it opened (the page says {old})")


_ASSIGN = re.compile(r"^(\w+_(?:revenue|headcount)_\d{4}) = (-?\d+(?:\.\d+)?)$", re.M)


def _c2(inp: GenInput) -> Generated | None:
    """A figure is passed on differently from its source: in the web surfer's report (the page), the orchestrator's
    instruction to the coder (the report), or the coder's code (the instruction)."""
    if inp.agent == "coder":
        found = list(_ASSIGN.finditer(inp.text))
        if not found:
            return None
        m = inp.rng.choice(found)
        new = perturb_number(m.group(2).lstrip("-"), inp.rng)
        return Generated(inp.text[: m.start(2)] + new + inp.text[m.end(2):],
                         f"copies {m.group(1)} into the code as {new} where the instruction gives {m.group(2)}")
    changed = _change_figure(inp)
    if changed is None:
        return None
    text, what, old, new = changed
    source = "the page says" if inp.agent == "web_surfer" else "the web surfer reported"
    return Generated(text, f"passes on {what} as {new} where {source} {old}")


def _v1(inp: GenInput) -> Generated | None:
    """The orchestrator's instruction to the coder swaps two of the reported figures (which year had which)."""
    found = _instruction(inp)
    lines = list(_FIGURE_LINE.finditer(inp.text))
    if found is None or found[0] != "coder" or len(lines) < 2:
        return None
    a, b = inp.rng.sample(lines, 2)
    if a.group(2) == b.group(2):
        return None
    first, second = sorted((a, b), key=lambda m: m.start())
    text = (inp.text[: first.start(2)] + second.group(2) + inp.text[first.end(2): second.start(2)] + first.group(2)
            + inp.text[second.end(2):])
    return Generated(text, f"swaps the figures of {first.group(1)[2:-2]} and {second.group(1)[2:-2]} that the web surfer reported")


def _r3(inp: GenInput) -> Generated | None:
    """The coder's code rounds or scales the result wrongly."""
    final = _final_value(inp, lambda old: str(round(float(old))) if "." in old else None)
    if final is not None:
        return Generated(final.text, f"rounds the computed value to {final.reason} in the answer, not to 1 decimal place")
    m = _RESULT.search(inp.text)
    if inp.agent != "coder" or m is None:
        return None
    if " * 1000 / " in m.group(1) and inp.rng.random() < 0.5:
        return Generated(inp.text.replace(" * 1000 / ", " * 100 / ", 1), "converts $ millions to thousands with 100 instead of 1000")
    if " * 100" in m.group(1) and inp.rng.random() < 0.5:
        return Generated(inp.text.replace(" * 100", " * 10", 1), "scales the ratio to a percentage with 10 instead of 100")
    return Generated(inp.text[: m.start()] + f"result = round({m.group(1)})" + inp.text[m.end():],
                     "rounds the result to a whole number instead of 1 decimal place")


MUTATORS = {"R.1": [_r1], "R.3": [_r3], "C.2": [_c2], "V.1": [_v1], "R.2": [_r2], "R.4": [_r4], "PL.1": [_pl1], "PL.2": [_pl2], "A.2": [_a2], "A.4": [_a4], "A.5": [_a5],
            "C.1": [_c1], "V.2": [_v2]}

__all__ = ["MUTATORS"]
