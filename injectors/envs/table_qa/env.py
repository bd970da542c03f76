"""`table_qa`: one analyst answers questions about a generated sales table by writing Python.

Each task has its own table `orders(id, region, category, year, units, price)`
(36 rows, generated from the seed), available to the code as `orders.csv` and
`orders.db` (SQLite) in the working directory. The only tool, `run_python`,
runs the agent's code in a fresh `python -I` subprocess with a 10 s limit and
returns stdout (or the traceback).

The analyst's run (simulated policy; a real LLM gets the same prompts):

1. a plan (`- filter COL = VALUE`, `- compute OP of EXPR [by COL]` lines);
2. code that runs the plan as SQL (the code follows the plan it wrote, so a bad
   plan is carried forward);
3. a check: it counts the rows its query's WHERE clause matches; zero rows (or
   a traceback or an empty result at step 2) make it rewrite the code from the
   plan, at most twice: this is the verification that catches some errors;
4. `Answer: <value>`.

Recovered mistakes in seeds: with probability `noise` the first code misspells
a column or a value, crashes or matches nothing, and is rewritten.
"""

from __future__ import annotations

import csv
import io
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task

from faultlens.injectors.generators import slip_text
from ..registry import register
from ..base import (
    Conversation,
    Environment,
    Runtime,
    ToolSpec,
    parse_action,
    render_action,
    stable_seed,
)
from . import mistakes
from .world import CATEGORIES, REGIONS, YEARS

COLUMNS = ["id", "region", "category", "year", "units", "price"]
NUMERIC = {"id", "year", "units", "price"}
TIME_LIMIT_S = 10.0

_DIRS: dict[str, Path] = {}


def _table_dir(task: Task) -> Path:
    """A directory holding the task's orders.csv and orders.db (made once per process)."""
    key = task.id or "task"
    if key in _DIRS and _DIRS[key].exists():
        return _DIRS[key]
    path = Path(tempfile.mkdtemp(prefix=f"faultlens-table-{key}-"))
    rows = task.metadata["rows"]
    with open(path / "orders.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    con = sqlite3.connect(path / "orders.db")
    con.execute("CREATE TABLE orders (id INTEGER, region TEXT, category TEXT, year INTEGER, units INTEGER, price REAL)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    _DIRS[key] = path
    return path


def run_python(code: str, task: Task) -> str:
    """Run `code` in a subprocess in the task's table directory; stdout or the traceback."""
    workdir = _table_dir(task)
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0"}
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=workdir, capture_output=True, text=True,
                              timeout=TIME_LIMIT_S, env=env)
    except subprocess.TimeoutExpired:
        return f"Timed out after {TIME_LIMIT_S:.0f} s."
    out = proc.stdout.strip()
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-3:])
        return (out + "\n" if out else "") + tail
    return out if out else "(no output)"


# ---------------------------------------------------------------- questions

def _sql_value(col: str, value: str) -> str:
    return value if col in NUMERIC else f"'{value}'"


def _make_task(rng: random.Random, index: int, seed: int) -> Task:
    rows = []
    for i in range(36):
        rows.append([i + 1, rng.choice(REGIONS), rng.choice(CATEGORIES), rng.choice(YEARS), rng.randint(1, 40),
                     round(rng.uniform(2, 120), 2)])
    kind = ["sum", "avg", "count", "argmax", "revenue"][index % 5]
    region, category, year = rng.choice(REGIONS), rng.choice(CATEGORIES), rng.choice(YEARS)
    threshold = rng.choice([10, 15, 20, 25, 30])
    if kind == "sum":
        q = f"What is the total number of units sold in the {region} region in {year}?"
        plan = [("filter", "region", "=", region), ("filter", "year", "=", str(year)), ("compute", "sum", "units", "")]
    elif kind == "avg":
        q = f"What is the average unit price of {category} orders, rounded to 2 decimals?"
        plan = [("filter", "category", "=", category), ("compute", "avg", "price", "")]
    elif kind == "count":
        q = f"How many orders in {year} had more than {threshold} units?"
        plan = [("filter", "year", "=", str(year)), ("filter", "units", ">", str(threshold)), ("compute", "count", "rows", "")]
    elif kind == "argmax":
        q = f"Which region sold the most units of {category} products?"
        plan = [("filter", "category", "=", category), ("compute", "sum", "units", "region")]
    else:
        q = f"What was the total revenue (units times price) of {category} orders in {year}, rounded to 2 decimals?"
        plan = [("filter", "category", "=", category), ("filter", "year", "=", str(year)), ("compute", "sum", "units * price", "")]
    answer = _evaluate_plan(rows, plan)
    if answer in (None, "None"):
        return None  # type: ignore[return-value]
    return Task(id=f"table_qa-{seed}-{index}", query=q, reference_answer=answer,
                metadata={"rows": rows, "question_kind": kind, "plan": [list(p) for p in plan]})


