"""Error rules of `code_desk` (tried before the generic ones): mistakes in the lead's, coder's and tester's replies.

Where each rule acts (see `code_desk.env` for the steps): the lead's plan, its design and the coder's brief (R.3,
R.4, C.2, A.5), the coder's code (R.2, R.3, V.1), the tester's test run and verdict (A.3, V.2), the lead's hand-over to the tester and its
answer (C.2, C.3, R.1, A.4). The lead follows its plan's design and gives the tester that design, so a design error passes the
tests and only the hidden tests catch it; a slip of the coder is caught when one of the design's test calls
exercises it (else it is kept).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, change_a_number, numbers, perturb_number, replace_span
from ..agents_desk.wire import render_call
from ..code_team.env import design_params_for_tester, design_tests
from ..code_team.world import code_for, parse_design, run_tests, test_inputs
from .policy import design_in
from .world import code_of, passed_all, tests_source

_RULE_LINE = re.compile(r"^- (?!function|tests|invalid|round)([\w ]+): (.+)$", re.M)
_GUARD = re.compile(r"^    if .+:\n        raise ValueError\(.*\)\n", re.M)
_COMPARISON = re.compile(r" (>=|<=|>|<) ")
_FLIP = {">=": ">", ">": ">=", "<=": "<", "<": "<="}
# A test call of an invalid input (the probes `code_team.world.test_inputs` makes for the invalid-input rule).
_NUMBER_TRIES = 8  # numbers a slip is tried on before a rule gives up (each try is one test run)
_INVALID_PROBE = re.compile(r"\((-\d+(\.\d+)?|0|\[\]|101)\)")


def _loads(code: str) -> bool:
    try:
        compile(code, "solution.py", "exec")
    except SyntaxError:
        return False
    return True


def _plan(inp: GenInput) -> tuple[str, str, str] | None:
    """The lead's plan: (its thought, the coder's brief, the delegated tool), or None."""
    action = inp.action if inp.agent == "lead" and inp.kind == StepKind.plan else None
    if action is None:
        return None
    try:
        brief = json.loads(action.argument).get("input")
    except (json.JSONDecodeError, AttributeError):
        return None
    return (action.thought, brief, action.tool) if isinstance(brief, str) and design_in(brief) else None


def _with_design(inp: GenInput, change, reason: str, *, thought_too: bool = True) -> Generated | None:
    """The plan with `change(design) -> design | None` applied to the brief's design (and the plan's, if asked)."""
    plan = _plan(inp)
    if plan is None:
        return None
    thought, brief, tool = plan
    old = design_in(brief)
    new = change(old)
    if new is None or new == old:
        return None
    thought = thought.replace(old, new) if thought_too else thought
    return Generated(render_call(tool, {"input": brief.replace(old, new)}, thought), reason)


def _r4(inp: GenInput) -> Generated | None:
    """The lead's design misreads the spec: a bound's strictness flipped (every design has a bound)."""
    def change(design: str) -> str | None:
        m = _COMPARISON.search(design)
        return None if m is None else design[: m.start(1)] + _FLIP[m.group(1)] + design[m.end(1):]

    return _with_design(inp, change, "the design misreads the spec: a bound's strictness flipped, and the lead "
                        "follows it")


def _pl1(inp: GenInput) -> Generated | None:
    """The lead's plan leaves a sub-goal out: no invalid-input rule in the design (nor its probes in the tests)."""
    def change(design: str) -> str | None:
        m = re.search(r"^- invalid: .+\n", design, re.M)
        if m is None:
            return None
        out = design[: m.start()] + design[m.end():]
        tests = re.search(r"^- tests: (.+)$", out, re.M)
        calls = [c for c in tests.group(1).split("; ") if not _INVALID_PROBE.search(c)] if tests else []
        return out[: tests.start(1)] + "; ".join(calls) + out[tests.end(1):] if tests and calls else out

    return _with_design(inp, change, "the plan leaves out the spec's invalid-input rule (no check that raises "
                        "ValueError), and the lead follows it")


def _pl2(inp: GenInput) -> Generated | None:
    """The lead's plan relies on a helper module the test environment does not have."""
    module = inp.rng.choice(["fastround", "specutils", "mathx"])

    def change(design: str) -> str | None:
        m = re.search(r"^- tests: ", design, re.M)
        return None if m is None else design[: m.start()] + f"- use: {module} for the arithmetic\n" + design[m.start():]

    return _with_design(inp, change, f"the plan relies on a module {module} that the environment does not have")


def _number_changed(inp: GenInput, design: str) -> tuple[str, str, str] | None:
    lines = [m for m in _RULE_LINE.finditer(design) if re.search(r"\d", m.group(2))]
    if not lines:
        return None
    line = inp.rng.choice(lines)
    changed = change_a_number(line.group(2), inp.rng)
    if changed is None:
        return None
    return design[: line.start(2)] + changed[0] + design[line.end(2):], changed[1], changed[2]


