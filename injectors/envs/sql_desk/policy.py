"""The simulated agents of `sql_desk`: functions of the chat request Haystack's `Agent` sends.

Each agent's request holds its own conversation: the system prompt, its user
message (the question for the lead; the lead's `messages` argument for an
agent the lead calls as a tool) and its earlier turns with their
`tool_calls` and `role: "tool"` results. A competent team:

- **lead** writes a plan (its first reply's text: one numbered line per tool
  it will call, then the answer) and carries it out line by line, one tool
  call a line: the `schema_reader` for the schema, the `sql_analyst` for
  the figures (its request holds the schema report as it came), `calculate`
  for the plan's operation (a refused calculation is written again), then
  the answer on an `ANSWER:` line. A step of the plan that cannot be done (a
  tool that does not exist, a report without the figures) ends the run with
  no answer;
- **schema_reader** reads the schema (`read_schema`) and reports one line a
  table, `<table>: <column>, <column> -> <table>.<column>, ...`;
- **sql_analyst** writes one query per figure from the request's schema, in
  the order asked, runs it (`run_sql`), takes the first row's first value as
  the figure (it trusts its own query) and reports one line per figure,
  `<figure>: <value>`. An empty result is queried again (twice at most); a
  failed query is reported.

Recovered mistakes (rate `noise`): the analyst's first query of a figure
writes a text value as the question capitalises it (`'Oslo'`; the data is in
lower case, no row matches, it queries again), and the lead writes its first
subtraction with a typographic minus (`calculate` refuses it; it writes it
again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..docs_team.policy import TYPO_MINUS
from ..framework import chat_turn
from .world import CONCEPT_OF_COLUMN, ROLE_OF_TABLE, Item, read_item

AGENTS = ("lead", "schema_reader", "sql_analyst")
SCHEMA_READER, ANALYST = "schema_reader", "sql_analyst"
PLAN_LINE = re.compile(r"^(\d+)\. (\w+): (.+)$", re.M)
SCHEMA_LINE = re.compile(r"^(\w+): (\w+.*)$", re.M)
CREATE = re.compile(r"^CREATE TABLE (\w+) \((.+)\);?$", re.M)
REPORT_LINE = re.compile(r"^(.+?): (.+)$", re.M)
SCHEMA_REQUEST = "Read the database schema: every table with its columns and the keys that join them."
# What the analyst writes where the schema names nothing: the question's own words (no table is named so).
DEFAULTS = {"orders": "orders", "customers": "customers", "products": "products", "customer_ref": "customer_id",
            "product_ref": "product_id", "qty": "quantity", "price": "price", "city": "city", "category": "category",
            "month": "month", "name": "name"}
OPERATIONS = {"minus": "-", "plus": "+"}


class Call(wire.Call):
    # Haystack words a failed tool call as "Failed to invoke ..." and an unknown tool as "Tool '<name>' not found".
    errors = ("error", "Failed to invoke", "Tool '")


def history(messages: list[dict[str, Any]]) -> list[Call]:
    return wire.history(messages, Call)


def ask(tool: str, text: str, thought: str) -> str:
    """A call of an agent the lead has as a tool (Haystack's agent-as-tool takes a list of chat messages)."""
    return render_call(tool, {"messages": [{"role": "user", "content": [{"text": text}]}]}, thought)


def data_request(items: list[Item] | list[str], schema: str) -> str:
    lines = [i.text() if isinstance(i, Item) else i for i in items]
    return ("Find these figures with SQL:\n" + "\n".join(f"- {line}" for line in lines) + "\nSchema:\n" +
            (schema.strip() or "(none)") + "\nReport one line per figure: '<figure>: <value>'.")


# -- the lead -------------------------------------------------------------------------------------------
_QUESTIONS = (
    (re.compile(r"revenue \(quantity times unit price\) of the orders placed by customers in (\w+)\?"),
     lambda m: ([Item("revenue", city=m.group(1))], None)),
    (re.compile(r"How many units of (\w+) products were sold in month (\d+)\?"),
     lambda m: ([Item("units", category=m.group(1), month=int(m.group(2)))], None)),
    (re.compile(r"How much more revenue \(quantity times unit price\) came from customers in (\w+) than from customers "
                r"in (\w+)\?"), lambda m: ([Item("revenue", city=m.group(1)), Item("revenue", city=m.group(2))], "minus")),
    (re.compile(r"grow from month (\d+) to month (\d+)\?"), None),
    (re.compile(r"Which customer bought the most units of (\w+) products\?"),
     lambda m: ([Item("units", category=m.group(1), top=True)], None)),
)
_GROWTH = re.compile(r"By how many units did sales of (\w+) products grow from month (\d+) to month (\d+)\?")


def read_question(text: str) -> tuple[list[Item], str | None] | None:
    """The figures a question needs and its operation (the lead's reading of it)."""
    m = _GROWTH.search(text)
    if m:
        c = m.group(1)
        return [Item("units", category=c, month=int(m.group(3))), Item("units", category=c, month=int(m.group(2)))], "minus"
    for pattern, read in _QUESTIONS:
        found = pattern.search(text)
        if found and read is not None:
            return read(found)
    return None


def plan_text(items: list[Item], op: str | None) -> str:
    lines = [f"1. {SCHEMA_READER}: the tables, their columns and how they join",
             f"2. {ANALYST}: " + "; ".join(i.text() for i in items)]
    if op is not None:
        lines.append(f"3. calculate: first {op} second")
    lines.append(f"{len(lines) + 1}. answer: the {'result' if op else 'name' if items[0].top else 'figure'}")
    return "Plan:\n" + "\n".join(lines)


@dataclass(frozen=True)
class Line:
    number: int
    tool: str
    text: str


def read_plan(text: str) -> list[Line]:
    return [Line(int(n), tool, rest.strip()) for n, tool, rest in PLAN_LINE.findall(text)]


def figures_of(report: str) -> list[str]:
    """The values of a report's figure lines, in order (a line whose label is no figure is not one)."""
    return [value.strip() for label, value in REPORT_LINE.findall(report) if read_item(label) is not None]


def _first(values: list[str]) -> str:
    return values[0] if values else ""


class Lead:
    """The lead's next reply: its plan, or the next line of it."""

    def __init__(self, question: str, calls: list[Call], chance: Any) -> None:
        self.question, self.calls, self.chance = question, calls, chance

    def reply(self) -> str:
        asked = read_question(self.question)
        if asked is None:
            return "I cannot tell which figures the question asks about."
        if not self.calls:
            items, op = asked
            return ask(SCHEMA_READER, SCHEMA_REQUEST, plan_text(items, op) + "\nI have the schema read first.")
        plan = read_plan(self.calls[0].thought) or read_plan(plan_text(*asked))
        done: dict[int, Call] = {}  # plan line index -> the call that carried it out
        retries = 0
        index = 0
        for call in self.calls:
            if index >= len(plan):
                break
            if call.result is not None and call.result.startswith("Tool '"):
                return f"I could not carry out step {plan[index].number} of my plan: {call.result}"
            if plan[index].tool == "calculate" and call.tool == "calculate" and not call.ok and retries < 2:
                retries += 1
                if call is self.calls[-1]:
                    return self.calculate(plan, done, typo=False)
                continue
            done[index] = call
            index += 1
        if index >= len(plan):
            return "My plan is done but it gives no answer."
        return self.step(plan, index, done)

    def step(self, plan: list[Line], index: int, done: dict[int, Call]) -> str:
        line = plan[index]
        if line.tool == SCHEMA_READER:
            return ask(SCHEMA_READER, SCHEMA_REQUEST, f"Step {line.number}: the schema.")
        if line.tool == "calculate":
            return self.calculate(plan, done, typo=self.chance("typographic-minus"))
        if line.tool == "answer":
            return self.answer(plan, done)
        # the data line (sql_analyst, or whatever tool the plan names for it)
        schema = next((c.result or "" for c in reversed(self.calls) if c.tool == SCHEMA_READER and c.ok), "")
        items = [part.strip() for part in line.text.split(";")]
        return ask(line.tool, data_request(items, schema), f"Step {line.number}: the figures, with the schema.")

    def figures(self, plan: list[Line], done: dict[int, Call]) -> tuple[list[str], list[str]] | str:
        """(the figures asked, their values) of the plan's data line, or why there are none."""
        data = next((i for i, line in enumerate(plan) if all(read_item(p) for p in line.text.split(";"))), None)
        if data is None or data not in done:
            return "My plan asks for no figures."
        asked = [p.strip() for p in plan[data].text.split(";")]
        values = figures_of(done[data].result or "")
        if len(values) < len(asked):
            return f"I could not get {', '.join(asked[len(values):])} from the database."
        return asked, values

    def calculate(self, plan: list[Line], done: dict[int, Call], typo: bool) -> str:
        got = self.figures(plan, done)
        if isinstance(got, str):
            return got
        line = next(line for line in plan if line.tool == "calculate")
        op = "minus" if "minus" in line.text else "plus"
        a, b = got[1][:2]
        sign = TYPO_MINUS if typo and op == "minus" else OPERATIONS[op]
        expression = f"{a} {sign} {b}"
        return render_call("calculate", {"expression": expression}, f"Step {line.number}: {expression}.")

    def answer(self, plan: list[Line], done: dict[int, Call]) -> str:
        got = self.figures(plan, done)
        if isinstance(got, str):
            return got
        asked, values = got
        calc = next((i for i, line in enumerate(plan) if line.tool == "calculate"), None)
        if calc is None:
            return f"From the database: {asked[0]} is {values[0]}.\nANSWER: {values[0]}"
        result = done[calc]
        if not result.ok:
            return f"I could not compute the answer: {result.result}"
        op = "minus" if "minus" in plan[calc].text else "plus"
        return (f"From the database: {asked[0]} ({values[0]}) {op} {asked[1]} ({values[1]}) = {result.result}.\n"
                f"ANSWER: {result.result}")


# -- the schema reader ---------------------------------------------------------------------------------
def schema_report(create: str) -> str:
    """The schema_reader's report of `read_schema`'s CREATE statements: one line a table."""
    lines = []
    for table, body in CREATE.findall(create):
        columns = []
        for part in body.split(", "):
            words = part.split()
            ref = re.search(r"REFERENCES (\w+)\((\w+)\)", part)
            columns.append(f"{words[0]} -> {ref.group(1)}.{ref.group(2)}" if ref else words[0])
        lines.append(f"{table}: {', '.join(columns)}")
    return "\n".join(lines)


def schema_reader(calls: list[Call]) -> str:
    reads = [c for c in calls if c.tool == "read_schema"]
    if not reads:
        return render_call("read_schema", {}, "Reading the schema.")
    if not reads[-1].ok:
        return f"I could not read the schema: {reads[-1].result}"
    return schema_report(reads[-1].result or "") or "The database has no tables."


# -- the analyst -----------------------------------------------------------------------------------------
@dataclass
class Schema:
    """The analyst's reading of a schema report: each role's table, its columns and where they point."""

    tables: dict[str, str]  # role -> table
    columns: dict[str, list[tuple[str, str | None]]]  # table -> [(column, referenced "table.column" or None)]

    @classmethod
    def read(cls, text: str) -> Schema:
        tables: dict[str, str] = {}
        columns: dict[str, list[tuple[str, str | None]]] = {}
        for table, body in SCHEMA_LINE.findall(text):
            role = ROLE_OF_TABLE.get(table)
            if role is None:
                continue
            tables.setdefault(role, table)
            columns[table] = [(p.split(" -> ")[0].strip(), p.split(" -> ")[1].strip() if " -> " in p else None)
                              for p in body.split(", ")]
        return cls(tables, columns)

    def table(self, role: str) -> str:
        return self.tables.get(role, DEFAULTS[role])

    def column(self, role: str, concept: str) -> str:
        for name, _ in self.columns.get(self.table(role), []):
            if CONCEPT_OF_COLUMN.get(name) == concept:
                return name
        return DEFAULTS[concept]

    def join(self, role: str) -> tuple[str, str]:
        """(the orders' column, the `role` table's column) the orders join `role` on, as the report says."""
        target = self.table(role)
        for name, ref in self.columns.get(self.table("orders"), []):
            if ref is not None and ref.split(".")[0] == target:
                return name, ref.split(".")[1]
        return DEFAULTS["customer_ref" if role == "customers" else "product_ref"], "id"


def sql_of(item: Item, schema: Schema, capitalised: bool = False) -> str:
    """The analyst's query for `item` (its text values lower case as stored, or as capitalised in the question)."""
    s = schema
    value = (lambda v: v.capitalize()) if capitalised else (lambda v: v.lower())
    customers = bool(item.city or item.top)
    products = bool(item.category or item.metric == "revenue")
    agg = {"revenue": f"SUM(s.{s.column('orders', 'qty')} * p.{s.column('products', 'price')})",
           "units": f"SUM(s.{s.column('orders', 'qty')})", "orders": "COUNT(*)"}[item.metric]
    sql = f" FROM {s.table('orders')} s"
    if customers:
        mine, theirs = s.join("customers")
        sql += f" JOIN {s.table('customers')} c ON s.{mine} = c.{theirs}"
    if products:
        mine, theirs = s.join("products")
        sql += f" JOIN {s.table('products')} p ON s.{mine} = p.{theirs}"
    where = []
    if item.city:
        where.append(f"c.{s.column('customers', 'city')} = '{value(item.city)}'")
    if item.category:
        where.append(f"p.{s.column('products', 'category')} = '{value(item.category)}'")
    if item.month is not None:
        where.append(f"s.{s.column('orders', 'month')} = {item.month}")
    if where:
        sql += " WHERE " + " AND ".join(where)
    if item.top:
        return (f"SELECT c.{s.column('customers', 'name')}, {agg} AS total{sql} GROUP BY c.{s.join('customers')[1]} "
                "ORDER BY total DESC LIMIT 3")
    return f"SELECT {agg} AS {item.metric}{sql}"


def first_value(result: str) -> str | None:
    """The first row's first value of a `run_sql` result (None: no row, or NULL)."""
    rows = (result or "").splitlines()[1:]
    if not rows or rows[0] == "(no rows)":
        return None
    value = rows[0].split(" | ")[0].strip()
    return None if value == "NULL" else value


def read_request(text: str) -> tuple[list[Item], Schema]:
    asked = [read_item(line) for line in re.findall(r"^- (.+)$", text, re.M)]
    schema = text.split("\nSchema:\n", 1)[1] if "\nSchema:\n" in text else ""
    return [i for i in asked if i is not None], Schema.read(schema)


def sql_analyst(request: str, calls: list[Call], chance: Any) -> str:
    items, schema = read_request(request)
    if not items:
        return "The request names no figure to find."
    queries = [c for c in calls if c.tool == "run_sql"]
    lines, pointer = [], 0
    for item in items:
        value, tries = None, 0
        while pointer < len(queries) and value is None:
            query = queries[pointer]
            pointer += 1
            tries += 1
            if not query.ok:
                return f"The query for {item.text()} failed: {query.result}"
            value = first_value(query.result or "")
        if value is None:
            if tries >= 3:
                return f"The query for {item.text()} returned no rows."
            text_filter = bool(item.city or item.category)
            capitalised = tries == 0 and text_filter and chance(f"capitalised-value:{item.text()}")
            return render_call("run_sql", {"query": sql_of(item, schema, capitalised)},
                               f"Querying {item.text()}." if tries == 0 else "No row matched; the data is in lower case.")
        lines.append(f"{item.text()}: {value}")
    return "\n".join(lines)


class TeamPolicy:
    """The simulated lead, schema reader and analyst: `respond(agent, request, sim) -> text` (an action, or a message)."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls = history(messages)
        if agent == "lead":
            return Lead(user, calls, chance).reply()
        if agent == SCHEMA_READER:
            return schema_reader(calls)
        if agent == ANALYST:
            return sql_analyst(user, calls, chance)
        raise ValueError(f"sql_desk: no simulated agent {agent!r}")
