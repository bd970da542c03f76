"""Function specs for `code_team`: generated tasks, designs, the code a design implies, and the test runner.

A *family* is a kind of small function (exam grades, shipping cost, order
total, late fee, moving average). A task draws a family and its parameters
(thresholds, rates, whether a bound is strict) and states them in a spec.

The architect's design restates the parameters as `- key: value` lines; the
simulated coder writes `code_for(family, design_params)`, and the simulated
tester computes expected values by running that same canonical code for the
design's test inputs (its mental model of the design). So a design error
passes the tests (coder and tester agree with the design) and only the hidden
tests, made from the spec's true parameters, catch it; a coder error that a
listed test input exercises is caught by the tests.

`run_tests(source)` runs code plus `expect(...)` lines in a fresh `python -I -S`
subprocess with a time limit and reports `N passed, M failed` and one line per
failure.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from typing import Any

TIME_LIMIT_S = 10.0
TESTS_MARK = "# --- tests ---"

HARNESS = '''
_passed, _failed = 0, []
def expect(expr, expected):
    global _passed
    try:
        got = eval(expr)
    except Exception as exc:
        got = type(exc)
    ok = got is expected if isinstance(expected, type) else (not isinstance(got, type) and got == expected)
    if ok:
        _passed += 1
    else:
        shown = got.__name__ if isinstance(got, type) else repr(got)
        want = expected.__name__ if isinstance(expected, type) else repr(expected)
        _failed.append(f"FAIL {expr}: expected {want}, got {shown}")
'''
REPORT = '''
print(f"{_passed} passed, {len(_failed)} failed")
for _line in _failed:
    print(_line)
'''


def run_tests(source: str) -> str:
    """Run `<code>\\n# --- tests ---\\n<expect lines>` in a subprocess; the report or the error."""
    code, _, tests = source.partition(TESTS_MARK)
    program = HARNESS + "\ntry:\n    exec(compile(" + repr(code) + ", 'solution.py', 'exec'))\nexcept Exception as _exc:\n" \
        "    print(f'the code does not load: {type(_exc).__name__}: {_exc}')\n    raise SystemExit(0)\n" + tests + "\n" + REPORT
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0"}
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", program], capture_output=True, text=True,
                              timeout=TIME_LIMIT_S, env=env)
    except subprocess.TimeoutExpired:
        return f"Timed out after {TIME_LIMIT_S:.0f} s."
    out = proc.stdout.strip()
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-2:])
        return (out + "\n" if out else "") + tail
    return out or "(no output)"


# ---------------------------------------------------------------- families

def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(round(v, 2))


FAMILIES = ["grade", "shipping", "total", "late_fee", "average"]


def make_params(family: str, rng: random.Random) -> dict[str, Any]:
    if family == "grade":
        p = rng.choice([40, 45, 50, 55])
        return {"pass": p, "merit": p + rng.choice([15, 20, 25, 30]), "cmp": rng.choice([">=", ">"]), "guard": True}
    if family == "shipping":
        return {"base": rng.choice([4.5, 5, 6.25, 7.5]), "first": rng.choice([1, 2, 3, 5]), "rate": rng.choice([1.2, 1.5, 2, 2.75]),
                "max": rng.choice([20, 25, 30]), "guard": True}
    if family == "total":
        return {"threshold": rng.choice([50, 75, 100, 120]), "pct": rng.choice([5, 10, 15, 20]), "cmp": rng.choice([">=", ">"]),
                "digits": 2, "guard": True}
    if family == "late_fee":
        return {"grace": rng.choice([2, 3, 5, 7]), "rate": rng.choice([0.25, 0.5, 0.75, 1.25]), "cap": rng.choice([5, 8, 10, 15]),
                "guard": True}
    return {"window": rng.choice([2, 3, 4]), "digits": rng.choice([1, 2]), "guard": True}


_MORE = {">=": "{v} or more", ">": "more than {v}"}


def spec_text(family: str, p: dict[str, Any]) -> str:
    if family == "grade":
        return (f"Write a Python function `grade(score)` for an exam board. A score of {_MORE[p['cmp']].format(v=p['merit'])} "
                f"is 'merit', a score of {_MORE[p['cmp']].format(v=p['pass'])} is 'pass', any other score is 'fail'. "
                "Scores below 0 or above 100 are invalid: raise ValueError.")
    if family == "shipping":
        return (f"Write a Python function `shipping_cost(weight)` for a courier. A parcel costs {_num(p['base'])} for up to "
                f"{p['first']} kg, plus {_num(p['rate'])} for every started kg above {p['first']} kg. A weight of 0 or less, "
                f"or above {p['max']} kg, raises ValueError. Return the cost rounded to 2 decimals.")
    if family == "total":
        return (f"Write a Python function `order_total(prices)` for a shop. The total is the sum of the prices; when that sum "
                f"is {_MORE[p['cmp']].format(v=p['threshold'])}, take {p['pct']}% off. Round to 2 decimals. An empty order is "
                "invalid: raise ValueError.")
    if family == "late_fee":
        return (f"Write a Python function `late_fee(days)` for a library. The first {p['grace']} days late are free; after "
                f"that the fee is {_num(p['rate'])} per day beyond {p['grace']}, but never more than {_num(p['cap'])}. "
                "A negative number of days raises ValueError. Return the fee rounded to 2 decimals.")
    return (f"Write a Python function `moving_average(values)`: the averages of every run of {p['window']} consecutive "
            f"values, in order, each rounded to {p['digits']} decimals. An empty list raises ValueError; a list shorter "
            f"than {p['window']} gives [].")


FUNCTION = {"grade": "grade(score)", "shipping": "shipping_cost(weight)", "total": "order_total(prices)",
            "late_fee": "late_fee(days)", "average": "moving_average(values)"}


def design_lines(family: str, p: dict[str, Any]) -> list[str]:
    """The architect's `- key: value` lines for the parameters (the order the coder implements them)."""
    lines = [f"- function: {FUNCTION[family]}"]
    if family == "grade":
        lines += [f"- merit: score {p['cmp']} {p['merit']}", f"- pass: score {p['cmp']} {p['pass']}", "- otherwise: 'fail'"]
        if p.get("guard"):
            lines.append("- invalid: score < 0 or score > 100 raises ValueError")
    elif family == "shipping":
        lines += [f"- base: {_num(p['base'])} up to {p['first']} kg", f"- rate: {_num(p['rate'])} per started kg above {p['first']} kg",
                  "- round: 2 decimals"]
        if p.get("guard"):
            lines.append(f"- invalid: weight <= 0 or weight > {p['max']} raises ValueError")
    elif family == "total":
        lines += [f"- discount: {p['pct']}% off when the sum {p['cmp']} {p['threshold']}", f"- round: {p['digits']} decimals"]
        if p.get("guard"):
            lines.append("- invalid: an empty list raises ValueError")
    elif family == "late_fee":
        lines += [f"- grace: {p['grace']} days free", f"- rate: {_num(p['rate'])} per day beyond the grace days",
                  f"- cap: {_num(p['cap'])}", "- round: 2 decimals"]
        if p.get("guard"):
            lines.append("- invalid: days < 0 raises ValueError")
    else:
        lines += [f"- window: {p['window']} consecutive values", f"- round: {p['digits']} decimals",
                  f"- short: fewer than {p['window']} values gives []"]
        if p.get("guard"):
            lines.append("- invalid: an empty list raises ValueError")
    return lines


