"""Error rules of `sql_desk` (tried before the generic ones): mistakes in the lead's, schema reader's and analyst's
replies.

Where each rule acts (see `sql_desk.env` for the steps): the lead's plan (R.4 the question's metric misread, PL.1 a
filter left out, PL.2 a tool the team lacks, A.5 an answer before any figure, C.1 the schema asked of the analyst),
its request to the analyst (PL.3 an overview instead of the question's figures, C.1 the request sent to the schema
reader, A.6 the schema read again), the schema reader's read (A.3 a schema from memory) and report (C.2 the two keys
of the orders mixed up), the analyst's queries (A.2 another filter value, R.2 the filter or the ranking inverted,
R.3 the wrong aggregate, A.3 figures without a query, A.6 the previous query again) and report (R.1 a figure no
query returned, V.1 the other query's figure or the second row, C.2 a figure with its digits slipped), the lead's
calculation (R.2 the other operation, A.1 the analyst asked to compute) and answer (R.3, A.4, C.3). The team follows
the lead's plan and takes a report's figures as they come, so each of these carries to the answer.

A wrong join or filter in a query is A.2 (the query is the tool's parameter); a wrong aggregate R.3 (an aggregation
error); a filter or ranking turned around R.2 (the conclusion does not follow from the question).
"""

from __future__ import annotations

import json
import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import (Generated, GenInput, answer_line, answer_with_unit, guessed_answer,
                                           miswritten_answer, slipped_digits, slipped_result, unseen_numbers)
from faultlens.injectors.envs.agents_desk.wire import render_call
from .policy import ANALYST, REPORT_LINE, SCHEMA_READER, SCHEMA_REQUEST, ask
from .world import MONTHS, read_item

_DATA_LINE = re.compile(rf"^2\. {ANALYST}: (.+)$", re.M)
_OTHER_METRIC = {"revenue": "units", "units": "revenue", "orders": "units"}
_TEXT_FILTER = re.compile(r"(\w\.\w+) = '(\w+)'")
_MONTH_FILTER = re.compile(r"(s\.\w+) = (\d+)\b")
_REVENUE = re.compile(r"SUM\((s\.\w+) \* (p\.\w+)\)")
_UNITS = re.compile(r"SUM\((s\.\w+)\)")
_EXPRESSION = re.compile(r'"expression": "(\d+) ([-+]) (\d+)"')
_NAME_ROW = re.compile(r"^([A-Z][a-z]+ [A-Z][a-z]+) \| \d+$", re.M)


def _plan(inp: GenInput) -> re.Match | None:
    return _DATA_LINE.search(inp.text) if inp.agent == "lead" and inp.kind == StepKind.plan else None


def _query(inp: GenInput) -> str | None:
    """The analyst's query in a run_sql step, or None."""
    if inp.agent != ANALYST or inp.kind != StepKind.tool_call or "Action: run_sql" not in inp.text:
        return None
    try:
        return str(json.loads(inp.text.split("Action: run_sql\n", 1)[1])["query"])
    except (ValueError, KeyError, IndexError):
        return None


def _with_query(inp: GenInput, query: str) -> str:
    return render_call("run_sql", {"query": query}, inp.text.split("\nAction:", 1)[0])


def _requested(inp: GenInput) -> list[str]:
    """The figures the lead asked the analyst for (its last request in the prefix)."""
    for p in reversed(inp.prefix):
        if p.agent == "lead" and "Find these figures with SQL" in p.text:
            return re.findall(r"^- (.+)$", p.text.replace("\\n", "\n"), re.M)
    return []