def _evaluate_plan(rows: list[list], plan: list[tuple[str, str, str, str]]) -> str | None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE orders (id INTEGER, region TEXT, category TEXT, year INTEGER, units INTEGER, price REAL)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", rows)
    sql = plan_sql(render_plan(plan))
    if sql is None:
        return None
    row = con.execute(sql).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def render_plan(plan: list[tuple[str, str, str, str]]) -> str:
    lines = ["Plan:"]
    for op, a, b, c in plan:
        if op == "filter":
            lines.append(f"- filter {a} {b} {c}")
        else:
            lines.append(f"- compute {a} of {b}" + (f" by {c}, take the largest" if c else ""))
    lines.append("- report the value")
    return "\n".join(lines)


_FILTER = re.compile(r"^- filter (\w+) (=|>|<) (.+?)\s*$", re.M)
_COMPUTE = re.compile(r"^- compute (sum|avg|count|max|min) of (.+?)(?: by (\w+), take the (largest|smallest))?\s*$", re.M)


def plan_sql(plan_text: str) -> str | None:
    """The SQL a plan describes (how the analyst turns its plan into code)."""
    compute = _COMPUTE.search(plan_text)
    if compute is None:
        return None
    op, expr, by, order = compute.groups()
    where = [f"{col} {cmp} {_sql_value(col, val.strip(chr(39)))}" for col, cmp, val in _FILTER.findall(plan_text)]
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    agg = "COUNT(*)" if op == "count" else f"{op.upper()}({expr})"
    if op in ("avg",) or "*" in expr or expr == "price":
        agg = f"ROUND({agg}, 2)"
    if by:
        direction = "DESC" if order == "largest" else "ASC"
        return f"SELECT {by}, {agg} AS total FROM orders{clause} GROUP BY {by} ORDER BY total {direction}, {by} LIMIT 1"
    return f"SELECT {agg} FROM orders{clause}"


def main_code(sql: str) -> str:
    return f'import sqlite3\ncon = sqlite3.connect("orders.db")\nrow = con.execute("{sql}").fetchone()\nprint(row[0])'


def check_code(sql: str) -> str:
    where = sql.split(" WHERE ", 1)[1].split(" GROUP BY ")[0] if " WHERE " in sql else "1"
    return ('# check: count the rows the query matches\nimport sqlite3\ncon = sqlite3.connect("orders.db")\n'
            f'print(con.execute("SELECT COUNT(*) FROM orders WHERE {where}").fetchone()[0])')


_SQL_IN_CODE = re.compile(r'execute\("(.+?)"\)')


# ---------------------------------------------------------------- the simulated analyst

