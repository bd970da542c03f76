"""The tasks of `ag2_experts`: small data and arithmetic questions that need code, and the code that answers them.

Each family has a question (the task), a *spec* (the one line of the plan that
tells the coder what to compute, in a fixed phrasing the simulated coder reads
back), and the Python a competent coder writes from a spec. The spec grammar
also reads the variants an ineffective plan uses (`and` for `or`, `count` for
`sum`, ...), so a wrong plan is carried out faithfully.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

FAMILIES = ("divisible", "primes", "mean_above", "digits", "collatz")


@dataclass(frozen=True)
class Spec:
    family: str
    values: tuple[float | int, ...] = ()
    variant: str = ""
    data: tuple[float, ...] = ()


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def make_task(rng: random.Random, family: str) -> tuple[str, Spec]:
    """(question, spec) of one task of `family`."""
    if family == "divisible":
        a, b = rng.randint(10, 90), rng.randint(300, 990)
        p, q = rng.sample([3, 4, 6, 7, 9, 11, 13], 2)
        return (f"How many integers from {a} to {b} (inclusive) are divisible by {p} or by {q}?",
                Spec(family, (a, b, p, q), "or"))
    if family == "primes":
        a, b = rng.randint(10, 200), rng.randint(400, 900)
        return f"What is the sum of the prime numbers between {a} and {b} (inclusive)?", Spec(family, (a, b), "sum")
    if family == "mean_above":
        data = tuple(round(rng.uniform(5, 95), 1) for _ in range(rng.randint(9, 13)))
        x = rng.choice([30, 40, 50, 60])
        while not any(r > x for r in data):  # a mean of no readings has no answer; drawn again (rare: no task before this had one)
            data = tuple(round(rng.uniform(5, 95), 1) for _ in range(rng.randint(9, 13)))
        shown = ", ".join(f"{v:.1f}" for v in data)
        return (f"The sensor readings are: [{shown}]. What is the mean of the readings greater than {x}, "
                "rounded to 2 decimals?", Spec(family, (x,), "greater than", data))
    if family == "digits":
        b, e = rng.randint(3, 19), rng.randint(25, 90)
        return f"What is the sum of the digits of {b}**{e}?", Spec(family, (b, e), "sum")
    n = rng.randint(27, 9999)
    return f"How many steps does the Collatz sequence starting at {n} take to reach 1?", Spec(family, (n,), "steps")


def spec_line(spec: Spec) -> str:
    """The plan's instruction to the coder for `spec` (what `read_spec` reads back)."""
    v = spec.values
    if spec.family == "divisible":
        return f"count the integers from {v[0]} to {v[1]} divisible by {v[2]} {spec.variant} by {v[3]}"
    if spec.family == "primes":
        return f"{spec.variant} of the primes from {v[0]} to {v[1]}"
    if spec.family == "mean_above":
        shown = ", ".join(f"{d:.1f}" for d in spec.data)
        return f"mean of the readings {spec.variant} {v[0]} in [{shown}], rounded to 2 decimals"
    if spec.family == "digits":
        return f"{spec.variant} of the digits of {v[0]}**{v[1]}"
    return f"number of Collatz {spec.variant} from {v[0]} to 1"


_NUM = r"(-?\d+(?:\.\d+)?)"
_READERS: list[tuple[str, re.Pattern[str]]] = [
    ("divisible", re.compile(rf"integers from {_NUM} to {_NUM} divisible by {_NUM} (or|and) by {_NUM}")),
    ("primes", re.compile(rf"(sum|count) of the primes from {_NUM} to {_NUM}")),
    ("mean_above", re.compile(rf"mean of the readings (greater than|at most) {_NUM} in \[([^\]]*)\]")),
    ("digits", re.compile(rf"(sum|product) of the digits of {_NUM}\*\*{_NUM}")),
    ("collatz", re.compile(rf"number of Collatz (steps|values) from {_NUM} to 1")),
]


def _n(text: str) -> float | int:
    return float(text) if "." in text else int(text)


def read_spec(text: str) -> Spec | None:
    """The spec stated in `text` (a plan line), or None."""
    for family, pattern in _READERS:
        m = pattern.search(text)
        if m is None:
            continue
        g = m.groups()
        if family == "divisible":
            return Spec(family, (_n(g[0]), _n(g[1]), _n(g[2]), _n(g[4])), g[3])
        if family in ("primes", "digits"):
            return Spec(family, (_n(g[1]), _n(g[2])), g[0])
        if family == "mean_above":
            try:
                data = tuple(float(x) for x in g[2].split(",") if x.strip())
            except ValueError:
                return None
            return Spec(family, (_n(g[1]),), g[0], data)
        return Spec(family, (_n(g[1]),), g[0])
    return None


