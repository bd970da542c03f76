"""The databases behind `sql_desk`: a task's small SQLite database, its question families and the reference answers.

A task is a question over a shop's database of four tables (BIRD / Spider
style text-to-SQL): the orders, the customers who placed them, the products
they bought and the sales reps who took them. Each task names the tables and
columns anew from synonyms (`sales` or `purchases` for the orders, `town` or
`city`, `qty` or `units`...), so a query needs the schema read first; the
reps' table has a city column too and the orders table a key to it, so a
wrong join runs and gives a wrong number. Text values are stored in lower
case. The families: `city_revenue` (the revenue of the orders of customers
in one city), `category_units` (the units of a category sold in one month),
`city_gap` (how much more revenue one city brought than another),
`month_growth` (how many more units of a category sold in one month than in
an earlier one) and `top_customer` (which customer bought the most units of
a category: a name). Every number is a whole number.
"""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

FAMILIES = ("city_revenue", "category_units", "city_gap", "month_growth", "top_customer")
CITIES = ("oslo", "bergen", "lisbon", "porto", "ghent", "lyon", "turin", "malmo")
CATEGORIES = ("garden", "kitchen", "office", "toys", "sports", "lighting")
MONTHS = (3, 4, 5, 6)
FIRST = ("Maria", "Jonas", "Ines", "Pieter", "Sofia", "Tomas", "Lena", "Hugo", "Clara", "Emil", "Nora", "Felix")
LAST = ("Lund", "Costa", "Peeters", "Moreau", "Ricci", "Berg", "Silva", "Dubois", "Janssen", "Rossi")
PRODUCTS = ("lamp", "kettle", "rake", "desk", "ball", "puzzle", "chair", "shears", "mug", "racket", "shelf", "kite")

# Each role's table and column names, drawn per task (the analyst knows these synonyms, as a model knows SQL usage).
TABLES = {"orders": ("sales", "purchases", "order_lines"), "customers": ("clients", "accounts", "buyers"),
          "products": ("items", "goods", "catalog"), "staff": ("reps", "agents", "sellers")}
COLUMNS = {"customer_ref": ("client_id", "buyer_id", "account_id"), "product_ref": ("item_id", "product_ref", "sku_id"),
           "staff_ref": ("rep_id", "agent_id", "seller_id"), "qty": ("qty", "quantity", "units"),
           "month": ("month", "period"), "name": ("name", "full_name"), "city": ("city", "town"),
           "title": ("title", "label"), "category": ("category", "dept"), "price": ("price", "unit_price")}
ROLE_OF_TABLE = {t: role for role, names in TABLES.items() for t in names}
CONCEPT_OF_COLUMN = {c: concept for concept, names in COLUMNS.items() for c in names}


@dataclass(frozen=True)
class Names:
    """A task's table and column names, by role and concept."""

    tables: dict[str, str]
    columns: dict[str, str]


def draw_names(rng: random.Random) -> Names:
    return Names({role: rng.choice(names) for role, names in TABLES.items()},
                 {concept: rng.choice(names) for concept, names in COLUMNS.items()})


def names_of(world: dict[str, Any]) -> Names:
    return Names(world["names"]["tables"], world["names"]["columns"])


def create_statements(n: Names) -> list[str]:
    """The tables' CREATE statements (as `sqlite_master` keeps them: what read_schema shows)."""
    t, c = n.tables, n.columns
    return [f"CREATE TABLE {t['customers']} (id INTEGER PRIMARY KEY, {c['name']} TEXT, {c['city']} TEXT)",
            f"CREATE TABLE {t['products']} (id INTEGER PRIMARY KEY, {c['title']} TEXT, {c['category']} TEXT, "
            f"{c['price']} INTEGER)",
            f"CREATE TABLE {t['staff']} (id INTEGER PRIMARY KEY, {c['name']} TEXT, {c['city']} TEXT)",
            f"CREATE TABLE {t['orders']} (id INTEGER PRIMARY KEY, {c['customer_ref']} INTEGER REFERENCES "
            f"{t['customers']}(id), {c['product_ref']} INTEGER REFERENCES {t['products']}(id), {c['staff_ref']} INTEGER "
            f"REFERENCES {t['staff']}(id), {c['qty']} INTEGER, {c['month']} INTEGER)"]