class AnalystPolicy:
    """The simulated analyst: plans, codes from its plan, checks, answers."""

    def respond(self, ctx) -> str:
        msgs = ctx.messages
        assistant = [m["content"] for m in msgs if m["role"] == "assistant"]
        question = ctx.task_text.split("Question: ", 1)[-1].split("\n", 1)[0]
        plans = [a for a in assistant if a.startswith("Plan:")]
        if not plans:
            looked = sum(1 for a in assistant if (p := parse_action(a)) is not None and p.argument.startswith("# look"))
            wanted = explorations(ctx.config.seed, ctx.task_text)
            if looked < len(wanted):
                # Many runs look at the data before planning, in varied ways (as real analysts do), so the plan
                # is not always the first step.
                thought, code = EXPLORES[wanted[looked]]
                return slip_text(ctx, StepKind.tool_call, render_action("run_python", code, thought, code=True))
            text = render_plan(_plan_from_question(question) or [("compute", "count", "rows", "")])
            return slip_text(ctx, StepKind.plan, text)
        plan_text = plans[0]
        parsed = [(i, parse_action(a)) for i, a in enumerate(assistant)]
        actions = [(i, a) for i, a in parsed if a is not None and not a.argument.startswith("# look")]
        sql = plan_sql(plan_text)
        if not actions:
            return self._main(ctx, sql, first=True)
        last_action = actions[-1][1]
        last_output = msgs[-1]["content"].split("\n", 1)[-1] if msgs[-1]["role"] == "user" else ""
        mains = [a for _, a in actions if not a.argument.startswith("# check")]
        retries = len(mains) - 1
        if not last_action.argument.startswith("# check"):
            if code_failed(last_output):
                if retries >= 2:
                    return slip_text(ctx, StepKind.final_answer, "I could not get a result from the table.\nAnswer: unknown")
                return self._main(ctx, sql, first=False)
            executed = _SQL_IN_CODE.search(last_action.argument)
            check = check_code(executed.group(1) if executed else (sql or ""))
            return slip_text(ctx, StepKind.tool_call, render_action("run_python", check, "Let me check how many rows the query matches.", code=True))
        # after a check: zero rows means the filter is off, rewrite from the plan
        if last_output.strip() in ("0", "") or code_failed(last_output):
            if retries >= 2:
                return slip_text(ctx, StepKind.final_answer, "I could not get a result from the table.\nAnswer: unknown")
            return self._main(ctx, sql, first=False, thought="No rows matched; let me rewrite the query from the plan.")
        main_output = _output_after(msgs, mains[-1])
        value = main_output.strip().splitlines()[-1] if main_output.strip() else "unknown"
        return slip_text(ctx, StepKind.final_answer, f"The query matched {last_output.strip()} rows.\nAnswer: {value}")

    def _main(self, ctx, sql: str | None, first: bool, thought: str = "I will run the plan as SQL.") -> str:
        if sql is None:
            return "The plan has no computation I can run.\nAnswer: unknown"
        if first and ctx.noise("code"):
            # a recovered slip: a misspelt column or value; the check or the traceback catches it
            rng = ctx.rng("typo")
            if rng.random() < 0.5:
                sql = re.sub(r"\bunits\b|\bprice\b|\byear\b", lambda m: {"units": "unit", "price": "prices", "year": "years"}[m.group(0)], sql, count=1)
            else:
                sql = re.sub(r"'(\w)(\w+)'", lambda m: f"'{m.group(1).lower()}{m.group(2)}'" if m.group(1).isupper() else f"'{m.group(1).upper()}{m.group(2)}'", sql, count=1)
        return slip_text(ctx, StepKind.tool_call, render_action("run_python", main_code(sql), thought, code=True))


_CONNECT = 'import sqlite3\ncon = sqlite3.connect("orders.db")\n'
# Ways of looking at the data before planning: (thought, code). Outputs are read, never acted on.
EXPLORES = [
    ("Let me look at a few rows first.",
     '# look at the data\n' + _CONNECT + 'for row in con.execute("SELECT * FROM orders LIMIT 3"):\n    print(row)'),
    ("Let me check the columns of the table.",
     '# look at the columns\n' + _CONNECT + 'print([c[1] for c in con.execute("PRAGMA table_info(orders)")])'),
    ("Let me see how many orders there are.",
     '# look at the size\n' + _CONNECT + 'print(con.execute("SELECT COUNT(*) FROM orders").fetchone()[0])'),
    ("Let me see which regions and categories occur.",
     '# look at the values\n' + _CONNECT + 'print(sorted({r[0] for r in con.execute("SELECT region FROM orders")}))\n'
     'print(sorted({r[0] for r in con.execute("SELECT category FROM orders")}))'),
    ("Let me see the range of years and units.",
     '# look at the ranges\n' + _CONNECT + 'print(con.execute("SELECT MIN(year), MAX(year), MIN(units), MAX(units) FROM orders").fetchone())'),
]
# How many looks a run takes before its plan (drawn per task and agent seed): none to four, evenly.
EXPLORE_COUNTS = [0, 1, 2, 3, 4]


def explorations(sim_seed: int, task_text: str) -> list[int]:
    """Which `EXPLORES` a run uses before planning, in order (a function of the agents' seed and the task)."""
    rng = random.Random(stable_seed("table_qa-explore", sim_seed, task_text))
    count = rng.choice(EXPLORE_COUNTS)
    return rng.sample(range(len(EXPLORES)), count)


def code_failed(output: str) -> bool:
    """Whether the code's output is a crash, a timeout, an unknown tool or nothing: what makes the analyst rewrite its code."""
    return ("Traceback" in output or re.search(r"^[\w.]+(Error|Exception): ", output, re.M) is not None or output.strip() in ("None", "(no output)", "") or output.startswith("Timed out")
            or output.startswith("Unknown tool"))


def _output_after(messages: list[dict], action) -> str:
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and (a := parse_action(m["content"])) is not None and a == action:
            if i + 1 < len(messages):
                return messages[i + 1]["content"].split("\n", 1)[-1]
    return ""