def read_question(question: str) -> Spec | None:
    """The spec of a task question (a coder given no usable plan reads the task itself)."""
    patterns = {
        "divisible": (r"integers from (\d+) to (\d+) \(inclusive\) are divisible by (\d+) or by (\d+)",
                      lambda g: Spec("divisible", tuple(int(x) for x in g), "or")),
        "primes": (r"sum of the prime numbers between (\d+) and (\d+)", lambda g: Spec("primes", tuple(int(x) for x in g), "sum")),
        "mean_above": (r"readings are: \[([^\]]*)\]\. What is the mean of the readings greater than (\d+)",
                       lambda g: Spec("mean_above", (int(g[1]),), "greater than", tuple(float(x) for x in g[0].split(",")))),
        "digits": (r"sum of the digits of (\d+)\*\*(\d+)", lambda g: Spec("digits", tuple(int(x) for x in g), "sum")),
        "collatz": (r"Collatz sequence starting at (\d+)", lambda g: Spec("collatz", (int(g[0]),), "steps")),
    }
    for pattern, build in patterns.values():
        m = re.search(pattern, question)
        if m:
            return build(m.groups())
    return None


def code_for(spec: Spec, slip: bool = False) -> str:
    """The Python that prints the spec's value. `slip`: the same code with a misspelt name (it crashes)."""
    v = spec.values
    if spec.family == "divisible":
        test = f"n % {v[2]} == 0 {spec.variant} n % {v[3]} == 0"
        lines = [f"count = sum(1 for n in range({v[0]}, {v[1]} + 1) if {test})", "print(count)"]
    elif spec.family == "primes":
        agg = "sum(primes)" if spec.variant == "sum" else "len(primes)"
        lines = ["def is_prime(n):", "    if n < 2:", "        return False", "    i = 2", "    while i * i <= n:",
                 "        if n % i == 0:", "            return False", "        i += 1", "    return True", "",
                 f"primes = [n for n in range({v[0]}, {v[1]} + 1) if is_prime(n)]", f"total = {agg}", "print(total)"]
    elif spec.family == "mean_above":
        op = ">" if spec.variant == "greater than" else "<="
        shown = ", ".join(f"{d:.1f}" for d in spec.data)
        lines = [f"readings = [{shown}]", f"selected = [r for r in readings if r {op} {v[0]}]",
                 "mean = round(sum(selected) / len(selected), 2)", "print(mean)"]
    elif spec.family == "digits":
        if spec.variant == "sum":
            lines = [f"digits = [int(d) for d in str({v[0]} ** {v[1]})]", "total = sum(digits)", "print(total)"]
        else:
            lines = [f"digits = [int(d) for d in str({v[0]} ** {v[1]})]", "total = 1", "for d in digits:",
                     "    total *= d", "print(total)"]
    else:
        lines = [f"n = {v[0]}", "steps = 0", "largest = n", "while n != 1:", "    n = n // 2 if n % 2 == 0 else 3 * n + 1",
                 "    steps += 1", "    largest = max(largest, n)", f"print({'steps' if spec.variant == 'steps' else 'largest'})"]
    if slip:
        last = lines[-1]
        name = last[last.index("(") + 1: last.rindex(")")]
        lines[-1] = last.replace(name, name[:-1] if len(name) > 3 else name + "s")
    return "\n".join(lines)


def _integers(spec: Spec) -> tuple[int, ...]:
    """The values of a family that counts over a range of integers (divisible, primes)."""
    ints = tuple(x for x in spec.values if isinstance(x, int))
    if len(ints) != len(spec.values):
        # As `range` would: a range of integers has integer bounds.
        raise TypeError(f"{spec.family}: integer values expected, got {spec.values}")
    return ints


def answer_of(spec: Spec) -> str:
    """The true value of a task's spec, computed here (the reference answer)."""
    v = spec.values
    if spec.family == "divisible":
        lo, hi, p, q = _integers(spec)
        return str(sum(1 for n in range(lo, hi + 1) if n % p == 0 or n % q == 0))
    if spec.family == "primes":
        lo, hi = _integers(spec)
        return str(sum(n for n in range(lo, hi + 1) if _is_prime(n)))
    if spec.family == "mean_above":
        selected = [r for r in spec.data if r > v[0]]
        return str(round(sum(selected) / len(selected), 2))
    if spec.family == "digits":
        return str(sum(int(d) for d in str(v[0] ** v[1])))
    n, steps = v[0], 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return str(steps)
