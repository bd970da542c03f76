"""Error rules of `ag2_experts` (tried before the generic ones).

The planner's plan (R.4, PL.1, A.5), the coder's code message (R.2, R.3, PL.3, V.1, C.2, and the messages
without code of A.3 and C.1) and the planner's final answer (R.1, A.4). Every rule that edits code keeps it
running (no loop that may not end, no crash the coder would then repair): the mistake is in what the code
computes, as a real expert's would be, and a rule applies only where its change alters the value the
question asks for (a slip that changes nothing is no failure to label).
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, perturb_number
from .tasks import Spec, answer_of, code_for, read_question, read_spec, spec_line

# The quantity a misunderstanding computes instead: the same data, another question.
_OTHER = {"or": "and", "and": "or", "sum": "count", "count": "sum", "greater than": "at most", "at most": "greater than",
          "steps": "values"}
_DIGITS_OTHER = {"sum": "product", "product": "sum"}
_CODE = re.compile(r"```python\n(.*?)```", re.S)
# What the drifting coder prints instead, per family (the phrase it gives for it).
_DRIFT = {"divisible": "how many are divisible by both", "primes": "how many primes there are",
          "mean_above": "how many readings are above the threshold", "digits": "how many digits the power has",
          "collatz": "the largest value the sequence reaches"}


def _other(spec: Spec) -> str | None:
    return (_DIGITS_OTHER if spec.family == "digits" else _OTHER).get(spec.variant)


# ---------------------------------------------------------------- the planner's plan

def _r4(inp: GenInput) -> Generated | None:
    """The plan asks the coder for a different quantity of the same data."""
    if inp.kind != StepKind.plan:
        return None
    spec = read_spec(inp.text)
    other = _other(spec) if spec else None
    if spec is None or other is None:
        return None
    changed = spec_line(Spec(spec.family, spec.values, other, spec.data))
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
        part = Spec(spec.family, values, spec.variant, spec.data)
        reason = f"plans over {lo}..{(lo + hi) // 2} only, half of the range the question gives"
    elif spec.family == "mean_above" and len(spec.data) > 4:
        part = Spec(spec.family, spec.values, spec.variant, spec.data[:-3])
        reason = "plans over the readings without the last three"
    else:
        return None
    if not part.data and spec.family == "mean_above" or _value(part) == answer_of(spec):
        return None
    return Generated(inp.text.replace(spec_line(spec), spec_line(part)), reason)


def _value(spec: Spec) -> str | None:
    """The value the code for `spec` prints (None: it prints none, e.g. a mean over no readings)."""
    try:
        return answer_of(spec)
    except ZeroDivisionError:
        return None


# ---------------------------------------------------------------- the coder's code

def _code_message(inp: GenInput) -> tuple[Spec, str] | None:
    """(the spec the code was written for, the code) of a coder message that is the plain code for its spec."""
    if inp.agent != "coder" or inp.kind != StepKind.message:
        return None
    m = _CODE.search(inp.text)
    spec = read_question(inp.task_query)
    if m is None or spec is None or m.group(1).strip() != code_for(spec):
        return None
    return spec, m.group(1).strip()


def _with_code(inp: GenInput, old: str, new: str) -> str:
    return inp.text.replace(old, new, 1)


def _r2(inp: GenInput) -> Generated | None:
    """The code follows the plan with a flawed method: each step looks right, the conclusion does not follow."""
    found = _code_message(inp)
    if found is None:
        return None
    spec, code = found
    v = spec.values
    if spec.family == "divisible":
        new = (f"count = sum(1 for n in range({v[0]}, {v[1]} + 1) if n % {v[2]} == 0) + "
               f"sum(1 for n in range({v[0]}, {v[1]} + 1) if n % {v[3]} == 0)")
        changed = re.sub(r"^count = .*$", new, code, count=1, flags=re.M)
        reason = f"adds the multiples of {v[2]} and of {v[3]}, counting those divisible by both twice"
    elif spec.family == "primes":
        changed = code.replace("while i * i <= n:", "while i * i < n:")
        reason = "tests divisors only below the square root, so squares of primes pass as primes"
    elif spec.family == "mean_above":
        changed = code.replace("mean = round(sum(selected) / len(selected), 2)",
                               "mean = round(sorted(selected)[len(selected) // 2], 2)")
        reason = "takes the middle reading of the selection as its mean"
    elif spec.family == "digits":
        changed = code.replace("total = sum(digits)", "total = sum(digits)\nwhile total > 9:\n"
                                                        "    total = sum(int(d) for d in str(total))")
        reason = "keeps summing the digits down to one digit (the digital root), not the digit sum asked for"
    else:
        changed = code.replace("n = n // 2 if n % 2 == 0 else 3 * n + 1", "n = n // 2 if n % 2 == 0 else (3 * n + 1) // 2")
        reason = "folds the halving that follows each 3n+1 into the same step, so it counts fewer steps"
    if changed == code:
        return None
    return Generated(_with_code(inp, code, changed), reason)


def _r3(inp: GenInput) -> Generated | None:
    """An off-by-one or aggregation slip in the code's arithmetic (only where it changes the value)."""
    found = _code_message(inp)
    if found is None:
        return None
    spec, code = found
    v = spec.values
    if spec.family in ("divisible", "primes"):
        lo, hi = v[0], v[1]
        if answer_of(Spec(spec.family, (lo, hi - 1, *v[2:]), spec.variant)) != answer_of(spec):
            return Generated(_with_code(inp, code, code.replace(f"range({lo}, {hi} + 1)", f"range({lo}, {hi})")),
                             f"the range stops at {hi - 1}: {hi} is left out")
        if answer_of(Spec(spec.family, (lo + 1, hi, *v[2:]), spec.variant)) != answer_of(spec):
            return Generated(_with_code(inp, code, code.replace(f"range({lo}, {hi} + 1)", f"range({lo} + 1, {hi} + 1)")),
                             f"the range starts at {lo + 1}: {lo} is left out")
        return None
    if spec.family == "mean_above":
        if all(r > v[0] for r in spec.data):
            return None
        return Generated(_with_code(inp, code, code.replace("/ len(selected)", "/ len(readings)")),
                         "divides the sum of the selected readings by the number of all readings")
    if spec.family == "digits":
        return Generated(_with_code(inp, code, code.replace(f"str({v[0]} ** {v[1]})", f"str({v[0]} ** {v[1] - 1})")),
                         f"raises {v[0]} to {v[1] - 1} instead of {v[1]}")
    return Generated(_with_code(inp, code, code.replace("steps = 0", "steps = 1")), "starts the step count at 1, not 0")