# -- the lead's plan ---------------------------------------------------------------------------------------
def _r4(inp: GenInput) -> Generated | None:
    """The plan asks for another metric than the question's (units for revenue, revenue for units, orders for units
    in a ranking): the lead follows its plan."""
    m = _plan(inp)
    if m is None:
        return None
    items = [read_item(p) for p in m.group(1).split("; ")]
    if not items or any(i is None for i in items):
        return None
    old = items[0].metric  # type: ignore[union-attr]
    new = "orders" if items[0].top else _OTHER_METRIC[old]  # type: ignore[union-attr]
    line = m.group(0).replace(f"{old} of ", f"{new} of ")
    return Generated(inp.text.replace(m.group(0), line), f"plans to find the {new} where the question asks for the {old}")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan leaves a filter out of a figure (the month, or the city or category): the figure covers every sale."""
    m = _plan(inp)
    if m is None:
        return None
    parts = m.group(1).split("; ")
    i = inp.rng.randrange(len(parts))
    part = parts[i]
    if " in month " in part:
        new = re.sub(r" in month \d+$", "", part)
        what = "the month"
    else:
        new = re.sub(r"of (clients in \w+|\w+ items)", "of all sales", part)
        what = "the city" if "clients in" in part else "the category"
    if new == part:
        return None
    parts[i] = new
    line = m.group(0).replace(m.group(1), "; ".join(parts))
    return Generated(inp.text.replace(m.group(0), line), f"plans the figure '{new}' without {what} the question names")


def _pl2(inp: GenInput) -> Generated | None:
    """The plan has the figures fetched by a tool the team does not have."""
    m = _plan(inp)
    if m is None:
        return None
    line = m.group(0).replace(f"2. {ANALYST}:", "2. query_warehouse:")
    return Generated(inp.text.replace(m.group(0), line), "plans to get the figures from a query_warehouse tool the team "
                     "does not have")


def _a5(inp: GenInput) -> Generated | None:
    """The lead answers before any figure."""
    return guessed_answer(inp, "lead", "Shops of this size usually land about here.", "the database has been queried")


def _c1(inp: GenInput) -> Generated | None:
    """The lead sends a member's sub-task to the other member: the schema to the analyst, the figures to the reader."""
    if inp.agent != "lead" or inp.kind not in (StepKind.plan, StepKind.message):
        return None
    if f"Action: {SCHEMA_READER}\n" in inp.text:
        return Generated(inp.text.replace(f"Action: {SCHEMA_READER}\n", f"Action: {ANALYST}\n"),
                         "asks the sql_analyst to read the schema, the schema_reader's sub-task")
    if f"Action: {ANALYST}\n" in inp.text:
        return Generated(inp.text.replace(f"Action: {ANALYST}\n", f"Action: {SCHEMA_READER}\n"),
                         "asks the schema_reader for the figures, the sql_analyst's sub-task")
    return None


# -- the lead's request to the analyst ------------------------------------------------------------------------
def _delegation(inp: GenInput) -> str | None:
    """The thought of the lead's request to the analyst, or None."""
    if inp.agent != "lead" or inp.kind != StepKind.message or f"Action: {ANALYST}\n" not in inp.text:
        return None
    return inp.text.split("\nAction:", 1)[0]


def _pl3(inp: GenInput) -> Generated | None:
    """Mid-run the lead turns to an overview of the sales (the count of every order) instead of the question's figures,
    and goes on from it."""
    thought = _delegation(inp)
    if thought is None:
        return None
    body = json.loads(inp.text.split(f"Action: {ANALYST}\n", 1)[1])
    text = body["messages"][0]["content"][0]["text"]
    old = re.findall(r"^- .+$", text, re.M)
    new = text.replace("\n".join(old), "- orders of all sales")
    return Generated(ask(ANALYST, new, "Step 2: first an overview of the sales."), "asks for the count of all orders, an "
                     "overview, instead of the figures its plan and the question need")


def _a6_repeat(inp: GenInput) -> Generated | None:
    """The lead has the schema read again where its plan's next step is the analyst's."""
    thought = _delegation(inp)
    if thought is None:
        return None
    return Generated(ask(SCHEMA_READER, SCHEMA_REQUEST, thought), "has the schema read a second time instead of asking "
                     "the analyst for the figures")


# -- the schema reader --------------------------------------------------------------------------------------
_MEMORY = ("customers: id, name, city\nproducts: id, name, category, price\norders: id, customer_id -> customers.id, "
           "product_id -> products.id, quantity, month")


def _a3_schema(inp: GenInput) -> Generated | None:
    """The schema reader reports the usual shop schema without reading this database's."""
    if inp.agent != SCHEMA_READER or inp.kind != StepKind.tool_call:
        return None
    return Generated(_MEMORY, "reports a schema as read without calling read_schema (the tables it names do not exist)")


def _c2_keys(inp: GenInput) -> Generated | None:
    """The schema reader passes the orders' two keys on mixed up (the customer key pointing at the products)."""
    if inp.agent != SCHEMA_READER or inp.kind != StepKind.message:
        return None
    refs = re.findall(r"(\w+) -> (\w+\.\w+)", inp.text)
    if len(refs) < 3:
        return None
    (c_col, c_ref), (p_col, p_ref) = refs[0], refs[1]
    text = inp.text.replace(f"{c_col} -> {c_ref}", f"{c_col} -> {p_ref}", 1).replace(f"{p_col} -> {p_ref}",
                                                                                    f"{p_col} -> {c_ref}", 1)
    return Generated(text, f"tells the analyst {c_col} joins {p_ref} and {p_col} joins {c_ref} (the other way round)")


