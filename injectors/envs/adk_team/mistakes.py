"""Error rules of `adk_team` (tried before the generic ones): mistakes in the travel desk's replies.

Where each rule acts (see `adk_team.env` for the steps): the coordinator's plan (R.4, PL.1, PL.2, C.1), its budget
brief (R.1, PL.3, V.1, A.3, A.5, C.1, C.3) and its final answer (R.1, A.4); the research agent's look-ups (A.1, A.2,
A.3, V.1) and its findings (R.1, C.2); the budget agent's rate look-ups (A.3, V.2), its calculation (R.2, R.3, V.1)
and its result (R.3); a specialist's transfer back (A.3).
Each keeps the step's form (a transfer stays a transfer, a tool call a tool call) unless the mode is to drop it.
"""

from __future__ import annotations

import json
import re

from faultlens.injectors.generators import Generated, GenInput

from ..agents_desk.wire import render_call
from ..base import parse_action
from .policy import BUDGET, COORDINATOR, RESEARCH, TRANSFER
from .world import GOALS

_GOAL = re.compile(r"^Goal: (.+?)\.$", re.M)
_FARE_ITEM = re.compile(r"^2\. research_agent looks up the return fare (\w+)-(\w+)\.$", re.M)
_LODGING = re.compile(r"^- Lodging: (\d+) rooms? x (\d+) nights at ([\d.]+) ([A-Z]{3}) per room-night$", re.M)
_FLIGHTS = re.compile(r"^- Flights: (\d+) travellers x ([\d.]+) ([A-Z]{3}) return$", re.M)
_FARE_FINDING = re.compile(r"^(- Return fare .+? per person: [\d.]+ )([A-Z]{3})$", re.M)
_RATE_FINDING = re.compile(r"^- Nightly room rate at .+?: [\d.]+ ([A-Z]{3})$", re.M)
_RESULT = re.compile(r"^Result: (-?[\d.]+) EUR", re.M)
_ANSWER = re.compile(r"^ANSWER: (.+)$", re.M)
_NUMBER = re.compile(r"\d+\.\d+|\d+")


def _transfer(inp: GenInput, agent: str, target: str) -> tuple[str, str] | None:
    """(thought, argument) of a step of `agent` that transfers to `target`, else None."""
    action = parse_action(inp.text)
    if inp.agent != agent or action is None or action.tool != TRANSFER or target not in action.argument:
        return None
    return action.thought, action.argument


def _tool(inp: GenInput, agent: str, tool: str) -> dict | None:
    """The JSON arguments of a step of `agent` that calls `tool`, else None."""
    action = parse_action(inp.text)
    if inp.agent != agent or action is None or action.tool != tool:
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return args if isinstance(args, dict) else None


def _thought(inp: GenInput) -> str:
    action = parse_action(inp.text)
    return action.thought if action else ""


def _other_goal(text: str, inp: GenInput) -> tuple[str, str] | None:
    found = _GOAL.search(text)
    if found is None:
        return None
    others = [g for g in GOALS.values() if g != found.group(1)]
    return found.group(1), inp.rng.choice(others)


def _novel(inp: GenInput, old: str) -> str:
    """A figure like `old` (two decimals) that appears nowhere in the run so far."""
    seen = inp.prefix_text() + inp.text
    for _ in range(50):
        new = f"{float(old) * inp.rng.choice([0.7, 0.8, 1.25, 1.4]) + inp.rng.randint(1, 9) / 100:.2f}"
        if new not in seen:
            return new
    return f"{float(old) + 17.31:.2f}"


# -- the coordinator's plan -------------------------------------------------------------------------------------
def _r4(inp: GenInput) -> Generated | None:
    """The plan's goal is another quantity than the one the customer asked for."""
    hit = _transfer(inp, COORDINATOR, RESEARCH)
    goals = _other_goal(inp.text, inp) if hit and hit[0].startswith("Plan:") else None
    if goals is None:
        return None
    old, new = goals
    return Generated(inp.text.replace(f"Goal: {old}.", f"Goal: {new}."), f"plans to compute {new} where the customer asked for {old}")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan leaves out the flight fare look-up, which the quote needs."""
    hit = _transfer(inp, COORDINATOR, RESEARCH)
    found = _FARE_ITEM.search(inp.text) if hit else None
    if found is None:
        return None
    text = inp.text.replace(found.group(0) + "\n", "").replace("\n3. budget_agent", "\n2. budget_agent")
    return Generated(text, f"plans the quote without looking up the fare {found.group(1)}-{found.group(2)}")


def _pl2(inp: GenInput) -> Generated | None:
    """The plan asks for a package price with the flights included, which no tool or agent can give."""
    hit = _transfer(inp, COORDINATOR, RESEARCH)
    found = _FARE_ITEM.search(inp.text) if hit else None
    if found is None:
        return None
    text = inp.text.replace(found.group(0), "2. research_agent looks up the hotel's package price with the return flights included.")
    return Generated(text, "plans on a flights-included package price that no tool provides (the fare is never looked up)")


def _c1_plan(inp: GenInput) -> Generated | None:
    """The coordinator hands the plan's look-ups to the budget agent, who has no look-up tools."""
    hit = _transfer(inp, COORDINATOR, RESEARCH)
    if hit is None or not hit[0].startswith("Plan:"):
        return None
    return Generated(render_call(TRANSFER, {"agent_name": BUDGET}, hit[0]), "transfers the look-ups to budget_agent instead of research_agent")