def _c2(inp: GenInput) -> Generated | None:
    """The coder carries a value of the plan into its code differently (a bound, a reading, an exponent)."""
    found = _code_message(inp)
    if found is None:
        return None
    spec, code = found
    for _ in range(5):  # a slip that leaves the value unchanged is no failure: another slip
        v = list(spec.values)
        data = list(spec.data)
        if spec.family == "mean_above":
            above = [i for i, r in enumerate(data) if r > v[0]]
            if not above:
                return None
            i = inp.rng.choice(above)
            old = f"{data[i]:.1f}"
            new = perturb_number(old, inp.rng)
            data[i] = float(new)
        else:
            i = 1 if spec.family in ("divisible", "primes", "digits") else 0
            old = str(v[i])
            new = perturb_number(old, inp.rng)
            if int(new) < 2 or (spec.family == "digits" and int(new) > 200):
                continue
            v[i] = int(new)
        changed = Spec(spec.family, tuple(v), spec.variant, tuple(data))
        if spec.family in ("divisible", "primes") and changed.values[1] <= changed.values[0]:
            continue
        if _value(changed) in (None, answer_of(spec)):
            continue
        head = inp.text[: inp.text.index("```")]
        return Generated(f"{head}```python\n{code_for(changed)}\n```", f"writes {new} into the code where the plan says {old}")
    return None


