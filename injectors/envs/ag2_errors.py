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


MUTATORS = {"R.4": [_r4], "A.5": [_a5]}
