"""The simulated agents of `adk_team`: functions of the chat request ADK's LiteLlm sends, answering in step text.

ADK shows an agent its own turns as assistant messages with `tool_calls` and `role: "tool"` results, and every
other agent's turns as user messages "For context: ..." whose parts quote "[agent] said:", "[agent] called tool
`x` with parameters:" and "[agent] `x` tool returned result:" (Python reprs). `transcript` reads both into one list
of events; each agent then acts on it:

- **coordinator** follows its own plan by its transfers so far: first the plan and a transfer to the
  research agent; then a budget brief (the trip's counts from the question, the research agent's findings, the
  plan's goal) and a transfer to the budget agent; then the final answer, the budget agent's result;
- **research_agent** does the look-ups its brief names (`hotel_rate`, `flight_fare`) and reports its findings,
  transferring back to the coordinator;
- **budget_agent** looks up the exchange rate of each currency in its brief, computes the goal with `calculate`
  and reports the result, transferring back.

Replies are `render_action` text (a tool call, with the message's content as its thought) or plain text; see
`agents_desk.wire`. Recovered mistakes in seeds (rate `noise`): a look-up with a lower-case name, answered with
the names that exist and retried; a calculation missing its closing parenthesis, retried.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from ..base import stable_seed
from ..framework import message_text
from ..agents_desk.wire import render_call
from .world import GOALS

COORDINATOR, RESEARCH, BUDGET = "coordinator", "research_agent", "budget_agent"
TRANSFER = "transfer_to_agent"
_QUOTED = r"\n<<<BEGIN_QUOTED_AGENT_CONTENT>>>\n(.*)\n<<<END_QUOTED_AGENT_CONTENT>>>\s*$"
_SAID = re.compile(r"^\[(\w+)\] said:" + _QUOTED, re.S)
_CALLED = re.compile(r"^\[(\w+)\] called tool `(\w+)` with parameters:" + _QUOTED, re.S)
_RETURNED = re.compile(r"^\[(\w+)\] `(\w+)` tool returned result:" + _QUOTED, re.S)

_HOTEL_ITEM = re.compile(r"research_agent looks up the nightly room rate of ([A-Z][\w ]+?)\.$", re.M)
_FARE_ITEM = re.compile(r"research_agent looks up the return fare ([A-Z]\w+)-([A-Z]\w+)\.$", re.M)
_RATE_FINDING = re.compile(r"^- Nightly room rate at (.+?): ([\d.]+) ([A-Z]{3})$", re.M)
_FARE_FINDING = re.compile(r"^- Return fare (.+?) per person: ([\d.]+) ([A-Z]{3})$", re.M)
_GOAL = re.compile(r"^Goal: (.+?)\.$", re.M)
_LODGING = re.compile(r"^- Lodging: (\d+) rooms? x (\d+) nights at ([\d.]+) ([A-Z]{3}) per room-night$", re.M)
_FLIGHTS = re.compile(r"^- Flights: (\d+) travellers x ([\d.]+) ([A-Z]{3}) return$", re.M)
_BUDGET = re.compile(r"^- Budget: ([\d.]+) EUR$", re.M)
_RESULT = re.compile(r"^Result: (-?[\d.]+) EUR", re.M)
_COUNTS = re.compile(r"We are (\d+) travellers .*? staying (\d+) nights at .*? in (\d+) rooms?")
_BUDGET_ASKED = re.compile(r"Our budget is ([\d.]+) EUR")


def _value(text: str) -> Any:
    """A quoted payload: ADK quotes other agents' arguments and results as Python reprs, its own as JSON."""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return text