# -- the coordinator's budget brief ---------------------------------------------------------------------------------
def _brief(inp: GenInput) -> tuple[str, str] | None:
    return _transfer(inp, COORDINATOR, BUDGET)


def _c1_brief(inp: GenInput) -> Generated | None:
    """The coordinator sends the budget brief to the research agent, who has no calculator."""
    hit = _brief(inp)
    if hit is None:
        return None
    return Generated(render_call(TRANSFER, {"agent_name": RESEARCH}, hit[0]), "transfers the budget brief to research_agent instead of budget_agent")


def _c3(inp: GenInput) -> Generated | None:
    """The coordinator leaves the trip to the budget agent: its brief gives no counts or figures, only 'the findings above'."""
    hit = _brief(inp)
    goal = _GOAL.search(inp.text) if hit else None
    if goal is None:
        return None
    text = f"Budget brief:\nWork the quote out from research_agent's findings above.\nGoal: {goal.group(1)}."
    return Generated(render_call(TRANSFER, {"agent_name": BUDGET}, text),
                     "relies on budget_agent to work the trip out from the findings, giving it no counts or figures")


def _r1(inp: GenInput) -> Generated | None:
    """The brief gives a nightly rate that appears nowhere in the run (not the research agent's figure)."""
    hit = _brief(inp)
    found = _LODGING.search(inp.text) if hit else None
    if found is None:
        return None
    new = _novel(inp, found.group(3))
    line = found.group(0).replace(f" at {found.group(3)} ", f" at {new} ")
    return Generated(inp.text.replace(found.group(0), line), f"briefs a nightly rate of {new}, a figure found nowhere, instead of {found.group(3)}")


def _v1(inp: GenInput) -> Generated | None:
    """The brief swaps the two figures' currencies (it lost track of which figure was quoted in which)."""
    hit = _brief(inp)
    lodging, flights = (_LODGING.search(inp.text), _FLIGHTS.search(inp.text)) if hit else (None, None)
    if lodging is None or flights is None or lodging.group(4) == flights.group(3):
        return None
    a, b = lodging.group(4), flights.group(3)
    text = inp.text.replace(lodging.group(0), lodging.group(0).replace(f" {a} per", f" {b} per"))
    text = text.replace(flights.group(0), flights.group(0).replace(f" {b} return", f" {a} return"))
    return Generated(text, f"briefs the room rate in {b} and the fare in {a}, the other way round from the findings")


def _pl3(inp: GenInput) -> Generated | None:
    """The brief drifts from the plan's goal to another quantity."""
    hit = _brief(inp)
    goals = _other_goal(inp.text, inp) if hit else None
    if goals is None:
        return None
    old, new = goals
    return Generated(inp.text.replace(f"Goal: {old}.", f"Goal: {new}."), f"briefs the budget agent to compute {new}, drifting from the plan's goal ({old})")


def _a5(inp: GenInput) -> Generated | None:
    """The coordinator answers before the budget agent has converted anything: it adds up the raw figures."""
    hit = _brief(inp)
    lodging, flights = (_LODGING.search(inp.text), _FLIGHTS.search(inp.text)) if hit else (None, None)
    if lodging is None or flights is None:
        return None
    guess = int(lodging.group(1)) * int(lodging.group(2)) * float(lodging.group(3)) + int(flights.group(1)) * float(flights.group(2))
    return Generated(f"The figures are in; the quote comes to about {guess:.2f} EUR.\nANSWER: {guess:.2f}",
                     "answers with the unconverted figures before the budget agent has computed the goal")