def _r3_design(inp: GenInput) -> Generated | None:
    """The lead's design states a rule's number wrong (it follows the design)."""
    found: list[tuple[str, str]] = []

    def change(design: str) -> str | None:
        out = _number_changed(inp, design)
        if out is not None:
            found.append(out[1:])
        return out[0] if out else None

    made = _with_design(inp, change, "")
    return Generated(made.text, f"the design states {found[0][1]} where the spec says {found[0][0]}") if made else None


def _missed_by_tests(design: str, code: str) -> bool:
    """Whether `code` passes the tests the design lists, as the tester would run them, and yet does something else
    than the design on some probe of it (a slip that changes what the function does, which those tests miss)."""
    family, params = design_params_for_tester(design)
    if family is None:
        return False
    reference = code_for(family, params)
    return passed_all(run_tests(tests_source(code, design_tests(design), reference))) and \
        not passed_all(run_tests(tests_source(code, test_inputs(family, params, None), reference)))


def _unnoticed(text: str, rng: random.Random, works: Callable[[str], bool],
               within: Callable[[re.Match], bool] = lambda m: True) -> tuple[str, str, str] | None:
    """`text` with one of its numbers (`within` says which) slipped such that `works(new_text)`: the team's own tests
    miss the slip. (text, old, new), or None."""
    found = [m for m in numbers(text) if within(m)]
    rng.shuffle(found)
    for m in found[:_NUMBER_TRIES]:
        new = perturb_number(m.group(0), rng)
        out = replace_span(text, m, new)
        if new != m.group(0) and works(out):
            return out, m.group(0), new
    return None


def _lead_brief(inp: GenInput, member: str) -> tuple[str, str] | None:
    """The lead's later message to `member` in the step: (its brief, its thought), or None."""
    action = inp.action if inp.agent == "lead" and inp.kind == StepKind.message else None
    if action is None or action.tool != member:
        return None
    try:
        brief = json.loads(action.argument).get("input")
    except (json.JSONDecodeError, AttributeError):
        return None
    return (brief, action.thought) if isinstance(brief, str) else None


def _c2_brief(inp: GenInput) -> Generated | None:
    """The lead sends a failing version back to the coder with a rule's number other than its plan's design (one the
    design's listed tests do not exercise: the fixed version passes them)."""
    found = _lead_brief(inp, "coder")
    design = design_in(found[0]) if found else ""
    rules = [(m.start(2), m.end(2)) for m in _RULE_LINE.finditer(design)]
    if found is None or not rules:
        return None

    def works(changed: str) -> bool:
        family, params = parse_design(changed)
        return family is not None and _missed_by_tests(design, code_for(family, params))

    slipped = _unnoticed(design, inp.rng, works, lambda m: any(a <= m.start() and m.end() <= b for a, b in rules))
    if slipped is None:
        return None
    brief = found[0].replace(design, slipped[0])
    return Generated(render_call("coder", {"input": brief}, found[1]),
                     f"the brief tells the coder {slipped[2]} where the lead's design says {slipped[1]}")


def _c2_code(inp: GenInput) -> Generated | None:
    """The lead hands the coder's code on to the tester with a number slipped (one the design's listed tests do not
    exercise, so the tester passes it and the lead answers with what was tested)."""
    found = _lead_brief(inp, "tester")
    code = code_of(found[0]) if found else None
    body = code.split("\n", 1)[1] if code and "\n" in code else None
    if found is None or code is None or body is None:
        return None
    design, head = design_in(found[0]), code.split("\n", 1)[0]
    slipped = _unnoticed(body, inp.rng, lambda new: _missed_by_tests(design, f"{head}\n{new}"))
    if slipped is None:
        return None
    return Generated(render_call("tester", {"input": found[0].replace(body, slipped[0])}, found[1]),
                     f"hands the coder's code on with {slipped[2]} where the coder wrote {slipped[1]}")


def _a5(inp: GenInput) -> Generated | None:
    """The lead stops at its plan: it answers before anyone wrote code."""
    if _plan(inp) is None:
        return None
    return Generated("The design is clear; the coder can implement it as written.",
                     "answers with the plan before the coder wrote any code")


def _coder_code(inp: GenInput) -> str | None:
    return code_of(inp.text) if inp.agent == "coder" and inp.kind == StepKind.message else None


def _r2(inp: GenInput) -> Generated | None:
    """The coder writes a comparison the wrong way round (strict for inclusive, or back) or swaps + and -."""
    code = _coder_code(inp)
    if code is None:
        return None
    found = [m for m in _COMPARISON.finditer(code) if "raise" not in code[m.end(): code.find("\n", m.end()) + 40]]
    if found:
        m = inp.rng.choice(found)
        new = code[: m.start(1)] + _FLIP[m.group(1)] + code[m.end(1):]
        reason = f"writes {_FLIP[m.group(1)]} where the design needs {m.group(1)}"
    else:
        op = re.search(r" ([-+]) ", code)
        if op is None:
            return None
        swap = "+" if op.group(1) == "-" else "-"
        new, reason = code[: op.start(1)] + swap + code[op.end(1):], f"writes {swap} where the design needs {op.group(1)}"
    return Generated(inp.text.replace(code, new), reason)


