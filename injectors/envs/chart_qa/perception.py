"""Perception rules (P.1-P.3) shared by the chart environments: a reading of the chart gone wrong.

Each environment finds its own readings step (who reads, where the chart id
is) and hands the rules a `Readings`; the rules rewrite it the way a look at
an image goes wrong: a value read from another line or a far bar (P.1), from
the neighbouring x position (P.2), a digit misread (P.3). Misreadings stay
inside the y axis, so a range check lets them through.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from faultlens.injectors.generators import Generated, GenInput, Rule
from faultlens.middleware.model.trace import Task
from .world import READINGS


class Readings(NamedTuple):
    """One readings step: the series read, its (label, value) pairs, the chart's task, the y axis' top."""

    name: str
    pairs: list[tuple[str, int]]
    task: Task
    ymax: int


def render(inp: GenInput, name: str, pairs: list[tuple[str, int]]) -> str:
    """The readings step's text with its readings replaced by `pairs`."""
    m = READINGS.search(inp.text)
    assert m is not None  # only called on a readings step
    body = ", ".join(f"{label} = {value}" for label, value in pairs)
    return inp.text[: m.start()] + f"Readings ({name}): {body}" + inp.text[m.end():]


def misread_digit(inp: GenInput, got: Readings) -> Generated | None:
    """P.3: one value read with its digits swapped or a little off."""
    name, pairs, _, ymax = got
    k = inp.rng.randrange(len(pairs))
    label, value = pairs[k]
    digits = str(value)
    options = [int(digits[::-1])] if len(digits) == 2 and digits[0] != digits[1] else []
    options += [value + d for d in (-10, -5, -3, -2, 2, 3, 5, 10)]
    options = sorted(o for o in set(options) if 0 <= o <= ymax and o != value)
    if not options:
        return None
    new = inp.rng.choice(options)
    pairs[k] = (label, new)
    return Generated(render(inp, name, pairs), f"reads {label} as {new} where the chart shows {value}")


def misread_element(inp: GenInput, got: Readings) -> Generated | None:
    """P.1: the other line read as this one, or else one value taken from a bar two or more away."""
    name, pairs, task, _ = got
    series = {n: dict(zip(task.metadata["labels"], vals)) for n, vals in task.metadata["series"]}
    other = next((n for n in series if n != name), None)
    if other is not None:
        moved = [(label, series[other].get(label, value)) for label, value in pairs]
        if moved != pairs:
            return Generated(render(inp, name, moved), f"reads the {other} line and reports it as {name}")
    data, labels = series.get(name) or {}, task.metadata["labels"]
    k = inp.rng.randrange(len(pairs))
    label, value = pairs[k]
    if label not in labels:
        return None
    far = [x for x in labels if abs(labels.index(x) - labels.index(label)) >= 2 and data.get(x) != value]
    if not far:
        return None
    source = inp.rng.choice(far)
    pairs[k] = (label, data[source])
    return Generated(render(inp, name, pairs), f"takes the bar of {source} for {label} and reads {data[source]}")


def misread_position(inp: GenInput, got: Readings) -> Generated | None:
    """P.2: one value read from the x position beside it."""
    name, pairs, task, _ = got
    labels = task.metadata["labels"]
    data = dict(zip(labels, dict((n, v) for n, v in task.metadata["series"]).get(name, [])))
    k = inp.rng.randrange(len(pairs))
    label, value = pairs[k]
    if label not in data:
        return None
    i = labels.index(label)
    side = [j for j in (i - 1, i + 1) if 0 <= j < len(labels) and data[labels[j]] != value]
    if not side:
        return None
    j = inp.rng.choice(side)
    pairs[k] = (label, data[labels[j]])
    where = "left" if j < i else "right"
    return Generated(render(inp, name, pairs), f"reads the value one position to the {where} of {label} ({labels[j]}'s)")


def rules(readings: Callable[[GenInput], Readings | None]) -> dict[str, list[Rule]]:
    """P.1-P.3 for an environment whose readings steps `readings` finds."""

    def rule(misread: Callable[[GenInput, Readings], Generated | None]) -> Rule:
        def apply(inp: GenInput) -> Generated | None:
            got = readings(inp)
            return None if got is None else misread(inp, got)

        apply.__name__ = misread.__name__  # the rule's name in test ids and messages
        return apply

    return {"P.1": [rule(misread_element)], "P.2": [rule(misread_position)], "P.3": [rule(misread_digit)]}