def _r1_answer(inp: GenInput) -> Generated | None:
    """The final answer states an amount found nowhere in the run."""
    found = _ANSWER.search(inp.text) if inp.agent == COORDINATOR else None
    if found is None or not re.fullmatch(r"-?\d+\.\d\d", found.group(1)):
        return None
    new = _novel(inp, found.group(1))
    return Generated(inp.text.replace(found.group(1), new), f"answers {new}, a value found nowhere in the run, instead of {found.group(1)}")


def _r1_findings(inp: GenInput) -> Generated | None:
    """The research agent's findings give a room rate found nowhere (not the tool's)."""
    hit = _transfer(inp, RESEARCH, COORDINATOR)
    found = re.search(r"^- Nightly room rate at .+?: ([\d.]+) [A-Z]{3}$", inp.text, re.M) if hit else None
    if found is None:
        return None
    new = _novel(inp, found.group(1))
    line = found.group(0).replace(f": {found.group(1)} ", f": {new} ")
    return Generated(inp.text.replace(found.group(0), line), f"reports a room rate of {new}, found nowhere, instead of {found.group(1)}")


# -- the coordinator's final answer ------------------------------------------------------------------------------
def _a4(inp: GenInput) -> Generated | None:
    """The final answer carries its currency on the ANSWER line, which then is not a bare number."""
    found = _ANSWER.search(inp.text) if inp.agent == COORDINATOR else None
    if found is None:
        return None
    form = inp.rng.choice(["{v} EUR", "EUR {v}", "€{v}"]).format(v=found.group(1))
    return Generated(inp.text.replace(found.group(0), f"ANSWER: {form}"), "gives the answer with its currency, not a bare number")


# -- the research agent -------------------------------------------------------------------------------------------
def _proper(inp: GenInput, name: str) -> str:
    """A name as the task spells it (a seed's recovered look-up may have written it in lower case)."""
    return next((n for g in inp.distractors for n in g if n.lower() == str(name).lower()), str(name))


def _a1(inp: GenInput) -> Generated | None:
    """The research agent calls hotel_package, a real tool but the wrong one: a package price per person, not the room rate."""
    args = _tool(inp, RESEARCH, "hotel_rate")
    if args is None:
        return None
    args = {"hotel": _proper(inp, args.get("hotel", ""))}
    return Generated(render_call("hotel_package", args, _thought(inp)), "calls hotel_package where the room rate (hotel_rate) is needed")


def _a2(inp: GenInput) -> Generated | None:
    """The research agent looks up the fare from another origin, or the rate of another hotel."""
    fare, hotel = _tool(inp, RESEARCH, "flight_fare"), _tool(inp, RESEARCH, "hotel_rate")
    if fare is not None and "origin" in fare:
        others = [o for g in inp.distractors[2:3] for o in g if o != fare["origin"]]
        if not others:
            return None
        new = inp.rng.choice(others)
        args = {"origin": new, "destination": _proper(inp, fare.get("destination", ""))}
        return Generated(render_call("flight_fare", args, _thought(inp)), f"looks up the fare from {new} instead of {fare['origin']}")
    if hotel is not None and "hotel" in hotel:
        right = _proper(inp, hotel["hotel"])
        others = [h for g in inp.distractors[:1] for h in g if h != right]
        if not others:
            return None
        new = inp.rng.choice(others)
        return Generated(render_call("hotel_rate", {"hotel": new}, _thought(inp)), f"looks up {new} instead of {right}")
    return None


def _a3(inp: GenInput) -> Generated | None:
    """The research agent reports findings of look-ups it never made (its first look-up replaced by made-up figures)."""
    args = _tool(inp, RESEARCH, "hotel_rate") or _tool(inp, RESEARCH, "flight_fare")
    if args is None:
        return None
    plan = next((p.text for p in reversed(inp.prefix) if p.text.startswith("Plan:")), "")
    route, hotel = _FARE_ITEM.search(plan), re.search(r"nightly room rate of (.+?)\.$", plan, re.M)
    currencies = [c for g in inp.distractors[3:4] for c in g] or ["USD"]
    lines = [f"- Nightly room rate at {hotel.group(1) if hotel else 'the hotel'}: {inp.rng.randint(80, 220)}.{inp.rng.randint(10, 99)} "
             f"{inp.rng.choice(currencies)}"]
    if route:
        lines.append(f"- Return fare {route.group(1)}-{route.group(2)} per person: {inp.rng.randint(120, 420)}.{inp.rng.randint(10, 99)} "
                     f"{inp.rng.choice(currencies)}")
    return Generated(render_call(TRANSFER, {"agent_name": COORDINATOR}, "Findings:\n" + "\n".join(lines)),
                     "reports figures as looked up without calling hotel_rate or flight_fare (they appear nowhere)")


