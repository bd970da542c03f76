"""The store behind `supervisor_team`: its catalogue, the task families, the workers' tools and the texts agents share.

A task asks for a figure over two items of the store's catalogue (a total, a
difference of two orders, what is left of a budget). The researcher looks up
unit prices (or shipping costs) with `lookup_price` / `lookup_shipping`; the
calculator evaluates the supervisor's arithmetic with `calculate`. The answer
is computed here, from the task's catalogue, never by an agent.
"""

from __future__ import annotations

import ast
import operator
import random
import re
from decimal import Decimal
from typing import Any

ITEMS = ("widget", "gadget", "bracket", "hinge", "valve", "gasket", "spring", "washer")
FAMILIES = ("total", "difference", "budget")
WORKERS = ("researcher", "calculator")

# What the agents write and read (the simulated agents parse each other's texts with these).
LOOKUP_BRIEF = re.compile(r"look up the (unit prices|shipping costs) of: ([a-z, ]+)\.")
PLAN_LOOKUP = re.compile(r"^1\. (\w+): look up the (unit prices|shipping costs) of ([a-z, ]+?)\.$", re.M)
PLAN_FORMULA = re.compile(r"^2\. calculator: compute (.+?)\.$", re.M)
COMPUTE_BRIEF = re.compile(r"compute: (.+?)\.?$", re.M)
FIGURE = re.compile(r"\b([a-z]+) \$(\d+\.\d\d)")
RESULT = re.compile(r"^Result: (-?\d+(?:\.\d+)?)$", re.M)


def money(value: Decimal | float) -> str:
    return f"{Decimal(str(value)).quantize(Decimal('0.01'))}"


def make_task(rng: random.Random, family: str) -> tuple[str, str, dict[str, Any]]:
    """(question, reference answer, metadata) of one task of `family`: the catalogue, the items, the quantities."""
    catalogue = {item: {"price": money(Decimal(rng.randint(150, 2500)) / 100),
                        "shipping": money(Decimal(rng.randint(20, 140)) / 100)} for item in ITEMS}
    a, b = rng.sample(ITEMS, 2)
    qa, qb = rng.sample(range(2, 7), 2)
    pa, pb = Decimal(catalogue[a]["price"]), Decimal(catalogue[b]["price"])
    if family == "total":
        question = f"What do {qa} {a}s and {qb} {b}s cost in total at the store's unit prices?"
        formula, answer = f"{qa} * {a} + {qb} * {b}", qa * pa + qb * pb
    elif family == "difference":
        question = f"How much more do {qa} {a}s cost than {qb} {b}s at the store's unit prices?"
        formula, answer = f"{qa} * {a} - {qb} * {b}", qa * pa - qb * pb
    else:
        budget = int(qa * pa + qb * pb) + rng.randint(5, 60)
        question = f"With a budget of ${budget}, how much is left after buying {qa} {a}s and {qb} {b}s at the store's unit prices?"
        formula, answer = f"{budget} - ({qa} * {a} + {qb} * {b})", budget - (qa * pa + qb * pb)
    meta = {"catalogue": catalogue, "items": [a, b], "formula": formula}
    return question, money(answer), meta


def read_question(question: str) -> tuple[list[str], str]:
    """The items a question names and the formula over them that answers it (what the supervisor plans)."""
    found = re.findall(r"(\d+) (%s)s\b" % "|".join(ITEMS), question)
    (qa, a), (qb, b) = (found + found)[:2]
    if "how much more" in question.lower():
        return [a, b], f"{qa} * {a} - {qb} * {b}"
    budget = re.search(r"budget of \$(\d+)", question)
    if budget:
        return [a, b], f"{budget.group(1)} - ({qa} * {a} + {qb} * {b})"
    return [a, b], f"{qa} * {a} + {qb} * {b}"


def lookup(catalogue: dict[str, dict[str, str]], item: str, what: str) -> str:
    """A look-up tool's output: an item's unit price or shipping cost, or the items that exist."""
    entry = catalogue.get(item.strip())
    if entry is None:
        return f"unknown item {item!r}; items: {', '.join(catalogue)}"
    return f"{item.strip()}: ${entry[what]} {'per unit' if what == 'price' else 'shipping per unit'}"


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _value(node: ast.AST) -> Decimal:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Decimal(str(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    raise ValueError("only numbers and + - * / are allowed")


def calculate(expression: str) -> str:
    """The calculator's tool: an arithmetic expression's value (exact decimals), or why it cannot be computed."""
    try:
        value = _value(ast.parse(expression.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ArithmeticError) as exc:
        return f"cannot compute {expression!r}: {exc}"
    return f"{expression.strip()} = {money(value)}"