# -- the analyst's queries ------------------------------------------------------------------------------------
def _a2(inp: GenInput) -> Generated | None:
    """The analyst's query filters on another value (another city, category or month of the database)."""
    query = _query(inp)
    if query is None:
        return None
    m = _TEXT_FILTER.search(query)
    if m is not None:
        old = m.group(2)
        pool = next((g for g in sorted(inp.distractors, key=len) if old in g and len(g) > 1), None)
        if pool is None:
            return None
        new = inp.rng.choice(sorted(v for v in pool if v != old))
        return Generated(_with_query(inp, query.replace(m.group(0), f"{m.group(1)} = '{new}'")),
                         f"filters on '{new}' where the figure is of '{old}'")
    m = _MONTH_FILTER.search(query)
    if m is None:
        return None
    new_month = inp.rng.choice([x for x in MONTHS if str(x) != m.group(2)])
    return Generated(_with_query(inp, query.replace(m.group(0), f"{m.group(1)} = {new_month}")),
                     f"filters on month {new_month} where the figure is of month {m.group(2)}")


def _r2_query(inp: GenInput) -> Generated | None:
    """The analyst's query turns the question around: the filter excludes its value, or the ranking is ascending."""
    query = _query(inp)
    if query is None:
        return None
    if "ORDER BY total DESC" in query:
        return Generated(_with_query(inp, query.replace("DESC", "ASC")), "ranks the customers ascending, so the first "
                         "row is the one who bought the least")
    m = _TEXT_FILTER.search(query)
    if m is None:
        return None
    return Generated(_with_query(inp, query.replace(m.group(0), f"{m.group(1)} <> '{m.group(2)}'")),
                     f"keeps every row but those of '{m.group(2)}', where the figure is of '{m.group(2)}' alone")


def _r3_query(inp: GenInput) -> Generated | None:
    """The analyst's query aggregates the wrong thing: the prices without the quantities, or the orders for the units."""
    query = _query(inp)
    if query is None:
        return None
    m = _REVENUE.search(query)
    if m is not None:
        return Generated(_with_query(inp, query.replace(m.group(0), f"SUM({m.group(2)})")),
                         "sums the unit prices, not quantity times unit price")
    m = _UNITS.search(query)
    if m is None:
        return None
    return Generated(_with_query(inp, query.replace(m.group(0), "COUNT(*)")), "counts the orders where the units "
                     "(the sum of the quantities) are asked")


