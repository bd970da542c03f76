"""Error rules of `search_crew` (tried before the generic ones): mistakes in the manager's and workers' replies.

Where each rule acts (see `search_crew.env` for the steps): the manager's plan and its delegations (R.4, A.5, C.1,
R.2), the searcher's page opening (A.2, V.2), its first search (A.3) and its reports (R.1, C.2, V.1), the analyst's
calculation (R.2) and report (C.2), the manager's answer (R.3, A.4, C.3). The manager follows its own plan and reads
the searcher's answered delegations in the order of its plan, so each of these carries to the answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import (Generated, GenInput, answer_line, answer_with_unit, guessed_answer,
                                           replace_span, slipped_answer, slipped_digits, slipped_result,
                                           unseen_numbers)
from ..agents_desk.wire import render_call
from .policy import COMPUTE_TASK, DELEGATE, PLAN_FORMULA, PLAN_SEARCH, REPORT_LINE, RESULT, SEARCH_TASK, compute_task, delegation, search_task
from .world import KINDS, read_page, results

_EXPRESSION = re.compile(r'"expression": "([^"]+)"')


def _swap_operator(text: str) -> tuple[str, str, str] | None:
    """`text` with its first + or - swapped for the other, and (old, new); None if it has neither."""
    m = re.search(r" ([-+]) ", text)
    if m is None:
        return None
    new = "+" if m.group(1) == "-" else "-"
    return text[: m.start()] + f" {new} " + text[m.end():], m.group(1), new


def _delegated(inp: GenInput) -> tuple[dict[str, Any], str] | None:
    """The manager's delegation in the step (its arguments, its thought), or None."""
    action = inp.action
    if inp.agent != "manager" or inp.kind not in (StepKind.plan, StepKind.message) or action is None or action.tool != DELEGATE:
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return (args, action.thought) if isinstance(args, dict) else None


def _redelegate(args: dict[str, Any], thought: str, **changed: str) -> str:
    new = {**args, **changed}
    return delegation(str(new.get("coworker", "")), str(new.get("task", "")), str(new.get("context", "")), thought)


def _r4(inp: GenInput) -> Generated | None:
    """The manager's plan combines the figures the wrong way (a sum where a difference is needed, or back)."""
    found = _delegated(inp) if inp.kind == StepKind.plan else None
    context = str(found[0].get("context", "")) if found else ""
    m = PLAN_FORMULA.search(context)
    swapped = _swap_operator(m.group(1)) if m else None
    if found is None or m is None or swapped is None:
        return None
    context = context.replace(m.group(0), f"3. analyst: {swapped[0]}")
    return Generated(_redelegate(*found, context=context), f"plans to compute {swapped[0]} where the question needs {m.group(1)}")


def _plan_of(inp: GenInput) -> tuple[tuple[dict[str, Any], str], str, list[re.Match]] | None:
    """The manager's plan in the step: (its delegation, the plan's context, its searcher steps), or None."""
    found = _delegated(inp) if inp.kind == StepKind.plan else None
    context = str(found[0].get("context", "")) if found else ""
    steps = list(PLAN_SEARCH.finditer(context))
    return (found, context, steps) if found and len(steps) == 2 and PLAN_FORMULA.search(context) else None


def _pl1(inp: GenInput) -> Generated | None:
    """The manager's plan computes the answer after the first figure only: the second figure's step is left out."""
    plan = _plan_of(inp)
    if plan is None:
        return None
    found, context, steps = plan
    lines = [line for line in context.splitlines() if line != steps[1].group(0)]
    numbered, n = [], 0
    for line in lines:
        m = re.match(r"^\d+\. (.+)$", line)
        n += m is not None
        numbered.append(f"{n}. {m.group(1)}" if m else line)
    return Generated(_redelegate(*found, context="\n".join(numbered)), f"the plan leaves out finding the "
                     f"{steps[1].group(1)} and computes the answer without it")


# A figure no page publishes, for each figure a question needs (what a plan may count on that the web does not have).
UNPUBLISHED = {"founded": "charter year", "opened": "inauguration date", "height": "roof height",
               "capacity": "seated capacity", "adult ticket": "family ticket"}


def _pl2(inp: GenInput) -> Generated | None:
    """The manager's plan counts on a figure no page publishes (the 'roof height' where pages state the height)."""
    plan = _plan_of(inp)
    if plan is None:
        return None
    found, context, steps = plan
    wanted = steps[1].group(1)
    figure = next((f for f in sorted(UNPUBLISHED, key=len, reverse=True) if wanted.endswith(" " + f)), None)
    if figure is None:
        return None
    name = wanted[: -len(figure) - 1]
    other = f"{name} {UNPUBLISHED[figure]}"
    context = context.replace(steps[1].group(0), steps[1].group(0).replace(wanted, other))
    m = PLAN_FORMULA.search(context)
    if m is None or wanted not in m.group(1):
        return None
    context = context[: m.start(1)] + m.group(1).replace(wanted, other) + context[m.end(1):]
    return Generated(_redelegate(*found, context=context), f"the plan counts on the {other}, a figure no page "
                     f"publishes, where the pages state the {figure}")


