"""The annual reports behind `docs_team`: the corpus of a task, its question families and the reference answers.

A task is a question over a small corpus of company annual reports (document
QA across two documents, the multi-hop kind HotpotQA stands for). Each task
has five companies with a 2024 and a 2025 report each; a report states the
year-end headcount, the revenue in € millions and the number of offices.
The families: `headcount_gap` (how many more employees A had than B at the
end of 2025), `revenue_total` (A's and B's combined 2025 revenue) and
`revenue_growth` (how much A's revenue grew from 2024 to 2025). The other
year's report of a company is always in the corpus, so reading the wrong
document is possible and matters. All figures are whole numbers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

FAMILIES = ("headcount_gap", "revenue_total", "revenue_growth")
COMPANIES = ("Halvorsen", "Brightwater", "Kestrel", "Oakridge", "Veltro", "Marisol", "Quillon", "Tarrant", "Ebberly",
             "Novacrest")
YEARS = (2024, 2025)
METRICS = ("headcount", "revenue", "offices")
# A report's text after its title (short: Haystack's `Document` repr, which the spans record, keeps 100 characters).
_BODY = "{headcount} employees at year end, revenue €{revenue} million, {offices} offices."
_READERS = {"headcount": re.compile(r"(\d+) employees at year end"), "revenue": re.compile(r"revenue €(\d+) million"),
            "offices": re.compile(r"(\d+) offices")}


def doc_id(company: str, year: int) -> str:
    return f"{company[:3].upper()}-{year}"


def title(company: str, year: int) -> str:
    return f"{company} annual report {year}"


def report_text(company: str, year: int, figures: dict[str, int]) -> str:
    """A report's text: its title, then its figures."""
    return f"{title(company, year)}: {_BODY.format(**figures)}"


def read_figure(text: str, metric: str) -> int | None:
    """The value of `metric` a report's text states, or None."""
    m = _READERS[metric].search(text)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Item:
    """One figure a question needs: a metric of a company in one year's report."""

    company: str
    year: int
    metric: str

    def line(self) -> str:
        return f"- {self.company}, {self.year}, {self.metric}"


# What each family computes from its items (a, b): the operation's name in a plan, and as an expression.
OPERATIONS = {"minus": ("{a} minus {b}", "{a} - {b}"), "plus": ("{a} plus {b}", "{a} + {b}")}
FAMILY_OPERATION = {"headcount_gap": "minus", "revenue_total": "plus", "revenue_growth": "minus"}


def items_of(world: dict[str, Any]) -> list[Item]:
    """The two figures the task's question needs, in the order its operation takes them."""
    q = world["question"]
    a, b = q["a"], q["b"]
    if q["family"] == "headcount_gap":
        return [Item(a, 2025, "headcount"), Item(b, 2025, "headcount")]
    if q["family"] == "revenue_total":
        return [Item(a, 2025, "revenue"), Item(b, 2025, "revenue")]
    return [Item(a, 2025, "revenue"), Item(a, 2024, "revenue")]


def question_text(q: dict[str, Any]) -> str:
    if q["family"] == "headcount_gap":
        return (f"According to the 2025 annual reports, how many more employees did {q['a']} have than {q['b']} at the "
                "end of 2025? End with a line 'ANSWER: <number>'.")
    if q["family"] == "revenue_total":
        return (f"According to the 2025 annual reports, what was the combined revenue of {q['a']} and {q['b']} in 2025, "
                "in € millions? End with a line 'ANSWER: <number>'.")
    return (f"By how many € millions did {q['a']}'s revenue grow from 2024 to 2025, according to its annual reports? "
            "End with a line 'ANSWER: <number>'.")


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the corpus and question) of one task of `family`."""
    companies = rng.sample(COMPANIES, 5)
    figures: dict[str, dict[int, dict[str, int]]] = {}
    for c in companies:
        head, revenue = rng.randint(120, 900), rng.randint(15, 140)
        figures[c] = {2024: {"headcount": head, "revenue": revenue, "offices": rng.randint(2, 12)}}
        figures[c][2025] = {"headcount": head + rng.choice((-1, 1)) * rng.randint(8, 60),
                            "revenue": revenue + rng.randint(3, 25), "offices": figures[c][2024]["offices"]}
    a, b = companies[:2]
    if family == "headcount_gap" and figures[a][2025]["headcount"] <= figures[b][2025]["headcount"]:
        a, b = b, a  # the question asks how many more A had: A is the larger
    docs = [{"id": doc_id(c, y), "title": title(c, y), "content": report_text(c, y, figures[c][y])}
            for c in companies for y in YEARS]
    rng.shuffle(docs)
    question = {"family": family, "a": a, "b": b}
    return question_text(question), {"question": question, "docs": docs}


def figure_of(world: dict[str, Any], item: Item) -> int:
    doc = next(d for d in world["docs"] if d["id"] == doc_id(item.company, item.year))
    value = read_figure(doc["content"], item.metric)
    assert value is not None
    return value


def answer_of(world: dict[str, Any]) -> int:
    """The reference answer: the family's operation on the two figures."""
    x, y = (figure_of(world, i) for i in items_of(world))
    return x - y if FAMILY_OPERATION[world["question"]["family"]] == "minus" else x + y