_Q = [
    (re.compile(r"total number of units sold in the (\w+) region in (\d{4})"),
     lambda m: [("filter", "region", "=", m[1]), ("filter", "year", "=", m[2]), ("compute", "sum", "units", "")]),
    (re.compile(r"average unit price of (\w+) orders"),
     lambda m: [("filter", "category", "=", m[1]), ("compute", "avg", "price", "")]),
    (re.compile(r"How many orders in (\d{4}) had more than (\d+) units"),
     lambda m: [("filter", "year", "=", m[1]), ("filter", "units", ">", m[2]), ("compute", "count", "rows", "")]),
    (re.compile(r"Which region sold the most units of (\w+) products"),
     lambda m: [("filter", "category", "=", m[1]), ("compute", "sum", "units", "region")]),
    (re.compile(r"total revenue \(units times price\) of (\w+) orders in (\d{4})"),
     lambda m: [("filter", "category", "=", m[1]), ("filter", "year", "=", m[2]), ("compute", "sum", "units * price", "")]),
]


def _plan_from_question(question: str):
    for pattern, make in _Q:
        m = pattern.search(question)
        if m:
            return make(m)
    return None


# ---------------------------------------------------------------- the environment

@register
class TableQA(Environment):
    name = "table_qa"
    stands_in_for = "table QA with code (WikiTableQuestions)"
    modality = "text"
    topology = "single"
    description = "one analyst writes Python (SQL over SQLite) to answer questions about a generated sales table"
    not_applicable = {
        "A.3": "a made-up tool gets the list of real tools and the analyst re-runs its code with run_python (0/44 kept)",
        "A.6": "re-running the same code prints the same value; the run goes on unchanged (0/43 kept)",
        "V.2": "a weakened check only matters when the query is already wrong, and seeds' queries are right (0/42 kept)",
    }
    agents = [AgentInfo(name="analyst", role="data analyst", description="plans, writes and runs Python, checks, answers")]
    tools = {"run_python": ToolSpec("run_python", "run Python code in the table's directory (orders.csv, orders.db); returns stdout",
                                    "code", run_python)}

    def tasks(self, seed: int, n: int) -> list[Task]:
        rng = random.Random(seed)
        out: list[Task] = []
        index = 0
        while len(out) < n:
            task = _make_task(rng, index, seed)
            index += 1
            if task is not None:
                out.append(task)
        return out

    def system_prompt(self, agent: str, task: Task) -> str:
        return (
            "You are the analyst of a small data team. You answer questions about the table "
            "orders(id, region, category, year, units, price), stored as orders.csv and as the SQLite database orders.db "
            "in your working directory.\n"
            "Work in this order: (0) optionally look at a few rows with code first; (1) reply with a plan: 'Plan:' then lines '- filter COLUMN = VALUE' and one line "
            "'- compute sum|avg|count of EXPRESSION [by COLUMN, take the largest]'; (2) run code by replying "
            "'Action: run_python' followed by a ```python block that prints the value; (3) check your query by counting "
            "the rows it matches; (4) reply with a last line 'Answer: <value>' (a bare number or name)."
        )

    def program(self, task: Task, rt: Runtime) -> str | None:
        conv = Conversation().user(f"Question: {task.query}\nYou may look at the data first; then reply with your plan.")
        for _ in range(12):
            reply = rt.ask("analyst", conv.messages, kind=_kind_of_reply)
            conv.assistant(reply)
            if parse_action(reply) is not None:
                output = rt.act("analyst", reply)
                conv.user(f"Output of run_python:\n{output}")
                continue
            answer = final_answer(reply)
            if answer is not None:
                return answer
            conv.user("Continue: run your plan.")
        return None

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        ok = answer is not None and same_value(answer, task.reference_answer or "")
        return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator="table_qa.exact",
                       detail=f"expected {task.reference_answer!r}, got {answer!r}")

    def policy(self) -> AnalystPolicy:
        return AnalystPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [REGIONS, CATEGORIES, [str(y) for y in YEARS], ["units", "price"], ["sum", "avg"], ["largest", "smallest"]]

    def mutators(self):
        return mistakes.MUTATORS


_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)


def _kind_of_reply(text: str) -> StepKind:
    if final_answer(text) is not None:
        return StepKind.final_answer
    return StepKind.plan if text.startswith("Plan:") else StepKind.message


def final_answer(text: str) -> str | None:
    match = _ANSWER.search(text)
    return match.group(1) if match else None


def same_value(answer: str, reference: str) -> bool:
    """Numbers match within 0.01; names match case-insensitively. No partial credit."""
    try:
        return abs(float(answer.replace(",", "")) - float(reference)) <= 0.01
    except ValueError:
        return answer.strip().lower() == reference.strip().lower()


def table_csv(task: Task) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerows([COLUMNS, *task.metadata["rows"]])
    return buf.getvalue()