def connect(world: dict[str, Any]) -> sqlite3.Connection:
    """The task's database, in memory, read-only once filled."""
    n = names_of(world)
    db = sqlite3.connect(":memory:", check_same_thread=False)  # Haystack runs tools in a worker thread, one at a time
    for statement in create_statements(n):
        db.execute(statement)
    for role in ("customers", "products", "staff", "orders"):
        rows = world["rows"][role]
        db.executemany(f"INSERT INTO {n.tables[role]} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    db.commit()
    db.execute("PRAGMA query_only = ON")
    return db


_READ_ONLY = re.compile(r"^\s*(SELECT|WITH)\b", re.I)


def run_sql(db: sqlite3.Connection, query: str) -> str:
    """A read-only query's rows as text (a header line, then one `a | b` line a row), or its error as text."""
    if not _READ_ONLY.match(query or ""):
        return "error: only a read-only SELECT query is allowed"
    try:
        cursor = db.execute(query)
        rows = cursor.fetchmany(20)
    except sqlite3.Error as exc:
        return f"error: {exc}"
    header = " | ".join(d[0] for d in cursor.description or [])
    if not rows:
        return f"{header}\n(no rows)"
    return "\n".join([header, *(" | ".join("NULL" if v is None else str(v) for v in row) for row in rows)])


def read_schema(db: sqlite3.Connection) -> str:
    """Every table's CREATE statement, one a line (the schema_reader's tool)."""
    rows = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    return "\n".join(f"{r[0]};" for r in rows)


# -- questions and their figures ---------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One figure a question needs, as the lead asks the analyst for it: `<metric> of <scope>`."""

    metric: str  # revenue | units | orders
    city: str | None = None
    category: str | None = None
    month: int | None = None
    top: bool = False  # the customer with the largest metric (a name), not the metric

    def text(self) -> str:
        scope = f"clients in {self.city}" if self.city else f"{self.category} items" if self.category else "all sales"
        if self.month is not None:
            scope += f" in month {self.month}"
        return f"top client by {self.metric} of {scope}" if self.top else f"{self.metric} of {scope}"


ITEM = re.compile(r"^(top client by )?(revenue|units|orders) of (?:clients in (\w+)|(\w+) items|all sales)"
                  r"(?: in month (\d+))?$")


def read_item(text: str) -> Item | None:
    m = ITEM.match(text.strip())
    if m is None:
        return None
    return Item(m.group(2), m.group(3), m.group(4), int(m.group(5)) if m.group(5) else None, bool(m.group(1)))


def items_of(question: dict[str, Any]) -> tuple[list[Item], str | None]:
    """The figures a question needs and the operation on them (None: the figure is the answer)."""
    f, a, b = question["family"], str(question.get("a")), str(question.get("b"))
    if f == "city_revenue":
        return [Item("revenue", city=a.capitalize())], None
    if f == "category_units":
        return [Item("units", category=a, month=question["month"])], None
    if f == "city_gap":
        return [Item("revenue", city=a.capitalize()), Item("revenue", city=b.capitalize())], "minus"
    if f == "month_growth":
        return [Item("units", category=a, month=question["to"]), Item("units", category=a, month=question["from"])], "minus"
    return [Item("units", category=a, top=True)], None


def question_text(q: dict[str, Any]) -> str:
    f = q["family"]
    end = "End with a line 'ANSWER: <number>'."
    if f == "city_revenue":
        return (f"What was the total revenue (quantity times unit price) of the orders placed by customers in "
                f"{q['a'].capitalize()}? {end}")
    if f == "category_units":
        return f"How many units of {q['a']} products were sold in month {q['month']}? {end}"
    if f == "city_gap":
        return (f"How much more revenue (quantity times unit price) came from customers in {q['a'].capitalize()} than "
                f"from customers in {q['b'].capitalize()}? {end}")
    if f == "month_growth":
        return f"By how many units did sales of {q['a']} products grow from month {q['from']} to month {q['to']}? {end}"
    return f"Which customer bought the most units of {q['a']} products? End with a line 'ANSWER: <customer name>'."


def figure(world: dict[str, Any], item: Item) -> Any:
    """The value of `item` computed in Python from the rows (the reference; the analyst's SQL must agree)."""
    rows = world["rows"]
    customers = {r[0]: r for r in rows["customers"]}
    products = {r[0]: r for r in rows["products"]}
    totals: dict[str, int] = {}
    for _, cust, prod, _, qty, month in rows["orders"]:
        if item.city and customers[cust][2] != item.city.lower():
            continue
        if item.category and products[prod][2] != item.category.lower():
            continue
        if item.month is not None and month != item.month:
            continue
        value = {"revenue": qty * products[prod][3], "units": qty, "orders": 1}[item.metric]
        key = customers[cust][1] if item.top else ""
        totals[key] = totals.get(key, 0) + value
    if not item.top:
        return totals.get("", 0)
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return ranked[0][0] if ranked else ""


def _clear_top(world: dict[str, Any], item: Item) -> bool:
    """The top customer wins by a margin, and is not the top by another metric or over every category."""
    def top(i: Item) -> tuple[str, int, int]:
        rows = world["rows"]
        customers = {r[0]: r for r in rows["customers"]}
        products = {r[0]: r for r in rows["products"]}
        totals: dict[str, int] = {}
        for _, cust, prod, _, qty, month in rows["orders"]:
            if i.category and products[prod][2] != i.category:
                continue
            value = {"revenue": qty * products[prod][3], "units": qty, "orders": 1}[i.metric]
            totals[customers[cust][1]] = totals.get(customers[cust][1], 0) + value
        ranked = sorted(totals.values(), reverse=True) + [0, 0]
        return figure(world, i), ranked[0], ranked[1]

    name, first, second = top(item)
    others = {top(Item(m, category=item.category, top=True))[0] for m in ("revenue", "orders")}
    return first - second >= 2 and name not in others and top(Item("units", top=True))[0] != name


def _rows(rng: random.Random) -> dict[str, list[list[Any]]]:
    names = [f"{a} {b}" for a, b in zip(rng.sample(FIRST, 8), rng.sample(LAST, 8))]
    cities = rng.sample(CITIES, 4)
    categories = rng.sample(CATEGORIES, 3)
    customers = [[i + 1, names[i], cities[i % 4]] for i in range(8)]
    products = [[i + 1, p, categories[i % 3], rng.randint(5, 90)] for i, p in enumerate(rng.sample(PRODUCTS, 8))]
    staff = [[i + 1, f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.choice(CITIES)] for i in range(4)]
    orders = [[i + 1, rng.randint(1, 8), rng.randint(1, 8), rng.randint(1, 4), rng.randint(1, 9), rng.choice(MONTHS)]
              for i in range(40)]
    return {"customers": customers, "products": products, "staff": staff, "orders": orders}


def _question(rng: random.Random, family: str, rows: dict[str, list[list[Any]]]) -> dict[str, Any]:
    cities = sorted({r[2] for r in rows["customers"]})
    categories = sorted({r[2] for r in rows["products"]})
    if family in ("city_revenue", "city_gap"):
        a, b = rng.sample(cities, 2)
        return {"family": family, "a": a, "b": b}
    if family == "month_growth":
        m1, m2 = sorted(rng.sample(MONTHS, 2))
        return {"family": family, "a": rng.choice(categories), "from": m1, "to": m2}
    return {"family": family, "a": rng.choice(categories), "month": rng.choice(MONTHS)}


def _valid(world: dict[str, Any]) -> bool:
    items, op = items_of(world["question"])
    values = [figure(world, i) for i in items]
    if items[0].top:
        return bool(values[0]) and _clear_top(world, items[0])
    if any(v <= 0 for v in values):
        return False
    return op is None or values[0] - values[1] > 0


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the database and question) of one task of `family` (drawn again until the answer is clear)."""
    while True:
        n = draw_names(rng)
        rows = _rows(rng)
        question = _question(rng, family, rows)
        if family == "city_gap" and figure({"rows": rows}, Item("revenue", city=question["a"])) < \
                figure({"rows": rows}, Item("revenue", city=question["b"])):
            question["a"], question["b"] = question["b"], question["a"]
        world = {"names": {"tables": n.tables, "columns": n.columns}, "rows": rows, "question": question}
        if _valid(world):
            return question_text(question), world


def answer_of(world: dict[str, Any]) -> Any:
    """The reference answer: the figure, or the family's operation on the two figures."""
    items, op = items_of(world["question"])
    values = [figure(world, i) for i in items]
    return values[0] - values[1] if op == "minus" else values[0]