def _pl3(inp: GenInput) -> Generated | None:
    """Once both figures are in, the manager turns to another goal: their average instead of what the question asks."""
    found = _delegated(inp) if inp.kind == StepKind.message else None
    asked = COMPUTE_TASK.search(str(found[0].get("task", ""))) if found and found[0].get("coworker") == "analyst" else None
    figures = re.findall(r"\b\d+\b", asked.group(1)) if asked else []
    if found is None or asked is None or len(figures) < 2:
        return None
    a, b = figures[-2:]
    return Generated(_redelegate(found[0], "The figures are in; what tells these two landmarks apart best is their "
                                 "average, so the analyst computes that.", task=compute_task(f"({a} + {b}) / 2")),
                     f"turns from the question ({asked.group(1)}) to the two figures' average")


def _a5(inp: GenInput) -> Generated | None:
    """The manager answers before any figure has been found."""
    return guessed_answer(inp, "manager", "Figures like these usually come to about this much.",
                          "the searcher has found any figure")


def _c1(inp: GenInput) -> Generated | None:
    """The manager asks the searcher for another figure of the landmark than the one its plan needs."""
    found = _delegated(inp)
    asked = SEARCH_TASK.search(str(found[0].get("task", ""))) if found and found[0].get("coworker") == "searcher" else None
    if found is None or asked is None:
        return None
    figure, name = asked.groups()
    others = [f for kind in KINDS.values() if figure in kind["figures"] and name.endswith(kind["word"]) for f in kind["figures"] if f != figure]
    if not others:
        return None
    other = inp.rng.choice(others)
    return Generated(_redelegate(*found, task=search_task(name, other)), f"asks the searcher for the {name}'s {other} "
                     f"where the plan needs its {figure}")


def _r2_manager(inp: GenInput) -> Generated | None:
    """The manager hands the analyst the right figures combined the wrong way."""
    found = _delegated(inp)
    asked = COMPUTE_TASK.search(str(found[0].get("task", ""))) if found and found[0].get("coworker") == "analyst" else None
    swapped = _swap_operator(asked.group(1)) if asked else None
    if found is None or asked is None or swapped is None:
        return None
    return Generated(_redelegate(*found, task=compute_task(swapped[0])), f"asks the analyst for {swapped[0]} where "
                     f"{asked.group(1)} was needed")


def _r2_analyst(inp: GenInput) -> Generated | None:
    """The analyst's calculation combines the right figures the wrong way."""
    m = _EXPRESSION.search(inp.text) if inp.agent == "analyst" and inp.kind == StepKind.tool_call else None
    swapped = _swap_operator(m.group(1)) if m else None
    if m is None or swapped is None:
        return None
    expr = swapped[0]
    text = inp.text.replace(m.group(0), f'"expression": "{expr}"').replace(f"Computing {m.group(1)}.", f"Computing {expr}.")
    return Generated(text, f"calculates {expr} where {m.group(1)} was needed")


def _opened(inp: GenInput) -> tuple[str, str, list[tuple[str, str]]] | None:
    """(the URL the searcher opens in the step, the landmark asked for, the results of its last search), or None."""
    action = inp.action
    if inp.agent != "searcher" or inp.kind != StepKind.tool_call or action is None or action.tool != "open_page":
        return None
    url = str(_arguments(action.argument).get("url", ""))
    asked = next((m for p in reversed(inp.prefix) if p.agent == "manager" for m in [SEARCH_TASK.search(p.text)] if m), None)
    found = next((results(p.text) for p in reversed(inp.prefix) if p.kind == StepKind.tool_result.value and results(p.text)), [])
    return (url, asked.group(2), found) if asked and found else None


def _arguments(raw: str) -> dict[str, Any]:
    try:
        args = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def _open(inp: GenInput, url: str) -> str:
    """The searcher's `open_page` call of the step with another URL."""
    return render_call("open_page", {"url": url}, inp.action.thought if inp.action else "")


def _a2(inp: GenInput) -> Generated | None:
    """The searcher opens the page of another landmark of the same kind from its results."""
    opened = _opened(inp)
    if opened is None:
        return None
    url, name, found = opened
    word = name.split()[-1]
    others = [(t, u) for t, u in found if u != url and t.endswith(word) and not t.endswith(name)]
    if not others:
        return None
    title, new = inp.rng.choice(others)
    return Generated(_open(inp, new), f"opens the page of the {title} instead of the {name}'s")


def _v2(inp: GenInput) -> Generated | None:
    """The searcher opens the near-namesake's page (`Old Kestrel Tower` for `Kestrel Tower`) without checking its title."""
    opened = _opened(inp)
    if opened is None:
        return None
    url, name, found = opened
    namesake = next(((t, u) for t, u in found if t != name and t.endswith(" " + name)), None)
    if namesake is None or namesake[1] == url:
        return None
    return Generated(_open(inp, namesake[1]), f"opens the page of the {namesake[0]} without checking that its title is "
                     f"the {name}")