def family_of(design: str) -> str | None:
    m = re.search(r"^- function: (\w+)\(", design, re.M)
    if m is None:
        return None
    return next((f for f, sig in FUNCTION.items() if sig.startswith(m.group(1) + "(")), None)


def _design_line(design: str, key: str, pattern: str) -> re.Match[str] | None:
    return re.search(rf"^- {key}: {pattern}\s*$", design, re.M)


def _design_num(text: str) -> float | int:
    v = float(text)
    return int(v) if v.is_integer() else v


def _grade_params(design: str) -> dict[str, Any]:
    p: dict[str, Any] = {}
    for key in ("merit", "pass"):
        m = _design_line(design, key, r"score (>=|>) (\d+)")
        if m:
            p[key], p["cmp_" + key] = int(m.group(2)), m.group(1)
    return p


def _shipping_params(design: str) -> dict[str, Any]:
    p: dict[str, Any] = {}
    if m := _design_line(design, "base", r"([\d.]+) up to ([\d.]+) kg"):
        p["base"], p["first"] = _design_num(m.group(1)), _design_num(m.group(2))
    if m := _design_line(design, "rate", r"([\d.]+) per started kg above ([\d.]+) kg"):
        p["rate"] = _design_num(m.group(1))
    if m := _design_line(design, "invalid", r"weight <= 0 or weight > ([\d.]+) raises ValueError"):
        p["max"] = _design_num(m.group(1))
    return p


