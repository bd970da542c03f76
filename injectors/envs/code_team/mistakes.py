"""Error rules specific to `code_team` (tried before the generic rules of each mode).

Each rule takes a `GenInput` and returns a `Generated` (the rewritten action and
a one-line reason for the gold label) or None when it does not fit the step.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, change_a_number
from ..base import parse_action, render_action


def _design(inp: GenInput) -> bool:
    return inp.agent == "architect" and inp.kind == StepKind.plan and inp.text.startswith("Design:")


def _rule_lines(text: str) -> list[re.Match]:
    return [m for m in re.finditer(r"^- (?!function|tests|workflow|otherwise)(\w+): (.+)$", text, re.M)]


def _coder_code(inp: GenInput):
    if inp.agent != "coder" or inp.kind != StepKind.message:
        return None
    return re.search(r"```python\n(.*?)\n?```", inp.text, re.S)


# -- the architect's design -------------------------------------------------

def design_r3(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    lines = [m for m in _rule_lines(inp.text) if re.search(r"\d", m.group(2)) and m.group(1) not in ("invalid", "round")]
    if not lines:
        return None
    line = inp.rng.choice(lines)
    changed = change_a_number(line.group(2), inp.rng)
    if changed is None:
        return None
    new, old, value = changed
    return Generated(inp.text[: line.start(2)] + new + inp.text[line.end(2):], f"the design states {value} where the spec says {old}")


def design_r2(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    m = re.search(r" (>=|>) ", inp.text)
    if m is None:
        return None
    new = ">" if m.group(1) == ">=" else ">="
    return Generated(inp.text[: m.start(1)] + new + inp.text[m.end(1):],
                     "the design turns an inclusive bound of the spec into a strict one" if new == ">" else "the design turns a strict bound into an inclusive one")


def design_r4(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    m = re.search(r"^- round: (\d) decimals$", inp.text, re.M)
    if m and inp.rng.random() < 0.5:
        new = "0" if m.group(1) != "0" else "1"
        return Generated(inp.text[: m.start(1)] + new + inp.text[m.end(1):], f"the design rounds to {new} decimals where the spec asks for {m.group(1)}")
    m = re.search(r"^- merit: score (>=|>) (\d+)\n- pass: score (>=|>) (\d+)$", inp.text, re.M)
    if m:
        swapped = f"- merit: score {m.group(3)} {m.group(4)}\n- pass: score {m.group(1)} {m.group(2)}"
        return Generated(inp.text[: m.start()] + swapped + inp.text[m.end():], "the design swaps the merit and pass thresholds")
    m = re.search(r"^- discount: (\d+)% off", inp.text, re.M)
    if m:
        return Generated(inp.text.replace(f"- discount: {m.group(1)}% off", f"- discount: {100 - int(m.group(1))}% off"),
                         f"the design charges {m.group(1)}% of the price instead of taking {m.group(1)}% off")
    m = re.search(r"^- cap: .+\n", inp.text, re.M)
    if m:
        return Generated(inp.text[: m.start()] + inp.text[m.end():], "the design ignores the spec's cap on the fee")
    m = re.search(r"^- window: (\d+) consecutive values$", inp.text, re.M)
    if m:
        return Generated(inp.text.replace("- window: ", "- window: 1 +", 1).replace(f"1 +{m.group(1)}", str(int(m.group(1)) + 1)),
                         f"the design averages runs of {int(m.group(1)) + 1} values where the spec says {m.group(1)}")
    return None


def design_pl1(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    m = re.search(r"^- invalid: .+\n", inp.text, re.M)
    if m is None:
        return None
    text = inp.text[: m.start()] + inp.text[m.end():]
    # the tests line loses the invalid inputs too: nobody plans to check them
    tests = re.search(r"^- tests: (.+)$", text, re.M)
    if tests:
        kept = [c for c in tests.group(1).split("; ") if not re.search(r"\(-1\)|\(0\)|\(\[\]\)|\(101\)", c)]
        text = text[: tests.start(1)] + "; ".join(kept or tests.group(1).split("; ")[:1]) + text[tests.end(1):]
    return Generated(text, "the design leaves out the spec's invalid-input rule")


def design_pl2(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    module = inp.rng.choice(["numpy", "pandas", "fastround"])
    m = re.search(r"^- tests: ", inp.text, re.M)
    if m is None:
        return None
    return Generated(inp.text[: m.start()] + f"- use: {module} for the arithmetic\n" + inp.text[m.start():],
                     f"the design relies on {module}, which the test environment does not have")


def design_pl3(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    m = re.search(r"^- function: (\w+)\((\w+)\)$", inp.text, re.M)
    if m is None:
        return None
    name = {"grade": "grade_label", "shipping_cost": "shipping_quote", "order_total": "order_summary", "late_fee": "fee_schedule",
            "moving_average": "rolling_stats"}.get(m.group(1), m.group(1) + "_v2")
    text = inp.text.replace(f"{m.group(1)}(", f"{name}(")
    return Generated(text, f"the design is for a function {name} instead of the {m.group(1)} the spec asks for")


def design_a5(inp: GenInput) -> Generated | None:
    if not _design(inp):
        return None
    rules = _rule_lines(inp.text)
    if len(rules) < 3:
        return None
    cut = rules[1].end()
    tests = re.search(r"^- tests: .+$", inp.text, re.M)
    rest = "\n" + tests.group(0) if tests else ""
    return Generated(inp.text[:cut] + rest + "\n- workflow: coder starts now; I will add the remaining rules later",
                     "the design stops after the first rules and never gives the rest")


def design_c1(inp: GenInput) -> Generated | None:
    if not _design(inp) or "- workflow:" not in inp.text:
        return None
    text = re.sub(r"^- workflow: .+$", "- workflow: coder writes and checks the function; tester not needed; I submit the coder's version",
                  inp.text, flags=re.M)
    return Generated(text, "the architect leaves testing to the coder and takes the tester out of the loop")


# -- the coder ----------------------------------------------------------------

def code_r3(inp: GenInput) -> Generated | None:
    m = _coder_code(inp)
    if m is None:
        return None
    code = m.group(1)
    nums = [n for n in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])", code) if n.group(1) not in ("0", "1", "100") or inp.rng.random() < 0.2]
    if not nums:
        return None
    n = inp.rng.choice(nums)
    value = n.group(1)
    new = str(int(value) + inp.rng.choice([1, -1, 5])) if "." not in value else f"{float(value) + 0.25:g}"
    code2 = code[: n.start(1)] + new + code[n.end(1):]
    return Generated(inp.text[: m.start(1)] + code2 + inp.text[m.end(1):], f"the code uses {new} where the design says {value}")


def code_r2(inp: GenInput) -> Generated | None:
    m = _coder_code(inp)
    if m is None:
        return None
    code = m.group(1)
    swaps = [(" >= ", " > "), (" > ", " >= "), (" <= ", " < "), (" < ", " <= "), ("max(", "min(")]
    inp.rng.shuffle(swaps)
    for old, new in swaps:
        if old in code:
            return Generated(inp.text[: m.start(1)] + code.replace(old, new, 1) + inp.text[m.end(1):],
                             f"the code compares with '{new.strip()}' where the design needs '{old.strip()}'")
    return None


def code_a4(inp: GenInput) -> Generated | None:
    m = _coder_code(inp)
    if m is None:
        return None
    code = m.group(1)
    i = code.find("):\n")
    if i < 0:
        return None
    return Generated(inp.text[: m.start(1)] + code[:i] + ")\n" + code[i + 3:] + inp.text[m.end(1):], "the code is missing a colon")


def code_v1(inp: GenInput) -> Generated | None:
    m = _coder_code(inp)
    if m is None:
        return None
    code = m.group(1)
    nums = list(dict.fromkeys(re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])", code)))
    nums = [n for n in nums if n not in ("0", "1")]
    if len(nums) < 2:
        return None
    a, b = inp.rng.sample(nums, 2)
    pos = [x for x in re.finditer(rf"(?<![\w.]){re.escape(a)}(?![\w.])", code)]
    x = pos[0]
    code2 = code[: x.start()] + b + code[x.end():]
    return Generated(inp.text[: m.start(1)] + code2 + inp.text[m.end(1):], f"the code uses {b}, another number of the design, in place of {a}")


def code_a6(inp: GenInput) -> Generated | None:
    if _coder_code(inp) is None:
        return None
    for p in reversed(inp.prefix):
        if p.agent == "coder" and p.text.startswith("Version ") and p.text != inp.text:
            k = re.match(r"^Version (\d+):", inp.text)
            return Generated(re.sub(r"^Version \d+:", f"Version {k.group(1) if k else 2}:", p.text), "sends the previous version again unchanged")
    return None


# -- the tester ---------------------------------------------------------------

def tests_v2(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "tester" and inp.kind == StepKind.tool_call else None
    if action is None or action.tool != "run_tests":
        return None
    lines = action.argument.splitlines()
    if len(lines) < 3:
        return None
    kept = lines[:2]
    return Generated(render_action("run_tests", "\n".join(kept), action.thought, code=True), "the tester runs only two of the design's cases")


def tests_r3(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "tester" and inp.kind == StepKind.tool_call else None
    if action is None or action.tool != "run_tests":
        return None
    lines = action.argument.splitlines()
    numeric = [i for i, line in enumerate(lines) if re.search(r", -?\d+(\.\d+)?\)$", line)]
    if not numeric:
        return None
    i = inp.rng.choice(numeric)
    m = re.search(r", (-?\d+(?:\.\d+)?)\)$", lines[i])
    assert m is not None  # `numeric` holds the lines that end with a number
    value = m.group(1)
    new = f"{float(value) + inp.rng.choice([0.5, 1, 2]):g}" if "." in value else str(int(value) + inp.rng.choice([1, 2, 10]))
    lines[i] = lines[i][: m.start(1)] + new + ")"
    return Generated(render_action("run_tests", "\n".join(lines), action.thought, code=True), f"the tester expects {new} where the design gives {value}")


def tests_a3(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "tester" and inp.kind == StepKind.tool_call else None
    if action is None:
        return None
    k = re.search(r"version (\d+)", action.thought)
    return Generated(f"I ran the design's cases and they all pass on version {k.group(1) if k else 1}. Approved.",
                     "reports test results without running the tests")


def tests_a2(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "tester" and inp.kind == StepKind.tool_call else None
    if action is None or action.tool != "run_tests":
        return None
    lines = action.argument.splitlines()
    spots = [(i, m) for i, line in enumerate(lines) for m in [re.search(r"^expect\('\w+\((\[?)(\d+)", line)] if m]
    if not spots:
        return None
    i, m = inp.rng.choice(spots)
    value = m.group(2)
    new = str(int(value) + inp.rng.choice([1, 2, 10]))
    lines[i] = lines[i][: m.start(2)] + new + lines[i][m.end(2):]
    return Generated(render_action("run_tests", "\n".join(lines), action.thought, code=True),
                     f"the test calls the function with {new} but expects the result for {value}")


def verdict_a4(inp: GenInput) -> Generated | None:
    if inp.agent != "tester" or inp.kind != StepKind.message:
        return None
    m = re.match(r"^All (\d+) tests pass on version (\d+)\. Approved\.$", inp.text)
    if m is None:
        return None
    return Generated(f"v{m.group(2)}: {m.group(1)}/{m.group(1)} green, ship it", "the tester's report is not in the agreed form, so the approval is not read")


def report_v3(inp: GenInput) -> Generated | None:
    m = re.match(r"^(\d+) passed, (\d+) failed", inp.text) if inp.kind == StepKind.tool_result else None
    if m is None:
        return None
    if int(m.group(2)) > 0:
        total = int(m.group(1)) + int(m.group(2))
        return Generated(f"{total} passed, 0 failed", "the test runner returns a stale, all-passing report and nobody notices")
    return Generated("Timed out after 10 s.", "the test runner times out and the team does not run it again")


def verdict_v2(inp: GenInput) -> Generated | None:
    if inp.agent != "tester" or inp.kind != StepKind.message:
        return None
    m = re.match(r"^Version (\d+) fails (?:(\d+) of (\d+) tests|the tests):", inp.text)
    if m is None:
        return None
    n = m.group(3) or "all"
    return Generated(f"All {n} tests pass on version {m.group(1)}. Approved.", "the tester approves a version whose tests fail")


def verdict_v2_reject(inp: GenInput) -> Generated | None:
    if inp.agent != "tester" or inp.kind != StepKind.message:
        return None
    m = re.match(r"^All (\d+) tests pass on version (\d+)\. Approved\.$", inp.text)
    expects = [re.match(r"^expect\('(.+?)'", line) for p in inp.prefix if p.agent == "tester" for line in p.text.splitlines()]
    calls = [c.group(1) for c in expects if c]
    if m is None or not calls:
        return None
    call = inp.rng.choice(calls)
    return Generated(f"Version {m.group(2)} fails 1 of {m.group(1)} tests:\nFAIL {call}: the result does not look right to me",
                     "the tester rejects a version whose tests all pass")


def verdict_c2(inp: GenInput) -> Generated | None:
    if inp.agent != "tester" or inp.kind != StepKind.message:
        return None
    m = re.match(r"^All (\d+) tests pass on version (\d+)\. Approved\.$", inp.text)
    if m is None:
        return None
    k = int(m.group(2))
    other = k - 1 if k > 1 else k + 1
    return Generated(f"All {m.group(1)} tests pass on version {other}. Approved.", f"the tester reports version {other} as the one that passed (it tested version {k})")


def verdict_c3(inp: GenInput) -> Generated | None:
    if inp.agent != "tester" or inp.kind != StepKind.message:
        return None
    m = re.match(r"^Version (\d+) fails", inp.text)
    if m is None:
        return None
    return Generated(f"The coder wrote version {m.group(1)} straight from the design, so I trust it. Approved version {m.group(1)}.",
                     "the tester takes the coder's version on trust despite failing tests")


def submit_a4(inp: GenInput) -> Generated | None:
    m = re.match(r"^Submit version (\d+)\.$", inp.text) if inp.agent == "architect" and inp.kind == StepKind.final_answer else None
    if m is None:
        return None
    return Generated(inp.rng.choice([f"Submit: v{m.group(1)}", f"Submitting version #{m.group(1)}", f"submit version {m.group(1)}"]),
                     "the submission is not in the 'Submit version <k>.' form")


def submit_c3(inp: GenInput) -> Generated | None:
    m = re.match(r"^Submit version (\d+)\.$", inp.text) if inp.agent == "architect" and inp.kind == StepKind.final_answer else None
    versions = [p for p in inp.prefix if p.agent == "coder" and p.text.startswith("Version ")]
    if m is None or len(versions) < 2 or m.group(1) == "1":
        return None
    return Generated("Submit version 1.", "the architect submits the coder's first version, as the coder handed it over, not the approved one")


MUTATORS = {
    "R.2": [design_r2, code_r2],
    "R.3": [design_r3, code_r3, tests_r3],
    "R.4": [design_r4],
    "PL.1": [design_pl1],
    "PL.2": [design_pl2],
    "PL.3": [design_pl3],
    "A.3": [tests_a3],
    "A.2": [tests_a2],
    "A.4": [verdict_a4, submit_a4, code_a4],
    "A.5": [design_a5],
    "A.6": [code_a6],
    "V.1": [code_v1],
    "V.2": [verdict_v2, verdict_v2_reject, tests_v2],
    "V.3": [report_v3],
    "C.1": [design_c1],
    "C.2": [verdict_c2],
    "C.3": [verdict_c3, submit_c3],
}
