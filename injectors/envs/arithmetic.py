"""A safe evaluator for the calculator tools: numbers, + - * /, unary minus, parentheses.

Never `eval`: a tool's argument comes from an agent (or an injected error)."""

from __future__ import annotations

import ast
import operator

from faultlens.middleware.model.trace import Task

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def arithmetic_value(expression: str) -> int | float:
    """The value of an arithmetic expression.

    Raises SyntaxError for text that does not parse, ValueError for anything but
    numbers and + - * /, ZeroDivisionError, and RecursionError for absurd nesting.
    """

    def ev(node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError("unsupported")

    return ev(ast.parse(expression, mode="eval").body)


def calculate(expression: str, task: Task) -> str:
    """The calculator tool of the research and chart environments: + - * / over numbers (commas allowed in numbers)."""
    try:
        value = arithmetic_value(expression.replace(",", "").strip())
    except (SyntaxError, ValueError, ZeroDivisionError):
        return f"Cannot evaluate {expression.strip()!r}: only numbers and + - * / are allowed."
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}"