def _total_params(design: str) -> dict[str, Any]:
    p: dict[str, Any] = {}
    if m := _design_line(design, "discount", r"([\d.]+)% off when the sum (>=|>) ([\d.]+)"):
        p["pct"], p["cmp"], p["threshold"] = _design_num(m.group(1)), m.group(2), _design_num(m.group(3))
    return p


def _late_fee_params(design: str) -> dict[str, Any]:
    p: dict[str, Any] = {}
    if m := _design_line(design, "grace", r"(\d+) days free"):
        p["grace"] = int(m.group(1))
    if m := _design_line(design, "rate", r"([\d.]+) per day beyond the grace days"):
        p["rate"] = _design_num(m.group(1))
    if m := _design_line(design, "cap", r"([\d.]+)"):
        p["cap"] = _design_num(m.group(1))
    return p


def _average_params(design: str) -> dict[str, Any]:
    p: dict[str, Any] = {}
    if m := _design_line(design, "window", r"(\d+) consecutive values"):
        p["window"] = int(m.group(1))
    return p


# What each family's design states, read line by line.
_FAMILY_PARAMS = {"grade": _grade_params, "shipping": _shipping_params, "total": _total_params,
                  "late_fee": _late_fee_params, "average": _average_params}


def parse_design(design: str) -> tuple[str | None, dict[str, Any]]:
    """The family and the parameters a design states (a missing line leaves its parameter out)."""
    family = family_of(design)
    p = _FAMILY_PARAMS[family](design) if family in _FAMILY_PARAMS else {}
    if m := _design_line(design, "round", r"(\d) decimals"):
        p["digits"] = int(m.group(1))
    p["guard"] = _design_line(design, "invalid", r".+") is not None
    if m := re.search(r"^- use: (\w+)", design, re.M):
        p["use"] = m.group(1)
    return family, p


def code_for(family: str, p: dict[str, Any]) -> str:
    """The function a design describes, written plainly (what the simulated coder writes)."""
    lines: list[str] = []
    if p.get("use"):
        lines.append(f"import {p['use']}")
    if family == "grade":
        lines += ["def grade(score):"]
        if p.get("guard"):
            lines += ["    if score < 0 or score > 100:", "        raise ValueError(\"score must be between 0 and 100\")"]
        for key, label in (("merit", "merit"), ("pass", "pass")):
            if key in p:
                lines += [f"    if score {p.get('cmp_' + key, '>=')} {p[key]}:", f"        return \"{label}\""]
        lines.append("    return \"fail\"")
    elif family == "shipping":
        lines += ["import math", "", "", "def shipping_cost(weight):"]
        if p.get("guard"):
            lines += [f"    if weight <= 0 or weight > {_num(p.get('max', 30))}:", "        raise ValueError(\"weight out of range\")"]
        lines += [f"    extra = max(0, math.ceil(weight - {_num(p.get('first', 0))}))",
                  f"    return round({_num(p.get('base', 0))} + {_num(p.get('rate', 0))} * extra, {p.get('digits', 2)})"]
    elif family == "total":
        lines += ["def order_total(prices):"]
        if p.get("guard"):
            lines += ["    if not prices:", "        raise ValueError(\"empty order\")"]
        lines.append("    total = sum(prices)")
        if "threshold" in p:
            lines += [f"    if total {p.get('cmp', '>=')} {_num(p['threshold'])}:", f"        total = total * (100 - {_num(p['pct'])}) / 100"]
        lines.append(f"    return round(total, {p.get('digits', 2)})")
    elif family == "late_fee":
        lines += ["def late_fee(days):"]
        if p.get("guard"):
            lines += ["    if days < 0:", "        raise ValueError(\"days must not be negative\")"]
        lines.append(f"    fee = max(0, days - {p.get('grace', 0)}) * {_num(p.get('rate', 0))}")
        if "cap" in p:
            lines.append(f"    fee = min(fee, {_num(p['cap'])})")
        lines.append(f"    return round(fee, {p.get('digits', 2)})")
    else:
        k = p.get("window", 2)
        lines += ["def moving_average(values):"]
        if p.get("guard"):
            lines += ["    if not values:", "        raise ValueError(\"no values\")"]
        lines += [f"    if len(values) < {k}:", "        return []",
                  f"    return [round(sum(values[i:i + {k}]) / {k}, {p.get('digits', 2)}) for i in range(len(values) - {k} + 1)]"]
    return "\n".join(lines)