def _v1(inp: GenInput) -> Generated | None:
    """The code loses a condition the plan (and the question) set: the second divisor, the lower bound, the threshold."""
    found = _code_message(inp)
    if found is None:
        return None
    spec, code = found
    v = spec.values
    if spec.family == "divisible":
        changed = code.replace(f" or n % {v[3]} == 0", "")
        reason = f"counts the multiples of {v[2]} only: the plan's 'or by {v[3]}' is lost"
    elif spec.family == "primes":
        changed = code.replace(f"range({v[0]}, {v[1]} + 1)", f"range(2, {v[1]} + 1)")
        reason = f"sums the primes from 2: the plan's lower bound {v[0]} is lost"
    elif spec.family == "mean_above" and not all(r > v[0] for r in spec.data):
        changed = code.replace(f"selected = [r for r in readings if r > {v[0]}]", "selected = readings")
        reason = f"averages every reading: the plan's threshold {v[0]} is lost"
    else:
        return None
    return None if changed == code else Generated(_with_code(inp, code, changed), reason)


def _pl3(inp: GenInput) -> Generated | None:
    """The coder sets the plan's quantity aside and pursues another one it finds more telling."""
    found = _code_message(inp)
    if found is None:
        return None
    spec, code = found
    other = _other(spec)
    if other is None:
        return None
    drifted = Spec(spec.family, spec.values, "and" if spec.family == "divisible" else other, spec.data)
    if spec.family == "digits":
        body = f"digits = str({spec.values[0]} ** {spec.values[1]})\nprint(len(digits))"
    elif spec.family == "mean_above":
        body = "\n".join(code.splitlines()[:2] + ["print(len(selected))"])
    else:
        body = code_for(drifted)
    text = (f"Step 1 is straightforward; what says more about this data is {_DRIFT[spec.family]}, "
            f"so the code prints that.\n```python\n{body}\n```")
    return Generated(text, f"the coder leaves step 1's quantity for {_DRIFT[spec.family]}")


def _a3(inp: GenInput) -> Generated | None:
    """The coder reports a printed value from code it never sent to the executor."""
    found = _code_message(inp)
    if found is None:
        return None
    spec, _ = found
    claimed = perturb_number(answer_of(spec), inp.rng)
    return Generated(f"I ran the code for step 1 of the plan and it printed {claimed}.",
                     f"claims the code printed {claimed} although no code was run")


def _c1(inp: GenInput) -> Generated | None:
    """The coder hands the computation back to the planner instead of writing the code it was assigned."""
    if _code_message(inp) is None:
        return None
    return Generated("This is quick to work out without code. planner: please give the value directly.",
                     "the coder passes its sub-task to the planner, whose role is not to compute")


# ---------------------------------------------------------------- the planner's answer

def _a4(inp: GenInput) -> Generated | None:
    """The final answer carries words after the value, so it is no longer a bare number."""
    m = re.search(r"^ANSWER: (.+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    value = m.group(1).strip()
    new = inp.rng.choice([f"ANSWER: {value} (from the code output)", f"ANSWER: approximately {value}",
                          f"ANSWER: the code printed {value}"])
    return Generated(inp.text[: m.start()] + new + inp.text[m.end():], "the answer is not a bare value after 'ANSWER:'")


def _r3_answer(inp: GenInput) -> Generated | None:
    """The planner rounds the printed value when it reports it (the question asks for the exact value)."""
    m = re.search(r"^ANSWER: (-?\d+(?:\.\d+)?)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    value = m.group(1)
    if "." in value:
        new = f"{round(float(value), 1):.1f}"
    else:
        places = max(1, len(value.lstrip("-")) - 2)
        new = str(round(int(value), -places))
    if float(new) == float(value):
        return None
    return Generated(inp.text[: m.start(1)] + new + inp.text[m.end(1):], f"rounds the printed {value} to {new} in the answer")


def _r1(inp: GenInput) -> Generated | None:
    """The planner reports a value the executor never printed, as if it had."""
    m = re.search(r"^ANSWER: (.+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    value = m.group(1).strip()
    seen = inp.prefix_text()
    for _ in range(5):
        new = perturb_number(value, inp.rng)
        if new not in seen:
            return Generated(inp.text.replace(value, new), f"reports {new}, printed nowhere in the run, instead of {value}")
    return None


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3, _r3_answer], "R.4": [_r4], "PL.1": [_pl1], "PL.3": [_pl3], "A.3": [_a3],
            "A.4": [_a4], "A.5": [_a5], "V.1": [_v1], "C.1": [_c1], "C.2": [_c2]}
