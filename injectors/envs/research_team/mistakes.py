"""Error rules specific to `research_team` (tried before the generic rules of each mode).

Each rule takes a `GenInput` and returns a `Generated` (the rewritten action and
a one-line reason for the gold label) or None when it does not fit the step.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, PrefixItem, change_a_number
from ..base import parse_action, render_action
from .world import CO_B, LAST, TOWN_B

_PLAN_LINE = re.compile(r"^(\d+)\. (\w+): (.+)$", re.M)
_DELEGATION = re.compile(r"^(searcher|calculator|reader|verifier|answerer): (.+)$")
DRIFT = {
    "company founded by": "birthplace of",
    "birthplace of": "company founded by",
    "number of employees of": "founding year of",
    "population of": "number of employees of",
    "founding year of": "number of employees of",
}


def _is_plan(inp: GenInput) -> bool:
    return inp.agent == "planner" and inp.kind == StepKind.plan


def _is_delegation(inp: GenInput) -> bool:
    return inp.agent == "planner" and inp.kind == StepKind.message and _DELEGATION.match(inp.text) is not None


def _plan_lines(text: str) -> list[tuple[str, str, str]]:
    return _PLAN_LINE.findall(text)


def _render_plan(lines: list[tuple[str, str]]) -> str:
    return "Plan:\n" + "\n".join(f"{i + 1}. {agent}: {instr}" for i, (agent, instr) in enumerate(lines))


def _drift(instruction: str) -> tuple[str, str, str] | None:
    for old, new in DRIFT.items():
        if f"find the {old} " in instruction:
            return instruction.replace(f"find the {old} ", f"find the {new} "), old, new
    return None


# -- planner: the plan ------------------------------------------------------

def plan_r4(inp: GenInput) -> Generated | None:
    if not _is_plan(inp):
        return None
    lines = [(a, i) for _, a, i in _plan_lines(inp.text)]
    for k in range(len(lines) - 1, -1, -1):
        agent, instruction = lines[k]
        changed = _drift(instruction) if agent == "searcher" else None
        if changed and k == len(lines) - 2:
            lines[k] = (agent, changed[0])
            return Generated(_render_plan(lines), f"the plan looks up the {changed[2]} where the question asks for the {changed[1]}")
    if any("compute #1 - #2" in i for _, i in lines):
        lines = [(a, i.replace("compute #1 - #2", "compute #1 + #2")) for a, i in lines]
        return Generated(_render_plan(lines), "the plan adds the two populations where the question asks for their difference")
    return None


def plan_pl1(inp: GenInput) -> Generated | None:
    if not _is_plan(inp):
        return None
    lines = [(a, i) for _, a, i in _plan_lines(inp.text)]
    if len(lines) < 3:
        return None
    kept = lines[:-2] + [("answerer", f"answer with #{len(lines) - 2}")]
    return Generated(_render_plan(kept), "the plan stops one step short of what the question needs")


def plan_pl2(inp: GenInput) -> Generated | None:
    if not _is_plan(inp):
        return None
    lines = [(a, i) for _, a, i in _plan_lines(inp.text)]
    for k, (agent, instruction) in enumerate(lines):
        if agent == "searcher" and k > 0:
            lines[k] = ("archivist", instruction.replace("find the ", "look up the ", 1) + " in the registry")
            return Generated(_render_plan(lines), "the plan relies on an archivist and a registry the team does not have")
    return None


def plan_a5(inp: GenInput) -> Generated | None:
    if not _is_plan(inp):
        return None
    lines = [(a, i) for _, a, i in _plan_lines(inp.text)]
    if len(lines) < 3:
        return None
    return Generated(_render_plan([lines[0], ("answerer", "answer with #1")]), "the plan answers after the first look-up")


def plan_c1(inp: GenInput) -> Generated | None:
    if not _is_plan(inp):
        return None
    lines = [(a, i) for _, a, i in _plan_lines(inp.text)]
    searches = [k for k, (a, _) in enumerate(lines) if a == "searcher"]
    if not searches:
        return None
    k = inp.rng.choice(searches)
    other = inp.rng.choice(["calculator", "reader"])
    lines[k] = (other, lines[k][1])
    return Generated(_render_plan(lines), f"step {k + 1} is given to the {other}, who cannot search")


def plan_r2(inp: GenInput) -> Generated | None:
    if not _is_plan(inp) or "compute #1 - #2" not in inp.text:
        return None
    return Generated(inp.text.replace("compute #1 - #2", "compute #2 - #1"), "the plan subtracts in the wrong direction")


# -- planner: delegations ---------------------------------------------------

def delegation_pl3(inp: GenInput) -> Generated | None:
    if not _is_delegation(inp):
        return None
    changed = _drift(inp.text)
    if changed is None:
        return None
    return Generated(changed[0], f"the planner turns to the {changed[2]} instead of the {changed[1]} its plan needs")


def delegation_c1(inp: GenInput) -> Generated | None:
    if not _is_delegation(inp):
        return None
    delegation = _DELEGATION.match(inp.text)
    assert delegation is not None  # _is_delegation matched it
    agent, instruction = delegation.groups()
    swap = {"searcher": ["calculator", "reader"], "calculator": ["searcher"], "answerer": []}.get(agent, [])
    if not swap:
        return None
    other = inp.rng.choice(swap)
    return Generated(f"{other}: {instruction}", f"the planner sends the {agent}'s task to the {other}")


def delegation_a5(inp: GenInput) -> Generated | None:
    if not _is_delegation(inp) or inp.text.startswith("answerer"):
        return None
    done = len([p for p in inp.prefix if p.agent == "verifier"])
    if done == 0:
        return None
    return Generated(f"answerer: answer with #{done}", "the planner asks for the final answer before its plan is done")


def delegation_r2(inp: GenInput) -> Generated | None:
    m = re.match(r"^calculator: compute ([\d,.]+) - ([\d,.]+)$", inp.text) if _is_delegation(inp) else None
    if m is None:
        return None
    return Generated(f"calculator: compute {m.group(2)} - {m.group(1)}", "the planner subtracts in the wrong direction")


# -- searcher ---------------------------------------------------------------

def _last_results(prefix: list[PrefixItem]) -> str:
    for item in reversed(prefix):
        if item.kind == StepKind.tool_result.value and item.text.startswith("["):
            return item.text
    return ""


def handoff_c2(inp: GenInput) -> Generated | None:
    m = re.match(r"^reader: see (D\d+) \(([^)]+)\)(.*)$", inp.text) if inp.agent == "searcher" else None
    if m is None:
        return None
    others = [(d, t) for d, t in re.findall(r"^\[(D\d+)\] ([^:]+):", _last_results(inp.prefix), re.M) if d != m.group(1)]
    if not others:
        return None
    doc, title = inp.rng.choice(others)
    return Generated(f"reader: see {doc} ({title}){m.group(3)}", f"the searcher points the reader to {doc} instead of {m.group(1)}")


# -- reader -----------------------------------------------------------------

def value_type(value: str) -> str:
    """number | company | person | town: the swaps below keep a value's type, so errors stay plausible."""
    if re.fullmatch(r"-?[\d,]+", value):
        return "number"
    parts = value.split(" ")
    if len(parts) == 2 and parts[1] in CO_B:
        return "company"
    if len(parts) == 2 and parts[1] in LAST:
        return "person"
    return "town" if len(parts) == 1 and value.endswith(tuple(TOWN_B)) else "other"