def _customers(inp: GenInput) -> list[str]:
    """The task's customers (a distractor group of names)."""
    return next((g for g in inp.distractors if g and all(re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", v) for v in g)), [])


def _a3_query(inp: GenInput) -> Generated | None:
    """The analyst reports figures without running any query (they are made up)."""
    if _query(inp) is None:
        return None
    asked = _requested(inp)
    if not asked:
        return None
    names = _customers(inp)
    lines = []
    for figure in asked:
        value = inp.rng.choice(sorted(names)) if figure.startswith("top client") and names else \
            str(inp.rng.randint(12, 900))
        lines.append(f"{figure}: {value}")
    return Generated("\n".join(lines), "reports figures as queried without running any query (they appear nowhere)")


def _a6_query(inp: GenInput) -> Generated | None:
    """The analyst runs its previous query again for the next figure."""
    query = _query(inp)
    if query is None:
        return None
    for p in reversed(inp.prefix):
        if p.agent == ANALYST and p.kind == StepKind.tool_call.value and "Action: run_sql" in p.text and p.text != inp.text:
            previous = json.loads(p.text.split("Action: run_sql\n", 1)[1])["query"]
            if previous.lower() != query.lower():
                return Generated(_with_query(inp, previous), "runs its previous query again instead of the next figure's")
            return None
    return None


# -- the analyst's report ---------------------------------------------------------------------------------------
def _report(inp: GenInput) -> list[re.Match]:
    if inp.agent != ANALYST or inp.kind != StepKind.message:
        return []
    return [m for m in REPORT_LINE.finditer(inp.text) if read_item(m.group(1)) is not None]


def _with_value(inp: GenInput, m: re.Match, value: str) -> str:
    return inp.text[: m.start(2)] + value + inp.text[m.end(2):]


def _r1(inp: GenInput) -> Generated | None:
    """The analyst reports a figure (or a customer) that no query returned."""
    lines = _report(inp)
    if not lines:
        return None
    m = inp.rng.choice(lines)
    seen = inp.prefix_text() + inp.text
    if m.group(1).startswith("top client"):
        names = _customers(inp)
        unseen = sorted(n for n in names if n not in seen)
        if not unseen:
            return None
        new = inp.rng.choice(unseen)
    else:
        new = str(inp.rng.choice(unseen_numbers(seen, 12, 900)))
    return Generated(_with_value(inp, m, new), f"reports {m.group(1)} as {new}, which no query returned, instead of "
                     f"{m.group(2)}")


def _v1(inp: GenInput) -> Generated | None:
    """The analyst loses track of which result is which: the two figures swapped, or the ranking's second row."""
    lines = _report(inp)
    if len(lines) >= 2 and lines[0].group(2) != lines[1].group(2):
        a, b = lines[0], lines[1]
        text = inp.text[: a.start(2)] + b.group(2) + inp.text[a.end(2): b.start(2)] + a.group(2) + inp.text[b.end(2):]
        return Generated(text, f"reports {a.group(1)} as {b.group(2)} and {b.group(1)} as {a.group(2)}, each the other "
                         "query's result")
    if len(lines) == 1 and lines[0].group(1).startswith("top client"):
        rows = _NAME_ROW.findall(inp.prefix_text())
        if len(rows) >= 2 and rows[1] != lines[0].group(2):
            return Generated(_with_value(inp, lines[0], rows[1]), f"reports {rows[1]}, the second row of its result, as "
                             "the top client")
    return None


def _c2_report(inp: GenInput) -> Generated | None:
    """The analyst passes a figure on with its digits slipped (its result says otherwise)."""
    lines = [m for m in _report(inp) if m.group(2).isdigit()]
    if not lines:
        return None
    m = inp.rng.choice(lines)
    new = slipped_digits(m.group(2))
    return Generated(_with_value(inp, m, new), f"tells the lead {new} where its query returned {m.group(2)}")


# -- the lead's calculation and answer ---------------------------------------------------------------------------
def _calculation(inp: GenInput) -> re.Match | None:
    return _EXPRESSION.search(inp.text) if inp.agent == "lead" and inp.kind == StepKind.tool_call else None


def _r2_calc(inp: GenInput) -> Generated | None:
    """The lead's calculation combines the right figures the other way."""
    m = _calculation(inp)
    if m is None:
        return None
    op = "+" if m.group(2) == "-" else "-"
    expr = f"{m.group(1)} {op} {m.group(3)}"
    return Generated(render_call("calculate", {"expression": expr}, f"Step 3: {expr}."),
                     f"calculates {expr} where {m.group(1)} {m.group(2)} {m.group(3)} was needed")


def _a1(inp: GenInput) -> Generated | None:
    """The lead asks the sql_analyst to work out the plan's calculation, a job for calculate."""
    m = _calculation(inp)
    if m is None:
        return None
    return Generated(ask(ANALYST, f"Work out {m.group(1)} {m.group(2)} {m.group(3)}.", inp.text.split("\nAction:", 1)[0]),
                     "calls the sql_analyst where calculate was needed")


def _r3_answer(inp: GenInput) -> Generated | None:
    """The lead writes the result down wrong (a digit slipped)."""
    m = answer_line(inp, "lead")
    return None if m is None else miswritten_answer(inp, m, slipped_result(m.group(1), inp.rng))


def _a4(inp: GenInput) -> Generated | None:
    """The answer line carries a unit (a number), or the name surname first (a customer)."""
    m = answer_line(inp, "lead")
    if m is not None:
        return answer_with_unit(inp, m, ["euros", "units", "(approx.)"])
    name = re.search(r"^ANSWER: ([A-Z][a-z]+) ([A-Z][a-z]+)$", inp.text, re.M) if inp.agent == "lead" and \
        inp.kind == StepKind.final_answer else None
    if name is None:
        return None
    return Generated(inp.text.replace(name.group(0), f"ANSWER: {name.group(2)}, {name.group(1)}"),
                     "gives the name surname first, not as the database writes it")


def _c3(inp: GenInput) -> Generated | None:
    """The lead answers with the analyst's first figure as reported, without the calculation the question asks."""
    m = answer_line(inp, "lead")
    if m is None or "=" not in inp.text:
        return None
    figures = [v for label, v in REPORT_LINE.findall(inp.prefix_text()) if read_item(label) and v.isdigit()]
    if not figures or figures[0] == m.group(1):
        return None
    return Generated(f"The analyst has the figure.\nANSWER: {figures[0]}", "passes the analyst's first figure on as the "
                     "answer without the calculation the question asks")


MUTATORS = {"R.1": [_r1], "R.2": [_r2_query, _r2_calc], "R.3": [_r3_query, _r3_answer], "R.4": [_r4],
            "PL.1": [_pl1], "PL.2": [_pl2], "PL.3": [_pl3], "A.1": [_a1], "A.2": [_a2],
            "A.3": [_a3_schema, _a3_query], "A.4": [_a4], "A.5": [_a5], "A.6": [_a6_query, _a6_repeat],
            "V.1": [_v1], "C.1": [_c1], "C.2": [_c2_keys, _c2_report], "C.3": [_c3]}
