"""The travel desk's world in `adk_team`: hotels, fares and exchange rates of a task, its question, the tools over
them, and the reference answer computed by us.

Each task draws its own rates (so an agent must read them) and asks one of three quantities of one trip: the total
cost in EUR, the cost per traveller, or what is left of a budget. `reference` evaluates the same expression the
budget agent writes, with the same rounding, so a correct run matches it to the cent.
"""

from __future__ import annotations

import ast
import json
import operator
import random
from typing import Any

FAMILIES = ("total", "per_person", "remaining")
HOTELS = ("Hotel Aurora", "Harbour Inn", "Casa Verde", "Park Lodge", "Grand Meridian", "Old Town Suites")
CITIES = ("Lisbon", "Porto", "Seville", "Valencia", "Nice", "Naples")
ORIGINS = ("Oslo", "Zurich", "London", "Prague", "Warsaw", "Dublin")
CURRENCIES = ("USD", "GBP", "CHF", "NOK", "PLN", "CZK")
# What a plan's goal line says for each family (the coordinator's brief and the budget agent's formula follow it).
GOALS = {"total": "the total cost of the trip in EUR",
         "per_person": "the cost per traveller in EUR",
         "remaining": "what is left of the budget in EUR after the trip"}


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the customer's question, the world of the task) for one task of `family`."""
    hotels = list(HOTELS)
    rng.shuffle(hotels)
    cities = list(CITIES)
    rng.shuffle(cities)
    currencies = list(CURRENCIES)
    rng.shuffle(currencies)
    hotel_table = {h: {"city": cities[i % len(cities)], "nightly_rate": round(rng.uniform(60, 240), 2),
                       "package_per_person": round(rng.uniform(90, 300), 2), "currency": currencies[0]}
                   for i, h in enumerate(hotels[:4])}
    hotel = hotels[0]
    city = hotel_table[hotel]["city"]
    origin = rng.choice(ORIGINS)
    fares = {f"{o}-{c}": round(rng.uniform(90, 480), 2) for o in ORIGINS for c in (city, cities[1])}
    fx = {c: round(rng.uniform(0.08, 1.25), 4) for c in CURRENCIES}
    travellers = rng.randint(2, 6)
    rooms = rng.randint(1, max(1, travellers - 1))
    nights = rng.randint(2, 7)
    trip = {"hotel": hotel, "city": city, "origin": origin, "travellers": travellers, "rooms": rooms, "nights": nights,
            "fare_currency": currencies[1]}
    budget = None
    world: dict[str, Any] = {"hotels": hotel_table, "fares": fares, "fare_currency": currencies[1], "fx": fx,
                             "trip": trip, "family": family}
    if family == "remaining":
        budget = float(round(rng.uniform(1.2, 2.0) * _total(world), -2))
        trip["budget"] = budget
    ask = {"total": "What is the total cost of the trip in EUR?",
           "per_person": "What does the trip cost per traveller, in EUR?",
           "remaining": f"Our budget is {budget or 0:.2f} EUR: how much of it is left after the trip?"}[family]
    question = (f"We are {travellers} travellers flying return from {origin} to {city} and staying {nights} nights at "
                f"{hotel} in {rooms} room{'s' if rooms > 1 else ''} (room only). {ask} Round to the cent.")
    return question, world


def _total(world: dict[str, Any]) -> float:
    return evaluate(expression(world, "total"))


def figures(world: dict[str, Any]) -> dict[str, Any]:
    """The figures a correct run reads from the tools."""
    t = world["trip"]
    hotel = world["hotels"][t["hotel"]]
    return {"rate": hotel["nightly_rate"], "rate_currency": hotel["currency"],
            "fare": world["fares"][f"{t['origin']}-{t['city']}"], "fare_currency": world["fare_currency"],
            "fx_rate": world["fx"][hotel["currency"]], "fx_fare": world["fx"][world["fare_currency"]]}


def formula(goal: str, rooms: int, nights: int, travellers: int, rate: float | None, fx_rate: float | None,
            fare: float | None, fx_fare: float | None, budget: float | None) -> str:
    """The budget agent's expression for `goal` (a family name) over the figures it has (a missing one is left out)."""
    parts = []
    if rate is not None and fx_rate is not None:
        parts.append(f"{rooms} * {nights} * {rate} * {fx_rate}")
    if fare is not None and fx_fare is not None:
        parts.append(f"{travellers} * {fare} * {fx_fare}")
    total = " + ".join(parts) or "0"
    if goal == "per_person":
        return f"({total}) / {travellers}"
    if goal == "remaining":
        return f"{budget} - ({total})"
    return total


def expression(world: dict[str, Any], goal: str | None = None) -> str:
    t, f = world["trip"], figures(world)
    return formula(goal or world["family"], t["rooms"], t["nights"], t["travellers"], f["rate"], f["fx_rate"], f["fare"],
                   f["fx_fare"], t.get("budget"))


def reference(world: dict[str, Any]) -> str:
    return f"{evaluate(expression(world)):.2f}"


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(text: str) -> float:
    """An arithmetic expression's value rounded to the cent (what `calculate` computes); ValueError if it is not one."""
    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ValueError("only numbers and + - * / ( ) are allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {text!r}: {exc.msg}") from None
    try:
        return round(walk(tree), 2)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None


class Desk:
    """The tools of one run over the task's world (deterministic), keeping each call's output by call id."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world
        self.outputs: dict[str, str] = {}

    def hotel_rate(self, hotel: str) -> dict[str, Any]:
        row = self.world["hotels"].get(hotel)
        if row is None:
            return {"error": f"unknown hotel {hotel!r}; hotels: {', '.join(self.world['hotels'])}"}
        return {"hotel": hotel, "city": row["city"], "nightly_rate_per_room": row["nightly_rate"], "currency": row["currency"]}

    def hotel_package(self, hotel: str) -> dict[str, Any]:
        row = self.world["hotels"].get(hotel)
        if row is None:
            return {"error": f"unknown hotel {hotel!r}; hotels: {', '.join(self.world['hotels'])}"}
        return {"hotel": hotel, "city": row["city"], "package_per_person_per_night": row["package_per_person"],
                "includes": "room share, breakfast and dinner", "currency": row["currency"]}

    def flight_fare(self, origin: str, destination: str) -> dict[str, Any]:
        fare = self.world["fares"].get(f"{origin}-{destination}")
        if fare is None:
            return {"error": f"no fare {origin!r} to {destination!r}; routes: {', '.join(sorted(self.world['fares']))}"}
        return {"route": f"{origin}-{destination}", "return_fare_per_person": fare, "currency": self.world["fare_currency"]}

    def fx_rate(self, currency: str) -> dict[str, Any]:
        rate = self.world["fx"].get(currency)
        if rate is None:
            return {"error": f"unknown currency {currency!r}; currencies: {', '.join(sorted(self.world['fx']))}"}
        return {"currency": currency, "eur_per_unit": rate}

    def calculate(self, expression: str) -> dict[str, Any]:
        try:
            return {"expression": expression, "result": evaluate(expression)}
        except ValueError as exc:
            return {"error": str(exc)}

    def keep(self, call_id: str | None, output: dict[str, Any]) -> dict[str, Any]:
        if call_id:
            self.outputs[call_id] = json.dumps(output, ensure_ascii=False)
        return output
