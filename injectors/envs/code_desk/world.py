"""The specs behind `code_desk`: a task is a small function to write from a spec, judged by hidden tests.

It stands in for the code-with-tests family (HumanEval/MBPP-style function
synthesis with unit tests). The specs, their parameters, the code a design
implies and the test runner are `code_team`'s (`code_team.world`): five kinds
of function (exam grades, shipping cost, order total, late fee, moving
average) whose thresholds, rates and bounds are drawn per task. The hidden
tests are every probe of the spec's true parameters (boundaries, typical
values, invalid input), run on the code of the team's answer in a fresh
subprocess; a run succeeds when all of them pass.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any

from ..code_team.world import (FAMILIES, FUNCTION, TESTS_MARK, code_for, design_lines, expect_lines, expected,
                               make_params, parse_design, run_tests, spec_text, test_inputs)

__all__ = ["FAMILIES", "answer_of", "code_of", "hidden_report", "make_task", "passed_all", "tests_source"]

ASK = "Reply with the final code in one ```python block."
_CODE = re.compile(r"```python\n(.*?)\n?```", re.S)
_REPORT = re.compile(r"^(\d+) passed, (\d+) failed", re.M)


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the spec as the request, the world: the family, its true parameters and the function's signature)."""
    params = make_params(family, rng)
    return f"{spec_text(family, params)} {ASK}", {"family": family, "params": params, "function": FUNCTION[family]}


def true_code(family: str, params: dict[str, Any]) -> str:
    """The function the spec describes, written plainly: the code of the spec's own design."""
    return code_for(family, parse_design("Design:\n" + "\n".join(design_lines(family, params)))[1])


def answer_of(world: dict[str, Any]) -> str:
    """The reference answer (the spec's function)."""
    return true_code(world["family"], world["params"])


def code_of(text: str | None) -> str | None:
    """The last python block of a reply, or None."""
    found = _CODE.findall(text or "")
    return found[-1] if found else None


def tests_source(code: str, calls: list[str], reference: str) -> str:
    """What `run_tests` runs: the code, then one `expect(...)` line per call with `reference`'s result."""
    return f"{code}\n{TESTS_MARK}\n{expect_lines(expected(reference, calls))}"


@functools.lru_cache(maxsize=512)
def _hidden(code: str, family: str, params: tuple[tuple[str, Any], ...]) -> str:
    p = dict(params)
    return run_tests(tests_source(code, test_inputs(family, p, None), true_code(family, p)))


def hidden_report(world: dict[str, Any], code: str) -> str:
    """The hidden tests' report on `code` (one subprocess per distinct code: a replayed run reuses it)."""
    return _hidden(code, world["family"], tuple(sorted(world["params"].items())))


def passed_all(report: str, total: int | None = None) -> bool:
    """Whether a test report says every test passed (and, with `total`, that there were that many)."""
    m = _REPORT.search(report)
    return m is not None and int(m.group(2)) == 0 and (total is None or int(m.group(1)) == total)


def hidden_count(world: dict[str, Any]) -> int:
    return len(test_inputs(world["family"], world["params"], None))