def transcript(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's turns as events {author, type: said|call|result, text | tool, args | output} (system left out)."""
    events: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "assistant":
            text = message_text(m.get("content"))
            if text:
                events.append({"author": "self", "type": "said", "text": text})
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                names[str(call.get("id"))] = str(fn.get("name"))
                events.append({"author": "self", "type": "call", "tool": fn.get("name"), "args": _value(fn.get("arguments") or "{}")})
        elif role == "tool":
            events.append({"author": "self", "type": "result", "tool": names.get(str(m.get("tool_call_id")), ""),
                           "output": _value(message_text(m.get("content")))})
        elif isinstance(m.get("content"), list):
            for part in m["content"]:
                text = str(part.get("text", "")) if isinstance(part, dict) else ""
                for pattern, kind in ((_SAID, "said"), (_CALLED, "call"), (_RETURNED, "result")):
                    hit = pattern.match(text)
                    if hit is None:
                        continue
                    if kind == "said":
                        events.append({"author": hit.group(1), "type": "said", "text": hit.group(2)})
                    else:
                        key = "args" if kind == "call" else "output"
                        events.append({"author": hit.group(1), "type": kind, "tool": hit.group(2), key: _value(hit.group(3))})
                    break
                else:
                    if not text.startswith("For context:"):
                        events.append({"author": "user", "type": "said", "text": text})
        else:
            events.append({"author": "user", "type": "said", "text": message_text(m.get("content"))})
    return events


def _last_said(events: list[dict[str, Any]], author: str) -> str:
    return next((e["text"] for e in reversed(events) if e["type"] == "said" and e["author"] == author), "")


def _own(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's own calls paired with their results, since it was last transferred to."""
    start = max((i for i, e in enumerate(events) if e["author"] != "self"), default=-1) + 1
    pairs, mine = [], events[start:]
    for i, e in enumerate(mine):
        if e["type"] == "call":
            output = next((r["output"] for r in mine[i + 1:] if r["type"] == "result"), None)
            pairs.append({"tool": e["tool"], "args": e["args"] if isinstance(e["args"], dict) else {}, "output": output})
    return pairs


def _ok(output: Any) -> bool:
    return isinstance(output, dict) and "error" not in output


def _goal_family(text: str) -> str:
    found = _GOAL.search(text)
    said = found.group(1) if found else ""
    return next((f for f, g in GOALS.items() if g == said), "total")


class TeamPolicy:
    """The coordinator and its two specialists (see the module docstring)."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages = list(request.get("messages") or [])
        events = transcript(messages)
        key = json.dumps([message_text(m.get("content")) for m in messages], sort_keys=True)

        def chance(label: str) -> bool:
            noise = float(sim.get("noise", 0.0))
            return noise > 0 and stable_seed(sim.get("seed", 0), agent, key, label) % 10_000 / 10_000 < noise

        question = next((e["text"] for e in events if e["author"] == "user"), "")
        if agent == COORDINATOR:
            return self.coordinator(question, events)
        if agent == RESEARCH:
            return self.research(events, chance)
        if agent == BUDGET:
            return self.budget(events, chance)
        raise ValueError(f"adk_team: no simulated agent {agent!r}")

    # -- the coordinator ----------------------------------------------------------------------------------------
    @staticmethod
    def coordinator(question: str, events: list[dict[str, Any]]) -> str:
        transfers = [e for e in events if e["author"] == "self" and e["type"] == "call" and e["tool"] == TRANSFER]
        if not transfers:
            return render_call(TRANSFER, {"agent_name": RESEARCH}, plan_text(question))
        plan = next((e["text"] for e in events if e["author"] == "self" and e["type"] == "said" and "Plan:" in e["text"]), "")
        if len(transfers) == 1:
            return render_call(TRANSFER, {"agent_name": BUDGET}, brief_text(question, plan, _last_said(events, RESEARCH)))
        # its plan is done: it answers with the result the budget agent reported after its last transfer
        after = events[events.index(transfers[-1]) + 1:]
        reports = [e["text"] for e in after if e["type"] == "said" and e["author"] != "self"]
        found = next((_RESULT.search(r) for r in reversed(reports) if _RESULT.search(r)), None)
        if found is None:
            return "I could not get a quote from the team for this trip."
        goal = GOALS[_goal_family(plan)]
        return f"The quote is ready: {goal} is {found.group(1)} EUR.\nANSWER: {found.group(1)}"

    # -- the research agent -------------------------------------------------------------------------------------
    @staticmethod
    def research(events: list[dict[str, Any]], chance) -> str:
        brief = _last_said(events, COORDINATOR)
        own = _own(events)
        items: list[tuple[str, dict[str, str]]] = [("hotel_rate", {"hotel": h}) for h in _HOTEL_ITEM.findall(brief)]
        items += [("flight_fare", {"origin": o, "destination": d}) for o, d in _FARE_ITEM.findall(brief)]
        done: dict[int, dict[str, Any]] = {}
        for i, (tool, _args) in enumerate(items):
            kind = "hotel" if tool == "hotel_rate" else "fare"
            hit = next((p for p in own if p["tool"] != TRANSFER and _ok(p["output"]) and ("hotel" in p["args"]) == (kind == "hotel")), None)
            if hit is not None:
                done[i] = hit
        failed = [(p["tool"], p["args"]) for p in own if not _ok(p["output"])]
        for i, (tool, args) in enumerate(items):
            if i in done or (tool, args) in failed:  # a look-up its brief names that failed as named is given up
                continue
            tried = any(p["tool"] == tool for p in own)
            if not tried and chance(f"lower-{i}"):
                args = {k: v.lower() for k, v in args.items()}
            what = "the nightly room rate" if tool == "hotel_rate" else "the return fare"
            thought = f"I look up {what}." if not tried else f"The name was not found; I look up {what} again with the exact name."
            return render_call(tool, args, thought)
        lines = []
        for i in sorted(done):
            out = done[i]["output"]
            if "hotel" in done[i]["args"]:
                rate = out.get("nightly_rate_per_room", out.get("package_per_person_per_night"))
                lines.append(f"- Nightly room rate at {out.get('hotel')}: {rate} {out.get('currency')}")
            else:
                lines.append(f"- Return fare {out.get('route')} per person: {out.get('return_fare_per_person')} {out.get('currency')}")
        report = "Findings:\n" + "\n".join(lines) if lines else "Findings: my brief names nothing for me to look up."
        return render_call(TRANSFER, {"agent_name": COORDINATOR}, report)

    # -- the budget agent ---------------------------------------------------------------------------------------
    @staticmethod
    def budget(events: list[dict[str, Any]], chance) -> str:
        brief = _last_said(events, COORDINATOR)
        own = _own(events)
        lodging, flights, budget = _LODGING.search(brief), _FLIGHTS.search(brief), _BUDGET.search(brief)
        currencies = list(dict.fromkeys([m.group(4) for m in [lodging] if m] + [m.group(3) for m in [flights] if m]))
        # It takes its rates in the order it looked them up: the first for the lodging's currency, then the fare's.
        looked = [p for p in own if p["tool"] == "fx_rate" and _ok(p["output"])]
        rates = {cur: looked[i]["output"]["eur_per_unit"] for i, cur in enumerate(currencies) if i < len(looked)}
        failed = {p["args"].get("currency") for p in own if p["tool"] == "fx_rate" and not _ok(p["output"])}
        if len(looked) < len(currencies) and currencies[len(looked)] not in failed:  # a currency the tool does not know is left out
            cur = currencies[len(looked)]
            tried = any(p["tool"] == "fx_rate" for p in own)
            shown = cur.lower() if not tried and chance(f"lower-{len(looked)}") else cur
            return render_call("fx_rate", {"currency": shown}, f"I look up the exchange rate of {cur} to EUR.")
        calcs = [p for p in own if p["tool"] == "calculate"]
        if len(calcs) >= 2 and not any(_ok(p["output"]) for p in calcs):
            return render_call(TRANSFER, {"agent_name": COORDINATOR}, "I could not compute the goal from the brief.")
        if not calcs or not _ok(calcs[-1]["output"]):
            family = _goal_family(brief)
            travellers = int(flights.group(1)) if flights else 1
            expr = formula_of(family, lodging, flights, budget, rates, travellers)
            if not calcs and chance("paren") and expr.endswith(")"):
                expr = expr[:-1]
            thought = "I compute the goal in EUR." if not calcs else "The expression did not parse; I write it again."
            return render_call("calculate", {"expression": expr}, thought)
        result = calcs[-1]["output"]["result"]
        family = _goal_family(brief)
        return render_call(TRANSFER, {"agent_name": COORDINATOR}, f"Result: {result:.2f} EUR ({GOALS[family]}).")


def formula_of(family: str, lodging, flights, budget, rates: dict[str, float], travellers: int) -> str:
    from .world import formula

    return formula(family, int(lodging.group(1)) if lodging else 0, int(lodging.group(2)) if lodging else 0, travellers,
                   float(lodging.group(3)) if lodging else None, rates.get(lodging.group(4)) if lodging else None,
                   float(flights.group(2)) if flights else None, rates.get(flights.group(3)) if flights else None,
                   float(budget.group(1)) if budget else None)


def plan_text(question: str) -> str:
    """The coordinator's plan for the question (it names the hotel, the route and the goal)."""
    hotel = re.search(r"nights at (.+?) in \d+ rooms?", question)
    route = re.search(r"from (\w+) to (\w+)", question)
    family = "per_person" if "per traveller" in question else "remaining" if "budget" in question else "total"
    h = hotel.group(1) if hotel else "the hotel"
    o, d = route.groups() if route else ("the origin", "the destination")
    return (f"Plan:\n1. research_agent looks up the nightly room rate of {h}.\n2. research_agent looks up the return fare "
            f"{o}-{d}.\n3. budget_agent converts the figures to EUR and computes the goal.\nGoal: {GOALS[family]}.")


def brief_text(question: str, plan: str, findings: str) -> str:
    """The coordinator's brief to the budget agent: the trip's counts, the findings, the plan's goal."""
    counts = _COUNTS.search(question)
    travellers, nights, rooms = counts.groups() if counts else ("1", "1", "1")
    lines = ["Budget brief:"]
    rate = _RATE_FINDING.search(findings)
    if rate:
        lines.append(f"- Lodging: {rooms} room{'s' if int(rooms) > 1 else ''} x {nights} nights at {rate.group(2)} {rate.group(3)} per room-night")
    fare = _FARE_FINDING.search(findings)
    if fare:
        lines.append(f"- Flights: {travellers} travellers x {fare.group(2)} {fare.group(3)} return")
    budget = _BUDGET_ASKED.search(question)
    family = _goal_family(plan)
    if family == "remaining" and budget:
        lines.append(f"- Budget: {budget.group(1)} EUR")
    lines.append(f"Goal: {GOALS[family]}.")
    return "\n".join(lines)
