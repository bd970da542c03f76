"""The Haystack components of `docs_team` that are ours: the lead's calculator (imported only with Haystack)."""

from __future__ import annotations

from haystack import component

from .calculator import calculate


@component
class Calculator:
    """The value of an arithmetic expression of numbers and + - * /."""

    @component.output_types(value=str)
    def run(self, expression: str) -> dict[str, str]:
        """:param expression: the arithmetic expression, e.g. '412 - 300'."""
        return {"value": calculate(expression)}
