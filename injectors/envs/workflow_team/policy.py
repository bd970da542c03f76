"""The simulated agents of `workflow_team`: a function of the chat request LlamaIndex's `AgentWorkflow` sends.

Every agent of the workflow shares one memory, so each request holds the
customer's message, every earlier assistant turn with its `tool_calls`, the
`role: "tool"` results, and each `handoff(to_agent, reason)` call with
LlamaIndex's "Agent X is now handling the request due to the following
reason: ..." result. An agent's brief is the `reason` of the latest handoff
to it; its own work is what came after that handoff. A competent agency:

- **concierge** (the root agent) reads the customer's message and hands off
  to the researcher with a brief: the trip, the flight and hotel criteria and
  a three-step plan;
- **researcher** searches the flights and the hotels the brief names,
  chooses by the brief's criteria and hands off to the booker with a note of
  the chosen flight and hotel, their prices, the travellers and the nights;
- **booker** works out the total (travellers × fare + nights × nightly rate),
  holds the booking (`book_trip`) and hands off to the reviewer; sent back
  with a correction, it amends the booking (`amend_booking`);
- **reviewer** reads the booking (`get_booking`), checks its travellers,
  nights and date against the customer's own message, sends it back to the
  booker if they differ, otherwise confirms it (`confirm_booking`) and replies
  to the customer with the reference and the total.

Recovered mistakes (rate `noise`): the hotel search with the city in lower
case (the tool names the cities it knows), the total sent as text ("€705",
the tool asks for a number), the booking held for one night fewer (three
draws at the noise rate; the reviewer sends it back and the booker amends it).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn
from .world import euros

AGENTS = ("concierge", "researcher", "booker", "reviewer")
HANDOFF = "handoff"
FLIGHT_RULES = {"budget": "the cheapest", "comfort": "the cheapest direct", "early": "the earliest departure"}


class Call(wire.Call):
    @property
    def ok(self) -> bool:
        """Whether it ran without error (a handoff: whether LlamaIndex accepted it)."""
        if self.result is None:
            return False
        if self.tool == HANDOFF:
            return "is now handling" in self.result
        return not self.result.startswith(("error", "Tool "))


def history(messages: list[dict[str, Any]]) -> list[Call]:
    """The tool calls of a chat history, in order, each with its result."""
    return wire.history(messages, Call)


def read_request(text: str) -> dict[str, Any] | None:
    """The trip the customer asks for (the concierge's and the reviewer's reading of the message)."""
    m = re.search(r"for (\d+) travellers? from (\w+) to (\w+), flying on (\d{4}-\d\d-\d\d) and staying (\d+) nights", text)
    if m is None:
        return None
    req: dict[str, Any] = {"travellers": int(m.group(1)), "origin": m.group(2), "destination": m.group(3),
                           "date": m.group(4), "nights": int(m.group(5))}
    cap = re.search(r"best-rated hotel costing at most €(\d+) a night", text)
    floor = re.search(r"cheapest hotel rated at least (\d\.\d)", text)
    if "cheapest direct flight" in text and cap:
        req.update(family="comfort", cap=int(cap.group(1)))
    elif "earliest flight" in text and floor:
        req.update(family="early", rating=float(floor.group(1)))
    elif "cheapest flight" in text and floor:
        req.update(family="budget", rating=float(floor.group(1)))
    else:
        return None
    return req


def brief_text(req: dict[str, Any]) -> str:
    """The concierge's brief to the researcher."""
    hotel = (f"the best-rated at most {euros(req['cap'])} a night" if req["family"] == "comfort"
             else f"the cheapest rated at least {req['rating']}")
    return "\n".join([
        f"Trip: {req['travellers']} travellers, {req['origin']} to {req['destination']} on {req['date']}, {req['nights']} nights",
        f"Flight: {FLIGHT_RULES[req['family']]}",
        f"Hotel: {hotel}",
        "Plan:",
        "1. researcher: search the flights and choose one by the flight rule",
        "2. researcher: search the hotels and choose one by the hotel rule",
        "3. booker: book both and work out the total; reviewer: check the booking and confirm it",
    ])


