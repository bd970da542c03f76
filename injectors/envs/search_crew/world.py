"""The small web behind `search_crew`: a task's pages, its search engine, its question families and the answers.

A task is a question whose answer is computed from two figures published on
the web (the web-search-with-a-computed-answer family GAIA's and
AssistantBench's web tasks stand for). Each task has its own web of about
eight pages drawn anew: the two landmarks the question names, a near-namesake
of each ("Old Kestrel Tower" beside "Kestrel Tower", with other figures), and
landmarks of the same kind elsewhere. A page states a landmark's figures one
per line (`- height: 212 m`). `web_search` ranks pages by the query's words in
their titles (ties in the web's own order, so a near-namesake may come first)
and `open_page` returns a page by its URL. The families: `years_between` (the
bridge's opening year minus the museum's founding year), `height_gap` (one
tower's height minus another's), `total_capacity` (two stadiums' seats
together) and `group_fare` (N adults' admission to two museums). All figures
are whole numbers.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ..docs_team.calculator import calculate

FAMILIES = ("years_between", "height_gap", "total_capacity", "group_fare")
PLACES = ("Kestrel", "Morrow", "Alder", "Brannock", "Corvin", "Dunmore", "Elsworth", "Fenwick", "Glenhollow", "Harrow",
          "Ilford", "Juniper", "Kelso", "Larkspur", "Merrow", "Norbury", "Oakhurst", "Pembry", "Quarry", "Redvale")
NAMESAKE = ("Old", "New", "North", "East")
# Per kind of landmark: its title word, what it is, and its figures (name -> (low, high, unit)).
KINDS: dict[str, dict[str, Any]] = {
    "museum": {"word": "Museum", "what": "a museum of local history",
               "figures": {"founded": (1820, 1900, ""), "adult ticket": (8, 25, " EUR"), "rooms": (12, 60, "")}},
    "bridge": {"word": "Bridge", "what": "a road bridge over the river",
               "figures": {"opened": (1905, 2016, ""), "length": (120, 2400, " m"), "spans": (3, 40, "")}},
    "tower": {"word": "Tower", "what": "an observation tower",
              "figures": {"height": (80, 420, " m"), "floors": (20, 110, ""), "completed": (1950, 2021, "")}},
    "stadium": {"word": "Stadium", "what": "a football stadium",
                "figures": {"capacity": (12000, 80000, ""), "opened": (1900, 2016, ""), "record attendance": (9000, 90000, "")}},
}
FIGURES = tuple(sorted({f for k in KINDS.values() for f in k["figures"]}, key=len, reverse=True))
# The kind of the two landmarks of each family, and the figure read of each.
FAMILY_FACTS = {"years_between": (("museum", "founded"), ("bridge", "opened")),
                "height_gap": (("tower", "height"), ("tower", "height")),
                "total_capacity": (("stadium", "capacity"), ("stadium", "capacity")),
                "group_fare": (("museum", "adult ticket"), ("museum", "adult ticket"))}
SITE = "https://web.sim/wiki/"
_PAGE_FIGURE = re.compile(r"^- ([a-z ]+): (\d+)", re.M)
RESULT_LINE = re.compile(r"^\d+\. (.+?) \u2014 (\S+)$", re.M)
QUESTIONS = {
    "years_between": re.compile(r"How many years after the founding of the (.+?) did the (.+?) open\?"),
    "height_gap": re.compile(r"How many metres taller is the (.+?) than the (.+?)\?"),
    "total_capacity": re.compile(r"How many spectators can the (.+?) and the (.+?) seat together\?"),
    "group_fare": re.compile(r"How many euros do (\d+) adults pay in total for admission to both the (.+?) and the (.+?)\?"),
}
ASK = " Search the web for the figures. End with a line 'ANSWER: <number>'."


def url_of(title: str) -> str:
    return SITE + title.replace(" ", "_")


def page_text(page: dict[str, Any]) -> str:
    """What `open_page` returns: the title, a sentence, one line per figure."""
    units = KINDS[page["kind"]]["figures"]
    lines = [f"- {name}: {value}{units[name][2]}" for name, value in page["figures"].items()]
    return f"{page['title']}\n{page['title']} is {KINDS[page['kind']]['what']} in {page['town']}.\n" + "\n".join(lines)


def read_page(text: str) -> dict[str, int]:
    """The figures a page states, by name."""
    return {name: int(value) for name, value in _PAGE_FIGURE.findall(text)}


def search(pages: list[dict[str, Any]], query: str) -> str:
    """What `web_search` returns: up to five pages whose titles share the query's words, most shared first."""
    words = set(re.findall(r"[a-z]+", query.lower()))
    scored = [(-len(words & set(p["title"].lower().split())), i, p) for i, p in enumerate(pages)]
    found = sorted(s for s in scored if s[0] < 0)[:5]
    if not found:
        return f"No results for {query!r}."
    lines = [f"{n}. {p['title']} \u2014 {url_of(p['title'])}\n   {p['title']} is {KINDS[p['kind']]['what']} in {p['town']}."
             for n, (_, _, p) in enumerate(found, 1)]
    return f"Results for {query!r}:\n" + "\n".join(lines)