def _a3_budget(inp: GenInput) -> Generated | None:
    """The budget agent reports a result it never computed (no rate looked up, no calculation made)."""
    if _tool(inp, BUDGET, "fx_rate") is None and _tool(inp, BUDGET, "calculate") is None:
        return None
    amount = f"{inp.rng.randint(300, 4000)}.{inp.rng.randint(10, 99)}"
    return Generated(render_call(TRANSFER, {"agent_name": COORDINATOR}, f"Result: {amount} EUR (converted and computed)."),
                     f"reports a result of {amount} EUR without looking up a rate or calling calculate")


def _a3_brief(inp: GenInput) -> Generated | None:
    """The coordinator answers with a result it says the budget agent gave, without transferring to it."""
    hit = _brief(inp)
    if hit is None:
        return None
    amount = f"{inp.rng.randint(300, 4000)}.{inp.rng.randint(10, 99)}"
    return Generated(f"budget_agent has computed the quote: {amount} EUR.\nANSWER: {amount}",
                     "reports a budget agent's result for a transfer it never made")


def _a3_transfer(inp: GenInput) -> Generated | None:
    """A specialist transfers back to an agent that does not exist in the team."""
    hit = _transfer(inp, RESEARCH, COORDINATOR) or _transfer(inp, BUDGET, COORDINATOR)
    if hit is None:
        return None
    name = inp.rng.choice(["pricing_agent", "travel_manager", "quote_agent"])
    return Generated(render_call(TRANSFER, {"agent_name": name}, hit[0]), f"transfers to {name}, an agent the team does not have")


def _v1_fare(inp: GenInput) -> Generated | None:
    """The research agent looks up the fare to the other city it has fares for, not the trip's (it lost the destination)."""
    fare = _tool(inp, RESEARCH, "flight_fare")
    dest = _proper(inp, (fare or {}).get("destination", ""))
    others = [c for g in inp.distractors[4:5] for c in g if c != dest]
    if fare is None or not others:
        return None
    args = {"origin": _proper(inp, fare.get("origin", "")), "destination": others[0]}
    return Generated(render_call("flight_fare", args, _thought(inp)), f"looks up the fare to {others[0]} where the trip goes to {dest}")


def _c2(inp: GenInput) -> Generated | None:
    """The research agent's findings give the fare in the hotel's currency, not the one the tool quoted."""
    hit = _transfer(inp, RESEARCH, COORDINATOR)
    fare, rate = (_FARE_FINDING.search(inp.text), _RATE_FINDING.search(inp.text)) if hit else (None, None)
    if fare is None or rate is None or fare.group(2) == rate.group(1):
        return None
    text = inp.text.replace(fare.group(0), fare.group(1) + rate.group(1))
    return Generated(text, f"reports the fare in {rate.group(1)} where the tool quoted it in {fare.group(2)}")


# -- the budget agent ----------------------------------------------------------------------------------------------
def _expression(inp: GenInput) -> str | None:
    """The budget agent's calculate expression, with parentheses balanced (a seed's first try may miss one)."""
    args = _tool(inp, BUDGET, "calculate")
    if args is None:
        return None
    expr = str(args.get("expression", ""))
    return expr + ")" * (expr.count("(") - expr.count(")"))


def _v1_calc(inp: GenInput) -> Generated | None:
    """The budget agent's calculation swaps the two exchange rates (it lost track of which rate was whose)."""
    expr = _expression(inp)
    rates = re.findall(r"\* (\d+\.\d+)(?=\)|$| \+)", expr or "")
    if expr is None or len(rates) < 2 or rates[0] == rates[1]:
        return None
    a, b = rates[0], rates[1]
    new = expr.replace(f"* {a}", "* @@", 1).replace(f"* {b}", f"* {a}", 1).replace("* @@", f"* {b}", 1)
    return Generated(render_call("calculate", {"expression": new}, _thought(inp)), f"converts the room rate at {b} and the fare at {a}, each the other's rate")


