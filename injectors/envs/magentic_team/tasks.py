"""The tasks of `magentic_team`: questions over a simulated site of company annual reports.

A task needs the team's three skills: look figures up on the site (the web
surfer's `search` and `open_page` tools), write the Python that combines them
(the coder) and run it (the executor). The reference answer is computed here.

The site: one annual-report page per company and year
(`https://reports.example/<slug>/<year>`) stating the year's revenue (in $
millions) and headcount; `search` lists the report pages of the companies a
query names. Figures are a deterministic function of (company, year).

Texts the agents exchange use fixed phrasings that the simulated agents read
back (so a changed phrase is carried out faithfully):

- a look-up: ``look up Acme Corp's revenue in 2021 and 2023``;
- a figure: ``- Acme Corp, revenue, 2021: 412.7``;
- a computation: one of `derive_line`'s phrasings.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

COMPANIES = ("Acme Corp", "Brightline Foods", "Corvid Systems", "Dunmore Mining", "Elkhorn Textiles", "Fairwind Energy",
             "Glasswing Labs", "Harbor Freight Lines")
YEARS = tuple(range(2018, 2025))
FAMILIES = ("growth", "per_employee", "gap")
SITE = "https://reports.example"
METRICS = ("revenue", "headcount")


def slug(company: str) -> str:
    return company.lower().replace(" ", "-")


def figure(company: str, metric: str, year: int) -> float | int:
    """The site's figure for (company, metric, year)."""
    rng = random.Random(f"{company}|{year}")
    base = random.Random(company)
    revenue = round(base.uniform(120, 900) * (1 + base.uniform(-0.02, 0.09)) ** (year - 2018) * rng.uniform(0.93, 1.07), 1)
    if metric == "revenue":
        return revenue
    return int(revenue * 1000 / base.uniform(95, 310) * rng.uniform(0.95, 1.05))


def page(company: str, year: int) -> str:
    """The text of the annual-report page of `company` for `year`."""
    return (f"{company}: annual report {year}\n"
            f"In fiscal year {year}, {company} reported revenue of ${figure(company, 'revenue', year)} million "
            f"and a headcount of {figure(company, 'headcount', year)} employees at year end.\n"
            f"Other years: {', '.join(f'{SITE}/{slug(company)}/{y}' for y in YEARS if y != year)}")


def open_page(url: str) -> str:
    m = re.fullmatch(rf"{re.escape(SITE)}/([a-z-]+)/(\d{{4}})", url.strip())
    by_slug = {slug(c): c for c in COMPANIES}
    if m is None or m.group(1) not in by_slug or int(m.group(2)) not in YEARS:
        return f"404 Not Found: {url}"
    return page(by_slug[m.group(1)], int(m.group(2)))


def search(query: str) -> str:
    """The report pages of the companies whose full name the query contains."""
    hits = [c for c in COMPANIES if c.lower() in query.lower()]
    if not hits:
        return f"No results for {query!r}."
    lines = [f"- {c}: annual report {y} - {SITE}/{slug(c)}/{y}" for c in hits for y in YEARS]
    return f"Results for {query!r}:\n" + "\n".join(lines)


# ---------------------------------------------------------------- specs


@dataclass(frozen=True)
class Lookup:
    company: str
    metric: str
    years: tuple[int, ...]


@dataclass(frozen=True)
class Derive:
    family: str
    companies: tuple[str, ...]
    years: tuple[int, ...]
    variant: str = ""


def years_text(years: tuple[int, ...]) -> str:
    return " and ".join(str(y) for y in years) if len(years) <= 2 else ", ".join(map(str, years[:-1])) + f" and {years[-1]}"


def lookup_line(lookup: Lookup) -> str:
    return f"look up {lookup.company}'s {lookup.metric} in {years_text(lookup.years)}"


_NAMES = "|".join(re.escape(c) for c in COMPANIES)
_LOOKUP = re.compile(rf"look up ({_NAMES})'s (revenue|headcount) in ([\d ,and]+\d)")


def read_lookups(text: str) -> list[Lookup]:
    return [Lookup(m.group(1), m.group(2), tuple(int(y) for y in re.findall(r"\d{4}", m.group(3))))
            for m in _LOOKUP.finditer(text)]


def derive_line(d: Derive) -> str:
    a = d.companies[0]
    if d.family == "growth":
        what = "percentage change" if d.variant == "" else "absolute change (in $ millions)"
        return f"compute the {what} of {a}'s revenue from {d.years[0]} to {d.years[1]}, rounded to 1 decimal place"
    if d.family == "per_employee":
        what = "revenue per employee" if d.variant == "" else "employees per $ million of revenue"
        return f"compute {a}'s {what} in {d.years[0]}, in thousands of dollars, rounded to 1 decimal place"
    agg = "total" if d.variant == "" else "average"
    return (f"compute how much higher {a}'s {agg} revenue over {d.years[0]}-{d.years[-1]} was than "
            f"{d.companies[1]}'s, in $ millions, rounded to 1 decimal place")


_DERIVE = [
    ("growth", re.compile(rf"compute the (percentage change|absolute change \(in \$ millions\)) of ({_NAMES})'s revenue "
                          r"from (\d{4}) to (\d{4})")),
    ("per_employee", re.compile(rf"compute ({_NAMES})'s (revenue per employee|employees per \$ million of revenue) in (\d{{4}})")),
    ("gap", re.compile(rf"compute how much higher ({_NAMES})'s (total|average) revenue over (\d{{4}})-(\d{{4}}) was than "
                       rf"({_NAMES})'s")),
]