def open_page(pages: list[dict[str, Any]], url: str) -> str:
    found = next((p for p in pages if url_of(p["title"]) == url.strip()), None)
    return page_text(found) if found else f"error: no page at {url!r} (open a URL from the search results)"


def results(text: str) -> list[tuple[str, str]]:
    """(title, URL) of each search result, in order."""
    return RESULT_LINE.findall(text)


def _figures(rng: random.Random, kind: str, used: dict[str, set[int]]) -> dict[str, int]:
    out = {}
    for name, (low, high, _) in KINDS[kind]["figures"].items():
        taken = used.setdefault(f"{kind} {name}", set())
        value = rng.choice([v for v in range(low, high) if v not in taken])  # no two pages share a figure
        taken.add(value)
        out[name] = value
    return out


def _landmark(rng: random.Random, kind: str, title: str, used: dict[str, set[int]]) -> dict[str, Any]:
    return {"title": title, "kind": kind, "town": rng.choice(PLACES) + "ton", "figures": _figures(rng, kind, used)}


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the web and the question's landmarks) of one task of `family`."""
    places = rng.sample(PLACES, 6)
    used: dict[str, set[int]] = {}
    (kind_a, fig_a), (kind_b, fig_b) = FAMILY_FACTS[family]
    names = [f"{places[0]} {KINDS[kind_a]['word']}", f"{places[1]} {KINDS[kind_b]['word']}"]
    pages = [_landmark(rng, kind_a, names[0], used), _landmark(rng, kind_b, names[1], used)]
    for title, kind in zip(names, (kind_a, kind_b)):
        pages.append(_landmark(rng, kind, f"{rng.choice(NAMESAKE)} {title}", used))
    for place, kind in zip(places[2:5], (kind_a, kind_b, rng.choice(sorted(KINDS)))):
        pages.append(_landmark(rng, kind, f"{place} {KINDS[kind]['word']}", used))
    a, b = pages[0]["figures"], pages[1]["figures"]
    if family == "height_gap" and a["height"] < b["height"]:
        names.reverse()  # the question asks how much taller the taller one is
    question: dict[str, Any] = {"family": family, "facts": [[names[0], fig_a], [names[1], fig_b]]}
    if family == "group_fare":
        question["adults"] = rng.randint(2, 6)
    rng.shuffle(pages)
    return question_text(question) + ASK, {"question": question, "pages": pages}


def question_text(q: dict[str, Any]) -> str:
    (a, _), (b, _) = q["facts"]
    if q["family"] == "years_between":
        return f"How many years after the founding of the {a} did the {b} open?"
    if q["family"] == "height_gap":
        return f"How many metres taller is the {a} than the {b}?"
    if q["family"] == "total_capacity":
        return f"How many spectators can the {a} and the {b} seat together?"
    return f"How many euros do {q['adults']} adults pay in total for admission to both the {a} and the {b}?"


def parse_question(text: str) -> tuple[str, list[tuple[str, str]], int] | None:
    """(family, [(landmark, figure)] to find, adults) of a question, or None."""
    for family, pattern in QUESTIONS.items():
        m = pattern.search(text)
        if m is None:
            continue
        adults = int(m.group(1)) if family == "group_fare" else 0
        a, b = m.groups()[-2:]
        (_, fig_a), (_, fig_b) = FAMILY_FACTS[family]
        return family, [(a, fig_a), (b, fig_b)], adults
    return None


def formula(family: str, facts: list[tuple[str, str]], adults: int) -> str:
    """What the family computes, over the named figures (`<landmark> <figure>`)."""
    a, b = (f"{name} {fig}" for name, fig in facts)
    if family == "years_between":
        return f"{b} - {a}"
    if family == "height_gap":
        return f"{a} - {b}"
    if family == "total_capacity":
        return f"{a} + {b}"
    return f"{adults} * ({a} + {b})"


def evaluate_formula(text: str, values: dict[str, int]) -> str:
    """The formula with each named figure replaced by its value (longest names first)."""
    out = text
    for name in sorted(values, key=len, reverse=True):
        out = out.replace(name, str(values[name]))
    return out


def answer_of(world: dict[str, Any]) -> int:
    """The reference answer: the family's formula on the two landmarks' figures as their pages state them."""
    q = world["question"]
    by_title = {p["title"]: p for p in world["pages"]}
    facts = [(name, fig) for name, fig in q["facts"]]
    values = {f"{name} {fig}": by_title[name]["figures"][fig] for name, fig in facts}
    return int(calculate(evaluate_formula(formula(q["family"], facts, q.get("adults", 0)), values)))
