"""The company ledger behind `ledger_chat`: a task's expense ledger, its question families, the tool texts and answers.

A task is a data-analysis question over one company's expense ledger with a
computed answer (the family InfiAgent-DABench stands for: a table, a
question, an aggregate or ratio of it, rounded as asked). Each task has 60
transactions (id, quarter, department, category, vendor, amount in euros and
cents) drawn anew, and one question of four families: `share` (the
percentage of a quarter's spending that went to a department), `growth` (the
percentage change of a department's spending between two quarters), `gap`
(how much more one department spent on a category than another) and
`per_txn` (a department's average amount per transaction in a quarter: its
sum over its count). Each question asks for 0, 1 or 2 decimals. A figure is
`query_ledger`'s aggregate over filters; the answer is the family's formula
on the figures, worked out by `calculate` (2 decimals) and rounded half up
to the decimals asked; a world whose exact answer rounds otherwise is drawn
again, so the team's way and the exact way agree.
"""

from __future__ import annotations

import random
import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ..docs_team.calculator import calculate

FAMILIES = ("share", "growth", "gap", "per_txn")
DEPARTMENTS = ("Sales", "Marketing", "Engineering", "Operations", "Support")
QUARTERS = ("Q1", "Q2", "Q3", "Q4")
CATEGORIES = ("travel", "software", "hardware", "consulting", "advertising", "training")
VENDORS = ("Northwind", "Contoso", "Fabrikam", "Tailspin", "Litware", "Adatum", "Proseware", "Wingtip")
METRICS = ("sum", "count", "mean", "max", "min")
ALL = "all"
ROWS = 60
# Per family: the figures' names and the formula over them.
FORMULAS = {"share": "A / B * 100", "growth": "(B - A) / A * 100", "gap": "A - B", "per_txn": "A / B"}


def money(cents: int) -> str:
    return f"{cents / 100:.2f}"


def rounded(value: str, decimals: int) -> str:
    """`value` rounded half up to `decimals` (0: a whole number), as text."""
    quantum = Decimal(1) if decimals == 0 else Decimal(10) ** -decimals
    return str(Decimal(value).quantize(quantum, rounding=ROUND_HALF_UP))


def decimals_of(value: str) -> int:
    return len(value.split(".", 1)[1]) if "." in value else 0


def rounding_text(decimals: int) -> str:
    return {0: "Round to the nearest whole number.", 1: "Round to 1 decimal place."}.get(decimals, "Round to 2 decimal places.")


# -- the figures ---------------------------------------------------------------------------------------
def figure(metric: str, department: str = ALL, quarter: str = ALL, category: str = ALL) -> dict[str, str]:
    return {"metric": metric, "department": department, "quarter": quarter, "category": category}


def figure_label(f: dict[str, str]) -> str:
    """How a plan and a report name a figure: `sum of amount, department Sales, quarter Q2, category all`."""
    return f"{f['metric']} of amount, department {f['department']}, quarter {f['quarter']}, category {f['category']}"


_LABEL = re.compile(r"(sum|count|mean|max|min) of amount, department (\w+), quarter (\w+), category (\w+)")


def read_label(text: str) -> dict[str, str] | None:
    m = _LABEL.search(text)
    return figure(*m.groups()) if m else None


def _rows(ledger: list[dict[str, Any]], f: dict[str, str]) -> list[dict[str, Any]]:
    return [r for r in ledger if all(f[k] == ALL or r[k] == f[k] for k in ("department", "quarter", "category"))]