def _r2(inp: GenInput) -> Generated | None:
    """The budget agent prices the flights per room instead of per traveller."""
    args = _tool(inp, BUDGET, "calculate")
    lodging = None
    for text in reversed([p.text for p in inp.prefix]):
        lodging = lodging or _LODGING.search(text)
    flights = None
    for text in reversed([p.text for p in inp.prefix]):
        flights = flights or _FLIGHTS.search(text)
    expr = _expression(inp)
    if args is None or expr is None or lodging is None or flights is None or lodging.group(1) == flights.group(1):
        return None
    term = f"{flights.group(1)} * {flights.group(2)}"
    if term not in expr:
        return None
    new = expr.replace(term, f"{lodging.group(1)} * {flights.group(2)}", 1)
    return Generated(render_call("calculate", {"expression": new}, _thought(inp)), "multiplies the fare by the rooms, not the travellers")


def _r3(inp: GenInput) -> Generated | None:
    """The budget agent rounds an exchange rate to one decimal in its calculation."""
    expr = _expression(inp)
    if expr is None:
        return None
    rates = [m for m in re.finditer(r"\* (\d+\.\d{3,})(?=\)|$| )", expr) if f"{float(m.group(1)):.1f}" != m.group(1)]
    rates = [m for m in rates if abs(float(f"{float(m.group(1)):.1f}") - float(m.group(1))) > 0.004]
    if not rates:
        return None
    m = inp.rng.choice(rates)
    new = expr[: m.start(1)] + f"{float(m.group(1)):.1f}" + expr[m.end(1):]
    return Generated(render_call("calculate", {"expression": new}, _thought(inp)), f"rounds the rate {m.group(1)} to {float(m.group(1)):.1f}")


def _r3_result(inp: GenInput) -> Generated | None:
    """The budget agent's result swaps two digits of the calculated amount."""
    hit = _transfer(inp, BUDGET, COORDINATOR)
    found = _RESULT.search(inp.text) if hit else None
    if found is None:
        return None
    digits = found.group(1).replace("-", "").replace(".", "")
    pairs = [i for i in range(len(digits) - 1) if digits[i] != digits[i + 1]]
    if not pairs:
        return None
    i = inp.rng.choice(pairs)
    value = found.group(1)
    positions = [k for k, c in enumerate(value) if c.isdigit()]
    a, b = positions[i], positions[i + 1]
    chars = list(value)
    chars[a], chars[b] = chars[b], chars[a]
    new = "".join(chars)
    return Generated(inp.text.replace(f"Result: {value} EUR", f"Result: {new} EUR"), f"reports {new} where calculate gave {value}")


def _v2(inp: GenInput) -> Generated | None:
    """The budget agent skips the second exchange-rate look-up, taking that currency as EUR without checking."""
    args = _tool(inp, BUDGET, "fx_rate")
    if args is None or not any("eur_per_unit" in p.text for p in inp.prefix[-2:]):
        return None
    cur = str(args.get("currency", ""))
    lodging = flights = None
    for text in reversed([p.text for p in inp.prefix]):
        lodging = lodging or _LODGING.search(text)
        flights = flights or _FLIGHTS.search(text)
    rate = next((json.loads(p.text).get("eur_per_unit") for p in reversed(inp.prefix) if p.text.startswith("{") and "eur_per_unit" in p.text), None)
    if lodging is None or flights is None or rate is None:
        return None
    total = f"{lodging.group(1)} * {lodging.group(2)} * {lodging.group(3)} * {rate if lodging.group(4) != cur else 1}"
    total += f" + {flights.group(1)} * {flights.group(2)} * {rate if flights.group(3) != cur else 1}"
    brief = next((p.text for p in reversed(inp.prefix) if p.text.startswith("Budget brief:")), "")
    goal = _GOAL.search(brief)
    family = next((f for f, g in GOALS.items() if goal and g == goal.group(1)), "total")
    budget = re.search(r"^- Budget: ([\d.]+) EUR$", brief, re.M)
    expr = (f"({total}) / {flights.group(1)}" if family == "per_person"
            else f"{budget.group(1)} - ({total})" if family == "remaining" and budget else total)
    return Generated(render_call("calculate", {"expression": expr}, f"{cur} is quoted at par with EUR here; I compute the goal in EUR."),
                     f"takes {cur} as EUR without looking its rate up")


MUTATORS = {"R.1": [_r1, _r1_answer, _r1_findings], "R.2": [_r2], "R.3": [_r3, _r3_result], "R.4": [_r4], "PL.1": [_pl1], "PL.2": [_pl2],
            "PL.3": [_pl3], "A.1": [_a1], "A.2": [_a2], "A.3": [_a3, _a3_budget, _a3_brief, _a3_transfer], "A.4": [_a4], "A.5": [_a5], "V.1": [_v1, _v1_calc, _v1_fare],
            "V.2": [_v2], "C.1": [_c1_plan, _c1_brief], "C.2": [_c2], "C.3": [_c3]}