def _sibling(text: str, value: str) -> str | None:
    """Another value of the same type stated in `text` (a name from another sentence, another number...)."""
    want = value_type(value)
    candidates = re.findall(r"[A-Z][a-z]+ [A-Z][a-z]+|\b[A-Z][a-z]{3,}\b|\d[\d,]*\d|\d", text)
    for found in candidates:
        if found != value and value_type(found) == want and not re.fullmatch(r"(19|20)\d\d", found) and found not in value:
            return found
    return None


def reader_r2(inp: GenInput) -> Generated | None:
    m = re.match(r"^The (.+) is (.+) \(source (D\d+)\)\.$", inp.text) if inp.agent == "reader" else None
    if m is None:
        return None
    doc = re.search(rf"^\[{m.group(3)}\] [^:]+: (.*)$", _last_results(inp.prefix), re.M)
    if doc is None:
        return None
    found = _sibling(doc.group(1), m.group(2))
    if found is None:
        return None
    return Generated(f"The {m.group(1)} is {found} (source {m.group(3)}).",
                     f"the reader takes {found} from the wrong sentence of {m.group(3)}")


# -- verifier ---------------------------------------------------------------

def verifier_v2(inp: GenInput) -> Generated | None:
    m = re.match(r"^(Confirmed|Corrected): the (.+) is (.+)\.$", inp.text) if inp.agent == "verifier" else None
    if m is None:
        return None
    reports = [p.text for p in inp.prefix if p.agent == "reader"]
    if m.group(1) == "Corrected" and reports:
        r = re.match(r"^The .+ is (.+) \(source D\d+\)\.$", reports[-1])
        if r:
            return Generated(f"Confirmed: the {m.group(2)} is {r.group(1)}.", "the verifier approves the reader's value without comparing it to the source")
    found = _sibling(_last_results(inp.prefix), m.group(3))
    if found is None:
        return None
    return Generated(f"Corrected: the {m.group(2)} is {found}.", "the verifier replaces a correct finding with another value from the source")


# -- calculator -------------------------------------------------------------

def calc_r3(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "calculator" and inp.kind == StepKind.tool_call else None
    if action is None:
        return None
    changed = change_a_number(action.argument, inp.rng)
    if changed is None:
        return None
    argument, old, new = changed
    return Generated(render_action(action.tool, argument, action.thought), f"the calculator copies {old} as {new} into its expression")


# -- answerer ---------------------------------------------------------------

def answerer_c3(inp: GenInput) -> Generated | None:
    if inp.agent != "answerer":
        return None
    values = []
    for p in inp.prefix:
        if p.agent == "verifier":
            m = re.match(r"^(?:Confirmed|Corrected|Unverified): the .+ is (.+)\.$", p.text)
            if m:
                values.append(m.group(1))
    current = inp.text.removeprefix("Answer: ").strip()
    others = [v for v in values[:-1] if v != current]
    if not others:
        return None
    value = others[-1]
    return Generated(f"Answer: {value}", f"the answerer takes {value}, an intermediate finding, as the answer")


MUTATORS = {
    "R.4": [plan_r4],
    "PL.1": [plan_pl1],
    "PL.2": [plan_pl2],
    "PL.3": [delegation_pl3],
    "A.5": [delegation_a5, plan_a5],
    "C.1": [delegation_c1, plan_c1],
    "R.2": [reader_r2, delegation_r2, plan_r2],
    "C.2": [handoff_c2],
    "V.2": [verifier_v2],
    "R.3": [calc_r3],
    "C.3": [answerer_c3],
}