def aggregate(ledger: list[dict[str, Any]], f: dict[str, str]) -> str:
    """The figure's value as `query_ledger` states it (money with 2 decimals, a count as a whole number)."""
    rows = _rows(ledger, f)
    cents = [r["cents"] for r in rows]
    if f["metric"] == "count":
        return str(len(rows))
    if not cents:
        return "0.00"
    if f["metric"] == "sum":
        return money(sum(cents))
    if f["metric"] == "mean":
        return str((Decimal(sum(cents)) / len(cents) / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    return money(max(cents) if f["metric"] == "max" else min(cents))


def query_text(ledger: list[dict[str, Any]], f: dict[str, str]) -> str:
    """What `query_ledger` returns: the aggregate and the rows it covers."""
    n = len(_rows(ledger, f))
    return f"{figure_label(f)}: {aggregate(ledger, f)} ({n} rows)"


def check_filters(department: str, quarter: str, category: str, metric: str) -> str | None:
    """The tool's refusal of a filter value the ledger does not have (None: all known)."""
    for name, value, known in (("metric", metric, METRICS), ("department", department, DEPARTMENTS),
                               ("quarter", quarter, QUARTERS), ("category", category, CATEGORIES)):
        if value != ALL and value not in known or (name == "metric" and value == ALL):
            return f"error: unknown {name} {value!r}; use one of {', '.join(known)}" + ("" if name == "metric" else " or all")
    return None


_RESULT = re.compile(r"^(.+?): (-?\d+(?:\.\d+)?) \((\d+) rows\)$")


def read_query(text: str) -> tuple[dict[str, str], str, int] | None:
    """(the figure, its value, its rows) a `query_ledger` output states, or None."""
    m = _RESULT.match(text.strip())
    f = read_label(m.group(1)) if m else None
    return (f, m.group(2), int(m.group(3))) if m and f else None


# -- the questions --------------------------------------------------------------------------------------
def figures_of(q: dict[str, Any]) -> list[dict[str, str]]:
    """The figures A and B a question's formula needs."""
    family = q["family"]
    if family == "share":
        return [figure("sum", q["department"], q["quarter"]), figure("sum", ALL, q["quarter"])]
    if family == "growth":
        return [figure("sum", q["department"], q["quarter"]), figure("sum", q["department"], q["quarter2"])]
    if family == "gap":
        return [figure("sum", q["department"], ALL, q["category"]), figure("sum", q["department2"], ALL, q["category"])]
    return [figure("sum", q["department"], q["quarter"]), figure("count", q["department"], q["quarter"])]


def named_filters(q: dict[str, Any]) -> list[str]:
    """The filter values the question names (what a report's figures must cover)."""
    return [q[k] for k in ("department", "department2", "quarter", "quarter2", "category") if k in q]


def question_text(q: dict[str, Any]) -> str:
    family, end = q["family"], rounding_text(q["decimals"]) + " End with a line 'ANSWER: <number>'."
    if family == "share":
        return f"What percentage of the company's {q['quarter']} spending went to the {q['department']} department? {end}"
    if family == "growth":
        return (f"By what percentage did the {q['department']} department's spending change from {q['quarter']} to "
                f"{q['quarter2']}? {end}")
    if family == "gap":
        return (f"Over the whole year, how many euros more did {q['department']} spend on {q['category']} than "
                f"{q['department2']}? {end}")
    return (f"What was the {q['department']} department's average amount per transaction in {q['quarter']}, in euros? "
            f"{end}")


def _ledger(rng: random.Random) -> list[dict[str, Any]]:
    ids = rng.sample(range(1000, 9999), ROWS)
    return [{"id": f"TX-{i}", "quarter": rng.choice(QUARTERS), "department": rng.choice(DEPARTMENTS),
             "category": rng.choice(CATEGORIES), "vendor": rng.choice(VENDORS), "cents": rng.randint(4_000, 900_000)}
            for i in ids]


def _question(rng: random.Random, family: str) -> dict[str, Any]:
    departments, quarters = rng.sample(DEPARTMENTS, 2), rng.sample(QUARTERS, 2)
    q: dict[str, Any] = {"family": family, "department": departments[0], "decimals": rng.choice((0, 1, 2))}
    if family in ("share", "growth", "per_txn"):
        q["quarter"] = quarters[0]
    if family == "growth":
        q["quarter2"] = quarters[1]
    if family == "gap":
        q.update({"department2": departments[1], "category": rng.choice(CATEGORIES)})
    return q


def evaluate_formula(formula: str, values: dict[str, str]) -> str:
    out = formula
    for name, value in values.items():
        out = re.sub(rf"\b{name}\b", value, out)
    return out


def _exact(q: dict[str, Any], ledger: list[dict[str, Any]]) -> Decimal | None:
    a, b = (Decimal(aggregate(ledger, f)) for f in figures_of(q))
    if q["family"] in ("share", "growth", "per_txn") and b == 0 or q["family"] == "growth" and a == 0:
        return None
    return {"share": lambda: a / b * 100, "growth": lambda: (b - a) / a * 100, "gap": lambda: a - b,
            "per_txn": lambda: a / b}[q["family"]]()


def answer_of(world: dict[str, Any]) -> str:
    """The reference: the family's formula on the figures, by the calculator, rounded as the question asks."""
    q, ledger = world["question"], world["ledger"]
    values = dict(zip(("A", "B"), (aggregate(ledger, f) for f in figures_of(q))))
    return rounded(calculate(evaluate_formula(FORMULAS[q["family"]], values)), q["decimals"])


def _fair(world: dict[str, Any]) -> bool:
    """Whether the world's question has an answer the calculator's way and the exact way agree on (and a figure that a
    wrong filter would change: both figures cover rows)."""
    q, ledger = world["question"], world["ledger"]
    exact = _exact(q, ledger)
    if exact is None or any(not _rows(ledger, f) for f in figures_of(q)):
        return False
    ref = answer_of(world)
    if ref.lstrip("-").strip("0.") == "":
        return False  # a zero answer: a sign or scale slip could not show
    return rounded(str(exact.quantize(Decimal("0.0000001"))), q["decimals"]) == ref


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the ledger and the question's fields) of one task of `family`."""
    while True:
        world: dict[str, Any] = {"question": _question(rng, family), "ledger": _ledger(rng)}
        if _fair(world):
            return question_text(world["question"]), world