def read_derive(text: str) -> Derive | None:
    for family, pattern in _DERIVE:
        m = pattern.search(text)
        if m is None:
            continue
        g = m.groups()
        if family == "growth":
            return Derive(family, (g[1],), (int(g[2]), int(g[3])), "" if g[0] == "percentage change" else "absolute")
        if family == "per_employee":
            return Derive(family, (g[0],), (int(g[2]),), "" if g[1] == "revenue per employee" else "inverse")
        lo, hi = int(g[2]), int(g[3])
        return Derive(family, (g[0], g[4]), tuple(range(lo, hi + 1)), "" if g[1] == "total" else "average")
    return None


def lookups_for(d: Derive) -> list[Lookup]:
    """The figures a computation needs."""
    if d.family == "growth":
        return [Lookup(d.companies[0], "revenue", d.years)]
    if d.family == "per_employee":
        return [Lookup(d.companies[0], "revenue", d.years), Lookup(d.companies[0], "headcount", d.years)]
    return [Lookup(c, "revenue", d.years) for c in d.companies]


# ---------------------------------------------------------------- figures as text

Key = tuple[str, str, int]
_FIGURE = re.compile(rf"^- ({_NAMES}), (revenue|headcount), (\d{{4}}): (about )?(-?\d+(?:\.\d+)?)", re.M)


def figure_line(key: Key, value: float | int | str) -> str:
    return f"- {key[0]}, {key[1]}, {key[2]}: {value}"


def read_figures(text: str, guesses: bool = False) -> dict[Key, float]:
    """The figures stated in `text` (`guesses`: only the 'about' ones; else only the others)."""
    out: dict[Key, float] = {}
    for m in _FIGURE.finditer(text):
        if bool(m.group(4)) == guesses:
            out[(m.group(1), m.group(2), int(m.group(3)))] = float(m.group(5))
    return out


def _var(key: Key) -> str:
    return f"{slug(key[0]).split('-')[0]}_{key[1]}_{key[2]}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def code_for(d: Derive, values: dict[Key, float], slip: bool = False, formula: str = "") -> str:
    """The Python that prints the computation's value from `values` (missing figures are `None`).

    `slip`: the result's name is misspelt in the print (it crashes). `formula`: another formula (an error rule's).
    """
    keys = [(l.company, l.metric, y) for l in lookups_for(d) for y in l.years]
    lines = [f"{_var(k)} = {_num(values[k]) if k in values else 'None'}" for k in keys]
    a = d.companies[0]
    if d.family == "growth":
        old, new = _var((a, "revenue", d.years[0])), _var((a, "revenue", d.years[1]))
        expr = {"": f"({new} - {old}) / {old} * 100", "absolute": f"{new} - {old}",
                "flipped": f"({new} - {old}) / {new} * 100"}[formula or d.variant]
    elif d.family == "per_employee":
        rev, head = _var((a, "revenue", d.years[0])), _var((a, "headcount", d.years[0]))
        expr = {"": f"{rev} * 1000 / {head}", "inverse": f"{head} / {rev}", "flipped": f"{rev} / {head}"}[formula or d.variant]
    else:
        first = " + ".join(_var((a, "revenue", y)) for y in d.years)
        second = " + ".join(_var((d.companies[1], "revenue", y)) for y in d.years)
        n = len(d.years)
        expr = {"": f"({first}) - ({second})", "average": f"({first}) / {n} - ({second}) / {n}",
                "flipped": f"({second}) - ({first})"}[formula or d.variant]
    lines += [f"result = round({expr}, 1)", "print(resullt)" if slip else "print(result)"]
    return "\n".join(lines)


def answer_of(d: Derive) -> str:
    """The true value of a computation, from the site's figures (the reference answer)."""
    values = {(l.company, l.metric, y): float(figure(l.company, l.metric, y)) for l in lookups_for(d) for y in l.years}
    scope: dict[str, float] = {}
    exec(code_for(d, values).replace("print(result)", ""), {}, scope)  # the same formula the coder writes
    return str(scope["result"])


def make_task(rng: random.Random, family: str) -> tuple[str, Derive]:
    """(question, computation) of one task of `family`."""
    a = rng.choice(COMPANIES)
    if family == "growth":
        y1 = rng.choice(YEARS[:-2])
        y2 = rng.choice([y for y in YEARS if y >= y1 + 2])
        return (f"By what percentage did {a}'s revenue change from {y1} to {y2}, according to its annual reports? "
                "Give the percentage rounded to 1 decimal place.", Derive(family, (a,), (y1, y2)))
    if family == "per_employee":
        y = rng.choice(YEARS)
        return (f"What was {a}'s revenue per employee in {y}, in thousands of dollars, according to its annual report? "
                "Round to 1 decimal place.", Derive(family, (a,), (y,)))
    b = rng.choice([c for c in COMPANIES if c != a])
    lo = rng.choice(YEARS[:-2])
    years = (lo, lo + 1, lo + 2)
    return (f"How much higher (in $ millions) was {a}'s total revenue over {lo}-{lo + 2} than {b}'s over the same years, "
            "according to their annual reports? Round to 1 decimal place.", Derive(family, (a, b), years))


def read_question(question: str) -> Derive | None:
    """The computation a task question asks for."""
    m = re.search(rf"did ({_NAMES})'s revenue change from (\d{{4}}) to (\d{{4}})", question)
    if m:
        return Derive("growth", (m.group(1),), (int(m.group(2)), int(m.group(3))))
    m = re.search(rf"What was ({_NAMES})'s revenue per employee in (\d{{4}})", question)
    if m:
        return Derive("per_employee", (m.group(1),), (int(m.group(2)),))
    m = re.search(rf"was ({_NAMES})'s total revenue over (\d{{4}})-(\d{{4}}) than ({_NAMES})'s", question)
    if m:
        return Derive("gap", (m.group(1), m.group(4)), tuple(range(int(m.group(2)), int(m.group(3)) + 1)))
    return None