def _a3(inp: GenInput) -> Generated | None:
    """A worker reports as done what it never did: the searcher a figure it did not look up, the analyst a result it
    did not calculate (made up, appearing nowhere)."""
    action = inp.action
    if inp.kind != StepKind.tool_call or action is None:
        return None
    if inp.agent == "analyst" and action.tool == "calculate":
        value = inp.rng.choice(unseen_numbers(inp.prefix_text(), 20, 400))
        return Generated(f"result: {value}", "reports a result without calculating anything (it appears nowhere)")
    asked = next((m for p in reversed(inp.prefix) if p.agent == "manager" for m in [SEARCH_TASK.search(p.text)] if m), None)
    if inp.agent != "searcher" or action.tool not in ("web_search", "open_page") or asked is None:
        return None
    figure, name = asked.groups()
    low, high, _ = next(k["figures"][figure] for k in KINDS.values() if figure in k["figures"] and name.endswith(k["word"]))
    choices = unseen_numbers(inp.prefix_text(), low, high)
    return Generated(f"{name} {figure}: {inp.rng.choice(choices)}", "reports a figure as found without "
                     f"{'searching' if action.tool == 'web_search' else 'opening the page'} (it appears nowhere)")


def _report(inp: GenInput) -> re.Match | None:
    """The report line of the searcher's report in the step, or None."""
    return REPORT_LINE.search(inp.text) if inp.agent == "searcher" and inp.kind == StepKind.message else None


def _r1(inp: GenInput) -> Generated | None:
    """The searcher reports a figure that appears on no page it opened."""
    m = _report(inp)
    if m is None:
        return None
    old = int(m.group(3))
    choices = unseen_numbers(inp.prefix_text() + inp.text, max(1, old - old // 3), old + old // 3 + 3)
    if not choices:
        return None
    new = str(inp.rng.choice(choices))
    return Generated(replace_span(inp.text, m, new, 3), f"reports the {m.group(2)} as {new}, a figure no page states, "
                     f"instead of {m.group(3)}")


def _c2(inp: GenInput) -> Generated | None:
    """A worker passes a figure on to the manager with its digits slipped (its page or calculation says otherwise)."""
    m = _report(inp)
    if m is None and inp.agent == "analyst" and inp.kind == StepKind.message:
        m = RESULT.search(inp.text)
        if m is None or "." in m.group(1):
            return None
        new = slipped_result(m.group(1).lstrip("-"), inp.rng)
        text = inp.text[: m.start(1)] + new + inp.text[m.end(1):]
        return Generated(text, f"tells the manager the result is {new} where calculate gave {m.group(1)}")
    if m is None:
        return None
    new = slipped_digits(m.group(3))
    return Generated(replace_span(inp.text, m, new, 3), f"tells the manager {new} for the {m.group(2)} where the page says "
                     f"{m.group(3)}")


def _v1(inp: GenInput) -> Generated | None:
    """The searcher reads another line of the page it opened (the rooms as the founding year, the floors as the height)."""
    m = _report(inp)
    page = next((read_page(p.text) for p in reversed(inp.prefix) if p.agent == "searcher" and read_page(p.text)), {}) if m else {}
    if m is None:
        return None
    others = [(f, v) for f, v in page.items() if f != m.group(2) and str(v) != m.group(3)]
    if not others:
        return None
    figure, value = inp.rng.choice(others)
    return Generated(replace_span(inp.text, m, str(value), 3), f"reports the {figure} ({value}) from the same page as "
                     f"the {m.group(2)}")


def _r3(inp: GenInput) -> Generated | None:
    """The manager writes the analyst's result down wrong (a digit slipped)."""
    return slipped_answer(inp, "manager")


def _a4(inp: GenInput) -> Generated | None:
    """The manager's answer line carries a unit, not the bare number asked for."""
    m = answer_line(inp, "manager")
    return None if m is None else answer_with_unit(inp, m, ["EUR", "years", "metres", "seats", "(approx.)"])


def _c3(inp: GenInput) -> Generated | None:
    """The manager answers with the searcher's last figure as reported, without the computation its plan asks."""
    m = answer_line(inp, "manager")
    if m is None:
        return None
    figures = [value for _, _, value in REPORT_LINE.findall("\n".join(p.text for p in inp.prefix if p.agent == "searcher"))]
    if not figures or figures[-1] == m.group(1):
        return None
    return Generated(f"The searcher has the figure.\nANSWER: {figures[-1]}",
                     "passes the searcher's figure on as the answer without the computation the question asks")


MUTATORS = {"PL.1": [_pl1], "PL.2": [_pl2], "PL.3": [_pl3], "R.1": [_r1], "R.2": [_r2_analyst, _r2_manager], "R.3": [_r3], "R.4": [_r4], "A.2": [_a2], "A.3": [_a3],
            "A.4": [_a4], "A.5": [_a5], "V.1": [_v1], "V.2": [_v2], "C.1": [_c1], "C.2": [_c2], "C.3": [_c3]}