def _r3_code(inp: GenInput) -> Generated | None:
    """The coder writes one of the design's numbers wrong in the code."""
    code = _coder_code(inp)
    body = code.split("\n", 1)[1] if code and "\n" in code else None
    changed = change_a_number(body, inp.rng) if body else None
    if body is None or changed is None:
        return None
    return Generated(inp.text.replace(body, changed[0]), f"writes {changed[2]} where the design says {changed[1]}")


def _v1(inp: GenInput) -> Generated | None:
    """The coder forgets the design's rule for invalid input (no ValueError)."""
    code = _coder_code(inp)
    m = _GUARD.search(code + "\n") if code else None
    if code is None or m is None:
        return None
    return Generated(inp.text.replace(code, (code + "\n").replace(m.group(0), "", 1).rstrip("\n")),
                     "forgets the design's invalid-input rule (no ValueError is raised)")


def _a3(inp: GenInput) -> Generated | None:
    """The tester reports a passing run without running the tests (where the version is broken: a version that works
    makes no failure)."""
    action = inp.action if inp.agent == "tester" and inp.kind == StepKind.tool_call else None
    brief = inp.prefix[-1].text if inp.prefix else ""
    try:
        code = code_of(json.loads(brief[brief.index("{"):]).get("input")) if "{" in brief else None
    except (json.JSONDecodeError, AttributeError):
        code = None
    if action is None or action.tool != "run_tests" or code is None or _loads(code):
        return None
    listed = len(re.findall(r"^expect\(", json.loads(action.argument).get("source", ""), re.M))
    return Generated(f"{listed} passed, 0 failed\nVERDICT: pass", "reports the tests as passed without running them")


def _a3_claimed_run(inp: GenInput) -> Generated | None:
    """The lead says the tester ran and passed a version it never gave the tester: at the hand-over of a version
    that does not load, or instead of sending a failing version back to the coder (its last report failed it)."""
    to_tester, to_coder = _lead_brief(inp, "tester"), _lead_brief(inp, "coder")
    last = inp.prefix[-1] if inp.prefix else None
    if to_tester is not None and last is not None and last.agent == "coder":
        code = code_of(last.text)
        if code is None or _loads(code):
            return None
        said = "The tester ran the design's tests on version 1 and they pass."
    elif to_coder is not None and last is not None and last.agent == "tester" and "VERDICT: fail" in last.text:
        code = code_of(to_coder[0])
        if code is None:
            return None
        said = "The coder fixed the version and the tester's run passes."
    else:
        return None
    return Generated(f"{said}\n```python\n{code}\n```", "claims a test run of the version that never took place "
                     "and answers with it")


def _v2(inp: GenInput) -> Generated | None:
    """The tester passes a version whose tests fail (or that does not load)."""
    if inp.agent != "tester" or inp.kind != StepKind.message or "VERDICT: fail" not in inp.text:
        return None
    return Generated(re.sub(r"VERDICT: fail", "VERDICT: pass", inp.text), "passes the version although its tests fail")


def _answer_code(inp: GenInput) -> str | None:
    return code_of(inp.text) if inp.agent == "lead" and inp.kind == StepKind.final_answer else None


def _r1(inp: GenInput) -> Generated | None:
    """The lead's answer imports a helper module that does not exist."""
    code = _answer_code(inp)
    if code is None:
        return None
    module = inp.rng.choice(["pyrules", "specutils", "mathx"])
    return Generated(inp.text.replace(code, f"import {module}\n\n{code}"), f"the answer imports {module}, a module that "
                     "does not exist")


def _a4(inp: GenInput) -> Generated | None:
    """The lead's answer loses the code's indentation."""
    code = _answer_code(inp)
    if code is None or "\n    " not in code:
        return None
    flat = "\n".join(line.strip() for line in code.splitlines())
    return Generated(inp.text.replace(code, flat), "the answer's code lost its indentation (it does not load)")


def _c3(inp: GenInput) -> Generated | None:
    """The lead takes the coder's version as it is and answers with it: without the tester, or over the tester's
    failing report (where that version is broken: a version that works makes no failure)."""
    action = inp.action if inp.agent == "lead" and inp.kind == StepKind.message else None
    last = inp.prefix[-1] if inp.prefix else None
    if action is None or last is None:
        return None
    if action.tool == "tester" and last.agent == "coder":
        code = code_of(last.text)
        broken = code is not None and not _loads(code)
    elif action.tool == "coder" and last.agent == "tester" and "VERDICT: fail" in last.text:
        try:
            code = code_of(json.loads(action.argument).get("input"))
        except (json.JSONDecodeError, AttributeError):
            code = None
        broken = True
    else:
        return None
    if code is None or not broken:
        return None
    return Generated(f"The coder's version is right as written.\n```python\n{code}\n```",
                     "answers with the coder's version as it is, which the tests would fail")


MUTATORS = {"PL.1": [_pl1], "PL.2": [_pl2], "R.1": [_r1], "R.2": [_r2], "R.3": [_r3_design, _r3_code], "R.4": [_r4], "A.4": [_a4], "A.5": [_a5],
            "A.3": [_a3, _a3_claimed_run], "V.1": [_v1], "V.2": [_v2], "C.2": [_c2_brief, _c2_code], "C.3": [_c3]}
