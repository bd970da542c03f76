"""The word problems behind `math_society`: a task's fact sheet, its question families, its reference answers.

A task is a grade-school word problem (the GSM8K / MATH-with-tools family)
whose figures are partly in the question and partly on a fact sheet that
must be looked up: the school shop's prices and packs and the fair's pay.
Each task draws its own sheet (five items with a price, a pack size and a
pack price; four jobs with an hourly wage and a daily bonus; every figure
of a kind different), so no figure can be known without the look-up. The
families: `change` (the change from a note after buying two items),
`packs` (what the packs of an item cost for the number needed) and `wages`
(what a weekend's pay and bonuses leave after the bus fare). All figures
and answers are whole euros.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ..docs_team.calculator import calculate

FAMILIES = ("change", "packs", "wages")
ITEMS = ("notebook", "pen", "ruler", "eraser", "folder", "marker", "glue stick", "stapler")
JOBS = ("ticket seller", "lifeguard", "cook", "cashier", "gardener")
PEOPLE = ("Maya", "Tomas", "Asha", "Kofi", "Mei", "Jonas", "Nadia", "Pavel", "Sofia", "Omar")
# What the question asks, as the specified task's `Find:` line says it, and the formula it needs: `{g1}`.. are the
# given figures' names in the `Given:` line's order, `{f1}`.. the looked-up facts in the `Look up:` line's order.
FINDS = {
    "the change": "{g3} - ({g1} * {f1} + {g2} * {f2})",
    "the total cost": "{g1} * {f1} + {g2} * {f2}",
    "the cost of the packs": "{g1} / {f1} * {f2}",
    "the number of packs": "{g1} / {f1}",
    "the money left": "({g1} + {g2}) * {f1} + 2 * {f2} - {g3}",
    "the money earned": "({g1} + {g2}) * {f1} + 2 * {f2}",
}
# Each family's question, and the quantity a misreading of it asks instead (`mistakes` R.4).
FIND_OF = {"change": "the change", "packs": "the cost of the packs", "wages": "the money left"}
MISREAD = {"the change": "the total cost", "the cost of the packs": "the number of packs", "the money left": "the money earned"}
_FACT_LINE = re.compile(r"^(.+?): (\d+)\b", re.M)


def fact_text(name: str, value: int) -> str:
    """What `lookup` returns for a fact: its name and value, with the unit."""
    unit = f"{name.split(' pack size')[0]}s" if name.endswith("pack size") else "euros"
    return f"{name}: {value} {unit}"


def read_fact(text: str) -> tuple[str, int] | None:
    """(name, value) of a `lookup` result, or None."""
    m = _FACT_LINE.search(text)
    return (m.group(1), int(m.group(2))) if m else None


def _sheet(rng: random.Random) -> dict[str, int]:
    items, jobs = rng.sample(ITEMS, 5), rng.sample(JOBS, 4)
    prices = rng.sample(range(2, 13), 5)
    sizes = rng.sample(range(3, 11), 5)
    pack_prices = rng.sample(range(6, 40), 5)
    wages = rng.sample(range(9, 26), 4)
    bonuses = rng.sample(range(5, 31), 4)
    sheet: dict[str, int] = {}
    for i, item in enumerate(items):
        sheet.update({f"{item} price": prices[i], f"{item} pack size": sizes[i], f"{item} pack price": pack_prices[i]})
    for i, job in enumerate(jobs):
        sheet.update({f"{job} hourly wage": wages[i], f"{job} daily bonus": bonuses[i]})
    return sheet


def _sheet_items(sheet: dict[str, int]) -> list[str]:
    return [k[: -len(" price")] for k in sheet if k.endswith(" price") and not k.endswith("pack price")]


def _sheet_jobs(sheet: dict[str, int]) -> list[str]:
    return [k[: -len(" hourly wage")] for k in sheet if k.endswith(" hourly wage")]


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the fact sheet and the question's figures) of one task of `family`."""
    sheet = _sheet(rng)
    who = rng.choice(PEOPLE)
    if family == "change":
        first, second = rng.sample(_sheet_items(sheet), 2)
        a, b = rng.randint(2, 6), rng.randint(2, 6)
        cost = a * sheet[f"{first} price"] + b * sheet[f"{second} price"]
        note = next(n for n in (20, 50, 100, 200) if n > cost)
        given = [(f"{first}s", a), (f"{second}s", b), ("note", note)]
        facts = [f"{first} price", f"{second} price"]
        question = (f"{who} buys {a} {first}s and {b} {second}s at the school shop and pays with a {note}-euro note. "
                    f"How many euros of change does {who} get?")
    elif family == "packs":
        item = rng.choice(_sheet_items(sheet))
        n = sheet[f"{item} pack size"] * rng.randint(2, 7)
        given = [(f"{item}s", n)]
        facts = [f"{item} pack size", f"{item} pack price"]
        question = (f"{who} needs {n} {item}s for the art class, and the school shop sells them only in packs. "
                    f"How many euros do the packs cost?")
    else:
        job = rng.choice(_sheet_jobs(sheet))
        h1, h2, bus = rng.randint(2, 8), rng.randint(2, 8), rng.randint(3, 12)
        given = [("saturday hours", h1), ("sunday hours", h2), ("bus fare", bus)]
        facts = [f"{job} hourly wage", f"{job} daily bonus"]
        question = (f"{who} works {h1} hours on Saturday and {h2} hours on Sunday at the fair as a {job}, gets the "
                    f"{job}'s daily bonus on each of the two days and pays {bus} euros for the bus. How many euros "
                    f"does {who} have left?")
    question += " The figures not given here are on the fact sheet. End with a line 'ANSWER: <number>'."
    return question, {"family": family, "sheet": sheet, "given": given, "facts": facts, "find": FIND_OF[family]}


def formula_of(find: str, given: list[str], facts: list[str]) -> str | None:
    """The formula `find` needs over the given figures' and the facts' names, or None for an unknown quantity."""
    template = FINDS.get(find)
    if template is None:
        return None
    names = {f"g{i + 1}": g for i, g in enumerate(given)} | {f"f{i + 1}": f for i, f in enumerate(facts)}
    try:
        return template.format(**names)
    except KeyError:
        return None


def evaluate_formula(formula: str, values: dict[str, int]) -> str:
    """The formula with each named quantity replaced by its value (longest names first: 'pen pack price' before
    'pen price')."""
    out = formula
    for name in sorted(values, key=len, reverse=True):
        out = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", str(values[name]), out)
    return out


def answer_of(world: dict[str, Any]) -> int:
    """The reference answer: the family's formula on the question's and the sheet's figures."""
    given = dict(world["given"])
    formula = formula_of(world["find"], list(given), world["facts"])
    assert formula is not None
    values = {**given, **{f: world["sheet"][f] for f in world["facts"]}}
    return int(calculate(evaluate_formula(formula, values)))
