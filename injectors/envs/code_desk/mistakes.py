"""Error rules of `code_desk` (tried before the generic ones): mistakes in the lead's, coder's and tester's replies.

Where each rule acts (see `code_desk.env` for the steps): the lead's plan, its design and the coder's brief (R.3,
R.4, C.2, A.5), the coder's code (R.2, R.3, V.1), the tester's test run and verdict (A.3, V.2), the lead's hand-over to the tester and its
answer (C.2, C.3, R.1, A.4). The lead follows its plan's design and gives the tester that design, so a design error passes the
tests and only the hidden tests catch it; a slip of the coder is caught when one of the design's test calls
exercises it (else it is kept).
"""

from __future__ import annotations

import json
import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, change_a_number
from ..agents_desk.wire import render_call
from .policy import design_in
from .world import code_of

_RULE_LINE = re.compile(r"^- (?!function|tests|invalid|round)([\w ]+): (.+)$", re.M)
_GUARD = re.compile(r"^    if .+:\n        raise ValueError\(.*\)\n", re.M)
_COMPARISON = re.compile(r" (>=|<=|>|<) ")
_FLIP = {">=": ">", ">": ">=", "<=": "<", "<": "<="}


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
    """The lead's design misreads the spec: a bound's strictness flipped, or the invalid input left out."""
    def change(design: str) -> str | None:
        m = _COMPARISON.search(design)
        if m is not None:
            return design[: m.start(1)] + _FLIP[m.group(1)] + design[m.end(1):]
        return re.sub(r"^- invalid: .+\n", "", design, count=1, flags=re.M)

    return _with_design(inp, change, "the design misreads the spec: a bound's strictness flipped or the invalid input "
                        "left out, and the lead follows it")


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


def _c2_brief(inp: GenInput) -> Generated | None:
    """The lead's brief to the coder (the coder tool's input) states a number other than its own plan's design."""
    found: list[tuple[str, str]] = []

    def change(design: str) -> str | None:
        out = _number_changed(inp, design)
        if out is not None:
            found.append(out[1:])
        return out[0] if out else None

    made = _with_design(inp, change, "", thought_too=False)
    return Generated(made.text, f"the brief tells the coder {found[0][1]} where the lead's design says {found[0][0]}") \
        if made else None


def _c2_code(inp: GenInput) -> Generated | None:
    """The lead hands the coder's code on to the tester with a number slipped (and answers with what was tested)."""
    action = inp.action if inp.agent == "lead" and inp.kind == StepKind.message else None
    if action is None or action.tool != "tester":
        return None
    try:
        brief = json.loads(action.argument).get("input")
    except (json.JSONDecodeError, AttributeError):
        return None
    code = code_of(brief) if isinstance(brief, str) else None
    body = code.split("\n", 1)[1] if code and "\n" in code else None
    changed = change_a_number(body, inp.rng) if body else None
    if code is None or body is None or changed is None:
        return None
    return Generated(render_call("tester", {"input": brief.replace(body, changed[0])}, action.thought),
                     f"hands the coder's code on with {changed[2]} where the coder wrote {changed[1]}")


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


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3_design, _r3_code], "R.4": [_r4], "A.4": [_a4], "A.5": [_a5],
            "A.3": [_a3], "V.1": [_v1], "V.2": [_v2], "C.2": [_c2_brief, _c2_code], "C.3": [_c3]}
