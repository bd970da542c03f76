"""Error rules of `ag2_experts` (tried before the generic ones): mistakes of the planner's plan."""

from __future__ import annotations

import re

from faultlens.middleware.model import StepKind

from ..generators import Generated, GenInput
from .ag2_tasks import read_question, read_spec, spec_line

# The quantity a misunderstanding computes instead: the same data, another question.
_OTHER = {"or": "and", "and": "or", "sum": "count", "count": "sum", "greater than": "at most", "at most": "greater than",
          "steps": "values"}
_DIGITS_OTHER = {"sum": "product", "product": "sum"}


def _r4(inp: GenInput) -> Generated | None:
    """The plan asks the coder for a different quantity of the same data."""
    if inp.kind != StepKind.plan:
        return None
    spec = read_spec(inp.text)
    if spec is None:
        return None
    other = (_DIGITS_OTHER if spec.family == "digits" else _OTHER).get(spec.variant)
    if other is None:
        return None
    changed = spec_line(type(spec)(spec.family, spec.values, other, spec.data))
    text = inp.text.replace(spec_line(spec), changed)
    return Generated(text, f"plans to compute '{changed}' where the question asks for '{spec_line(spec)}'")


def _a5(inp: GenInput) -> Generated | None:
    """The planner answers at once with a rough figure instead of having the code run."""
    if inp.kind != StepKind.plan or read_question(inp.task_query) is None:
        return None
    numbers = [int(n) for n in re.findall(r"\b\d+\b", inp.task_query)]
    if not numbers:
        return None
    guess = max(numbers) // 3 + inp.rng.randint(1, 9)
    return Generated(f"This can be estimated directly without running code.\nANSWER: {guess}\nTERMINATE",
                     f"answers {guess} from an estimate before any code has run")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan covers only part of the data (a first pass that is never completed)."""
    if inp.kind != StepKind.plan:
        return None
    spec = read_spec(inp.text)
    if spec is None:
        return None
    if spec.family in ("divisible", "primes"):
        lo, hi = spec.values[0], spec.values[1]
        values = (lo, (lo + hi) // 2, *spec.values[2:])
        part = type(spec)(spec.family, values, spec.variant, spec.data)
        reason = f"plans over {lo}..{(lo + hi) // 2} only, half of the range the question gives"
    elif spec.family == "mean_above" and len(spec.data) > 4:
        part = type(spec)(spec.family, spec.values, spec.variant, spec.data[:-3])
        reason = "plans over the readings without the last three"
    else:
        return None
    return Generated(inp.text.replace(spec_line(spec), spec_line(part)), reason)


def _a4(inp: GenInput) -> Generated | None:
    """The final answer carries words after the value, so it is no longer a bare number."""
    m = re.search(r"^ANSWER: (.+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    value = m.group(1).strip()
    new = inp.rng.choice([f"ANSWER: {value} (from the code output)", f"ANSWER: approximately {value}",
                          f"ANSWER: the code printed {value}"])
    return Generated(inp.text[: m.start()] + new + inp.text[m.end():], "the answer is not a bare value after 'ANSWER:'")


MUTATORS = {"R.4": [_r4], "PL.1": [_pl1], "A.4": [_a4], "A.5": [_a5]}