def read_brief(text: str) -> dict[str, Any]:
    """The fields of a concierge brief (what the researcher works from)."""
    out: dict[str, Any] = {}
    trip = re.search(r"^Trip: (\d+) travellers?, (\w+) to (\w+) on (\S+), (\d+) nights?$", text, re.M)
    if trip:
        out.update(travellers=int(trip.group(1)), origin=trip.group(2), destination=trip.group(3), date=trip.group(4),
                   nights=int(trip.group(5)))
    flight = re.search(r"^Flight: (.+)$", text, re.M)
    out["flight_rule"] = flight.group(1).strip() if flight else ""
    hotel = re.search(r"^Hotel: (.+)$", text, re.M)
    out["hotel_rule"] = hotel.group(1).strip() if hotel else ""
    out["plan"] = re.findall(r"^\d+\. (.+)$", text, re.M)
    return out


def read_note(text: str) -> dict[str, str]:
    """The `Key: value` lines of a handoff note."""
    return {k.strip().lower(): v.strip() for k, v in re.findall(r"^([A-Z][a-z ]+):\s*(.+)$", text, re.M)}


def pick_flight(rule: str, flights: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not flights:
        return None
    if rule == "the cheapest direct":
        direct = [f for f in flights if f.get("stops") == 0]
        return min(direct, key=lambda f: f["price"]) if direct else None
    if rule == "the earliest departure":
        return min(flights, key=lambda f: f["departs"])
    return min(flights, key=lambda f: f["price"])


def pick_hotel(rule: str, hotels: list[dict[str, Any]]) -> dict[str, Any] | None:
    cap = re.search(r"at most €(\d+)", rule)
    floor = re.search(r"rated at least (\d(?:\.\d)?)", rule)
    if cap:
        fits = [h for h in hotels if h["nightly"] <= int(cap.group(1))]
        return max(fits, key=lambda h: h["rating"]) if fits else None
    if floor:
        fits = [h for h in hotels if h["rating"] >= float(floor.group(1))]
        return min(fits, key=lambda h: h["nightly"]) if fits else None
    return min(hotels, key=lambda h: h["nightly"]) if hotels else None


def flight_line(f: dict[str, Any]) -> str:
    stops = "direct" if f["stops"] == 0 else f"{f['stops']} stop"
    return f"{f['flight_id']} (departs {f['departs']}, {stops}) at {euros(f['price'])} per traveller"


def hotel_line(h: dict[str, Any]) -> str:
    return f"{h['hotel_id']} {h['name']} (rated {h['rating']}) at {euros(h['nightly'])} a night"


def final_text(booking: dict[str, Any]) -> str:
    return "\n".join(["Your trip is booked and confirmed.", f"Booking: {booking.get('booking_id')}",
                      f"Flight: {booking.get('flight_id')}", f"Hotel: {booking.get('hotel')}",
                      f"Travellers: {booking.get('travellers')}", f"Nights: {booking.get('nights')}",
                      f"Total: {euros(booking.get('total') or 0)}"])


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class TeamPolicy:
    """The simulated agency: `respond(agent, request, sim) -> text` (an action, or the reply to the customer)."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls = history(messages)
        handoffs = [c for c in calls if c.tool == HANDOFF and c.args.get("to_agent") == agent and c.ok]
        brief = str(handoffs[-1].args.get("reason", "")) if handoffs else ""
        mine = [c for c in calls if c.position > handoffs[-1].position] if handoffs else list(calls)
        if agent == "concierge":
            return self.concierge(user, mine)
        if agent == "researcher":
            return self.researcher(read_brief(brief), mine, chance)
        if agent == "booker":
            notes = [str(c.args.get("reason", "")) for c in calls if c.tool == HANDOFF and c.ok
                     and c.args.get("to_agent") == "booker" and "Flight:" in str(c.args.get("reason", ""))]
            return self.booker(read_note(notes[-1]) if notes else {}, brief, mine, chance)
        if agent == "reviewer":
            return self.reviewer(user, read_note(brief), mine)
        raise ValueError(f"workflow_team: no simulated agent {agent!r}")

    # -- concierge ----------------------------------------------------------------
    @staticmethod
    def concierge(user: str, mine: list[Call]) -> str:
        req = read_request(user)
        if req is None:
            return ("I'm sorry, I could not tell which trip you would like. Please write again with the travellers, "
                    "the route, the date, the nights and how to choose the flight and the hotel.")
        return render_call(HANDOFF, {"to_agent": "researcher", "reason": brief_text(req)},
                           "The researcher should find the options first.")

    # -- researcher ---------------------------------------------------------------
    @staticmethod
    def researcher(brief: dict[str, Any], mine: list[Call], chance) -> str:
        if "destination" not in brief:
            return "I could not read the trip from the brief, so I cannot search for it."
        want = {"origin": brief["origin"], "destination": brief["destination"], "date": brief["date"]}
        flights_calls = [c for c in mine if c.tool == "search_flights" and c.result is not None]
        if not flights_calls or (failed(flights_calls[-1]) and len(flights_calls) < 3):
            return render_call("search_flights", want, f"Searching the flights from {brief['origin']} to "
                               f"{brief['destination']} on {brief['date']}.")
        flights = _json(flights_calls[-1].result).get("flights") or []
        hotels: list[dict[str, Any]] = []
        # The researcher does the plan's steps addressed to it: a hotel step given to anyone else is not its job.
        wants_hotel = any(step.startswith("researcher:") and "hotel" in step for step in brief.get("plan", []))
        if wants_hotel:
            hotel_calls = [c for c in mine if c.tool == "search_hotels" and c.result is not None]
            if not hotel_calls or (failed(hotel_calls[-1]) and len(hotel_calls) < 3):
                city = brief["destination"]
                if not hotel_calls and chance("lower-case-city"):
                    city = city.lower()
                return render_call("search_hotels", {"city": city}, f"Searching the hotels in {brief['destination']}.")
            hotels = _json(hotel_calls[-1].result).get("hotels") or []
        flight = pick_flight(brief["flight_rule"], flights)
        if flight is None:
            return f"I found no flight that fits the brief ({brief['flight_rule']}), so there is nothing to book."
        lines = [f"Flight: {flight_line(flight)}"]
        hotel = pick_hotel(brief["hotel_rule"], hotels) if wants_hotel else None
        if hotel is not None:
            lines.append(f"Hotel: {hotel_line(hotel)}")
        lines += [f"Travellers: {brief['travellers']}", f"Nights: {brief['nights']}"]
        why = f"Flight: {brief['flight_rule']}; hotel: {brief['hotel_rule']}." if hotel else f"Flight: {brief['flight_rule']}."
        return render_call(HANDOFF, {"to_agent": "booker", "reason": "\n".join(lines)}, f"Chosen by the brief. {why}")

    # -- booker -------------------------------------------------------------------
    def booker(self, note: dict[str, str], brief: str, mine: list[Call], chance) -> str:
        flight = re.match(r"(\S+) \(.*\) at €(\d+) per traveller", note.get("flight", ""))
        hotel = re.match(r"(\S+) (.+) \(rated [\d.]+\) at €(\d+) a night", note.get("hotel", ""))
        if flight is None or hotel is None:
            missing = "a flight" if flight is None else "a hotel"
            return f"I cannot book this trip: the research note names no {missing} to book."
        try:
            travellers, nights = int(note.get("travellers", "")), int(note.get("nights", ""))
        except ValueError:
            return "I cannot book this trip: the research note does not say how many travellers and nights."
        fare, nightly = int(flight.group(2)), int(hotel.group(3))
        fix = read_note(brief) if brief.startswith("Fix:") else None
        writes = [c for c in mine if c.tool in ("book_trip", "amend_booking") and c.ok]
        if writes:
            done = writes[-1]
            ref = re.search(r"booking (BK-\d+)", done.result or "")
            args = done.args
            lines = [f"Booking: {ref.group(1) if ref else args.get('booking_id', '')}", f"Flight: {flight.group(1)}",
                     f"Hotel: {hotel.group(2)}", f"Travellers: {args.get('travellers')}", f"Nights: {args.get('nights')}",
                     f"Total: {euros(args.get('total') or 0)}"]
            verb = "Amended" if done.tool == "amend_booking" else "Held"
            return render_call(HANDOFF, {"to_agent": "reviewer", "reason": "\n".join(lines)},
                               f"{verb} the booking; the reviewer should check it.")
        if fix is not None:
            amends = [c for c in mine if c.tool == "amend_booking"]
            if len(amends) >= 2:
                return f"I could not amend the booking: {amends[-1].result}"
            try:
                travellers, nights = int(fix.get("travellers", travellers)), int(fix.get("nights", nights))
            except ValueError:
                pass
            total = travellers * fare + nights * nightly
            return render_call("amend_booking", {"booking_id": fix.get("booking", ""), "travellers": travellers,
                                                 "nights": nights, "total": total},
                               f"{travellers} × {euros(fare)} + {nights} × {euros(nightly)} = {euros(total)}.")
        attempts = [c for c in mine if c.tool == "book_trip"]
        if len(attempts) >= 2:
            return f"I could not hold the booking: {attempts[-1].result}"
        # Three draws at the noise rate (about half the seeds at 0.2): the slip the reviewer exists to catch, so
        # that the review loop (reviewer -> booker -> reviewer) is part of many runs.
        if not attempts and nights > 1 and any(chance(f"one-night-short-{k}") for k in range(3)):
            nights -= 1
        total = travellers * fare + nights * nightly
        value: Any = total
        if not attempts and chance("total-as-text"):
            value = euros(total)
        return render_call("book_trip", {"flight_id": flight.group(1), "hotel_id": hotel.group(1), "travellers": travellers,
                                         "nights": nights, "total": value},
                           f"{travellers} × {euros(fare)} + {nights} × {euros(nightly)} = {euros(total)}.")

    # -- reviewer -----------------------------------------------------------------
    @staticmethod
    def reviewer(user: str, note: dict[str, str], mine: list[Call]) -> str:
        ref = note.get("booking", "")
        reads = [c for c in mine if c.tool == "get_booking" and c.result is not None]
        confirms = [c for c in mine if c.tool == "confirm_booking" and c.result is not None]
        if confirms:  # its decision is made: the reply tells the customer what it confirmed
            if failed(confirms[-1]):
                return f"I could not confirm booking {ref}: {confirms[-1].result}"
            if reads and _json(reads[-1].result):
                return final_text(_json(reads[-1].result))
            return final_text({"booking_id": ref, "flight_id": note.get("flight"), "hotel": note.get("hotel"),
                               "travellers": note.get("travellers"), "nights": note.get("nights"),
                               "total": int(re.sub(r"\D", "", note.get("total", "")) or 0)})
        if not reads:
            return render_call("get_booking", {"booking_id": ref}, f"Reading booking {ref} to check it.")
        booking = _json(reads[-1].result)
        if not booking:
            return f"I could not find booking {ref}, so nothing is booked yet. We will get back to you."
        req = read_request(user) or {}
        wrong = [(k, booking.get(k), req.get(k)) for k in ("travellers", "nights", "date") if booking.get(k) != req.get(k)]
        if wrong:
            lines = ["Fix: " + "; ".join(f"the booking has {k} {have} where the customer asked for {want}"
                                         for k, have, want in wrong),
                     f"Booking: {booking.get('booking_id')}", f"Travellers: {req.get('travellers')}",
                     f"Nights: {req.get('nights')}"]
            return render_call(HANDOFF, {"to_agent": "booker", "reason": "\n".join(lines)},
                               "The booking does not match the request; sending it back.")
        return render_call("confirm_booking", {"booking_id": booking.get("booking_id")},
                           f"The booking matches the request: {req.get('travellers')} travellers, "
                           f"{req.get('nights')} nights from {req.get('date')}.")


def failed(call: Call) -> bool:
    """Whether a tool call came back with an error (which the agent answers by retrying)."""
    return call.result is None or call.result.startswith(("error", "Tool "))
