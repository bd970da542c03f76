"""The math world: word problems with units, the calculator and converter tools, and the plan format the agent and the error generators share."""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import Task

from ..arithmetic import arithmetic_value

_FACTORS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0), "km": ("length", 1000.0), "cm": ("length", 0.01), "mm": ("length", 0.001),
    "mi": ("length", 1609.344), "ft": ("length", 0.3048), "in": ("length", 0.0254), "yd": ("length", 0.9144),
    "kg": ("mass", 1.0), "g": ("mass", 0.001), "lb": ("mass", 0.45359237), "oz": ("mass", 0.028349523125),
    "L": ("volume", 1.0), "mL": ("volume", 0.001), "gal": ("volume", 3.785411784), "qt": ("volume", 0.946352946),
    "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0),
    "m2": ("area", 1.0), "ft2": ("area", 0.09290304),
    "km/h": ("speed", 1000 / 3600), "mph": ("speed", 0.44704), "m/s": ("speed", 1.0),
}
_TEMPS = {"C", "F", "K"}
UNITS = sorted(_FACTORS) + sorted(_TEMPS)
UNIT_GROUPS = [["m", "km", "cm", "mi", "ft", "in", "yd"], ["kg", "g", "lb", "oz"], ["L", "mL", "gal", "qt"],
               ["s", "min", "h"], ["km/h", "mph", "m/s"], ["C", "F", "K"]]


def fmt(value: float) -> str:
    """A number as the tools print it: at most 4 decimals, no trailing zeros."""
    text = f"{round(value, 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _to_kelvin(v: float, unit: str) -> float:
    return {"K": v, "C": v + 273.15, "F": (v - 32) * 5 / 9 + 273.15}[unit]


def _from_kelvin(v: float, unit: str) -> float:
    return {"K": v, "C": v - 273.15, "F": (v - 273.15) * 9 / 5 + 32}[unit]


_CONVERT = re.compile(r"^\s*(-?[\d.]+)\s*([A-Za-z/0-9]+)\s+to\s+([A-Za-z/0-9]+)\s*$")


def convert_value(value: float, src: str, dst: str) -> float:
    if src in _TEMPS and dst in _TEMPS:
        return _from_kelvin(_to_kelvin(value, src), dst)
    return value * _FACTORS[src][1] / _FACTORS[dst][1]


def convert(argument: str, task: Task) -> str:
    """`<number> <unit> to <unit>` → `<number> <unit> = <value> <unit>`."""
    m = _CONVERT.match(argument.strip().splitlines()[0] if argument.strip() else "")
    if m is None:
        return "Cannot parse the conversion; write '<number> <unit> to <unit>', e.g. '12 ft to m'."
    raw, src, dst = m.groups()
    for unit in (src, dst):
        if unit not in _FACTORS and unit not in _TEMPS:
            return f"Unknown unit '{unit}'. Units: {', '.join(UNITS)}."
    same = (src in _TEMPS and dst in _TEMPS) or (src in _FACTORS and dst in _FACTORS and _FACTORS[src][0] == _FACTORS[dst][0])
    if not same:
        return f"Cannot convert {src} to {dst}: they measure different things."
    try:
        value = float(raw)
    except ValueError:
        return f"Cannot read the number {raw!r}."
    return f"{raw} {src} = {fmt(convert_value(value, src, dst))} {dst}"


def calculate(expression: str, task: Task) -> str:
    """Evaluate `+ - * / ( )` over numbers."""
    text = expression.strip().splitlines()[0] if expression.strip() else ""
    try:
        value = arithmetic_value(text.replace(",", ""))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return f"Cannot evaluate {text!r}: use numbers, + - * / and parentheses."
    return fmt(float(value))


# ---------------------------------------------------------------- problems

# A plan is a list of lines: ("convert", "<number> <unit> to <unit>", name) | ("calculate", expr, name) | ("answer", name, unit)
PlanLine = tuple[str, str, str]


def tool_value(op: str, output: str) -> str | None:
    """The number a tool output gives, or None (an error message)."""
    out = output.strip()
    if op == "calculate":
        return out if re.fullmatch(r"-?\d+(\.\d+)?", out) else None
    m = re.search(r"= (-?\d+(?:\.\d+)?) \S+$", out)
    if m:
        return m.group(1)
    return out if re.fullmatch(r"-?\d+(\.\d+)?", out) else None


# ---------------------------------------------------------------- plan text

_PLAN_LINE = re.compile(r"^(\d+)\. (convert|calculate|answer) (.+?)(?: -> (\w+)| in (\S+))\s*$", re.M)


def render_plan(plan: list[PlanLine]) -> str:
    lines = ["Plan:"]
    for i, (op, arg, name) in enumerate(plan, 1):
        lines.append(f"{i}. answer {arg} in {name}" if op == "answer" else f"{i}. {op} {arg} -> {name}")
    return "\n".join(lines)


def parse_plan(text: str) -> list[PlanLine]:
    out = []
    for _, op, arg, name, unit in _PLAN_LINE.findall(text):
        out.append((op, arg.strip(), unit if op == "answer" else name))
    return out