def test_inputs(family: str, p: dict[str, Any], rng: random.Random | None) -> list[str]:
    """Call expressions that probe a design: boundaries, typical values, invalid input.

    With `rng`, a random subset (an architect does not list every case); without, all of them (the hidden tests).
    """
    if family == "grade":
        core = [p["merit"], p["merit"] - 1, p["merit"] + 1, p["pass"], p["pass"] - 1, p["pass"] + 1, 0, 100, 97, 12]
        calls = [f"grade({x})" for x in core] + ["grade(-1)", "grade(101)"]
    elif family == "shipping":
        f = p["first"]
        core = [f, f + 0.5, f + 1, f + 1.2, f + 3, 0.5, p["max"]]
        calls = [f"shipping_cost({_num(x)})" for x in core] + ["shipping_cost(0)", f"shipping_cost({p['max'] + 1})"]
    elif family == "total":
        t = p["threshold"]
        calls = [f"order_total([{_num(t)}])", f"order_total([{_num(t - 0.5)}])", f"order_total([{_num(t / 2)}, {_num(t / 2 + 1)}])",
                 "order_total([3.99, 12.5])", f"order_total([{_num(t * 2)}, 7.25])", "order_total([])"]
    elif family == "late_fee":
        g, r, c = p["grace"], p["rate"], p["cap"]
        over = int(c / r) + g + 3
        calls = [f"late_fee({x})" for x in (0, g, g + 1, g + 2, g + 4, over, over + 20)] + ["late_fee(-1)"]
    else:
        k = p["window"]
        calls = ["moving_average([1, 2, 3, 4, 5])", "moving_average([2.5, 3.5, 10, 0])", f"moving_average({list(range(1, k))})",
                 "moving_average([1, 2, 2, 7, 1, 1, 9])", "moving_average([])", "moving_average([10, 20, 30])"]
    if rng is None:
        return calls
    keep = [c for c in calls if rng.random() < 0.6]
    return keep if len(keep) >= 2 else calls[:2]


def expected(code: str, calls: list[str]) -> list[tuple[str, Any]]:
    """Run `code` in-process (our own canonical code, never an agent's) and record each call's result or exception type."""
    ns: dict[str, Any] = {}
    exec(compile(code, "<design>", "exec"), ns)  # noqa: S102 - generated by code_for from numbers we control
    out = []
    for call in calls:
        try:
            out.append((call, eval(call, ns)))  # noqa: S307
        except Exception as exc:  # the expected outcome is this exception type
            out.append((call, type(exc)))
    return out


def expect_lines(cases: list[tuple[str, Any]]) -> str:
    return "\n".join(f"expect({call!r}, {value.__name__ if isinstance(value, type) else repr(value)})" for call, value in cases)
