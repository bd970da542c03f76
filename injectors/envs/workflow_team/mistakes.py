"""Error rules of `workflow_team` (tried before the generic ones): the travel agency's own kinds of mistakes.

Each rule reads one step in the action form (`agents_desk.wire`): the
concierge's brief (a `handoff` with the brief as its `reason`), a
researcher's search or its note to the booker, the booker's `book_trip`
(its thought is the sum) or its note to the reviewer, the reviewer's
`get_booking` / `confirm_booking` or its reply to the customer; and the
search results before it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput
from ..agents_desk.wire import render_call
from .policy import HANDOFF, flight_line, hotel_line, read_brief
from .world import euros

_SUM = re.compile(r"^(\d+) × €(\d+) \+ (\d+) × €(\d+) = €(\d+)\.$")
_FLIGHT = re.compile(r"^Flight: (\S+) \(.*\) at €(\d+) per traveller$", re.M)
_HOTEL = re.compile(r"^Hotel: (\S+) (.+) \(rated [\d.]+\) at €(\d+) a night$", re.M)


def _call(inp: GenInput, tool: str | None = None, agent: str | None = None) -> tuple[str, dict[str, Any], str] | None:
    """(tool, arguments, thought) of the step's call, when it is `tool` (any tool if None) made by `agent`."""
    action = inp.action
    if action is None or (tool is not None and action.tool != tool) or (agent is not None and inp.agent != agent):
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return (action.tool, args, action.thought) if isinstance(args, dict) else None


def _handoff(inp: GenInput, agent: str, to: str | None = None) -> tuple[dict[str, Any], str, str] | None:
    """(arguments, reason, thought) of `agent`'s handoff (to `to`)."""
    found = _call(inp, HANDOFF, agent)
    if found is None or (to is not None and found[1].get("to_agent") != to):
        return None
    return found[1], str(found[1].get("reason", "")), found[2]


def _with_reason(args: dict[str, Any], reason: str, thought: str, to: str | None = None) -> str:
    return render_call(HANDOFF, {**args, "to_agent": to or args.get("to_agent"), "reason": reason}, thought)


def _results(inp: GenInput, key: str) -> list[dict[str, Any]]:
    """The latest search result listing `key` ("flights" or "hotels") before the step."""
    for p in reversed(inp.prefix):
        if p.kind == StepKind.tool_result.value and f'"{key}"' in p.text:
            try:
                return list(json.loads(p.text).get(key) or [])
            except json.JSONDecodeError:
                return []
    return []


def _brief(inp: GenInput) -> dict[str, Any]:
    for p in inp.prefix:
        if p.agent == "concierge" and "Trip:" in p.text:
            found = re.search(r"Action: handoff\n(.+)$", p.text, re.S)
            if found:
                try:
                    return read_brief(str(json.loads(found.group(1)).get("reason", "")))
                except json.JSONDecodeError:
                    return {}
    return {}


def _fresh(inp: GenInput, base: int, low: int = 7, high: int = 40) -> int | None:
    seen = inp.prefix_text() + inp.text
    for _ in range(12):
        new = base + inp.rng.choice([-1, 1]) * inp.rng.randint(low, high)
        if new > 0 and f"€{new}" not in seen and f'"price": {new}' not in seen and f'"nightly": {new}' not in seen:
            return new
    return None


def _booking(inp: GenInput, total: int, travellers: int, nights: int, fare: int, nightly: int, reason: str,
             found: tuple[str, dict[str, Any], str]) -> Generated:
    tool, args, _ = found
    thought = f"{travellers} × {euros(fare)} + {nights} × {euros(nightly)} = {euros(total)}."
    return Generated(render_call(tool, {**args, "travellers": travellers, "nights": nights, "total": total}, thought), reason)


def _sum(inp: GenInput) -> tuple[tuple[str, dict[str, Any], str], re.Match[str]] | None:
    found = _call(inp, None, "booker")
    if found is None or found[0] not in ("book_trip", "amend_booking"):
        return None
    m = _SUM.match(found[2])
    return (found, m) if m else None


# -- R.1: a figure found nowhere ---------------------------------------------------
def _r1_note_price(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "researcher", "booker")
    if found is None:
        return None
    args, reason, thought = found
    m = _HOTEL.search(reason) if inp.rng.random() < 0.5 else None
    m = m or _FLIGHT.search(reason)
    if m is None:
        return None
    old = int(m.group(m.lastindex or 0))
    new = _fresh(inp, old)
    if new is None:
        return None
    line = m.group(0).replace(f"at €{old} ", f"at €{new} ")
    return Generated(_with_reason(args, reason.replace(m.group(0), line), thought),
                     f"the note gives {euros(new)}, a price found nowhere in the search results, for {m.group(1)} ({euros(old)})")


def _r1_total(inp: GenInput) -> Generated | None:
    m = re.search(r"^Total: €(\d+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    new = _fresh(inp, int(m.group(1)), 10, 90)
    if new is None:
        return None
    return Generated(inp.text.replace(m.group(0), f"Total: {euros(new)}"),
                     f"tells the customer a total of {euros(new)}, found nowhere in the run (it is {euros(m.group(1))})")


# -- R.2: a criterion misapplied -----------------------------------------------------
def _r2_choice(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "researcher", "booker")
    brief = _brief(inp)
    if found is None or not brief:
        return None
    args, reason, thought = found
    flights, hotels = _results(inp, "flights"), _results(inp, "hotels")
    options = []
    if brief["flight_rule"] == "the cheapest direct" and flights:
        f = min(flights, key=lambda f: f["price"])
        options.append(("Flight", _FLIGHT, flight_line(f), "takes the cheapest flight, which has a stop, where the "
                        "customer asked for the cheapest direct one"))
    if hotels and "rated at least" in brief["hotel_rule"]:
        h = min(hotels, key=lambda h: h["nightly"])
        options.append(("Hotel", _HOTEL, hotel_line(h), f"takes the cheapest hotel, rated {h['rating']}, below the "
                        "rating the customer asked for"))
    if hotels and "at most" in brief["hotel_rule"]:
        h = max(hotels, key=lambda h: h["rating"])
        options.append(("Hotel", _HOTEL, hotel_line(h), f"takes the best-rated hotel at {euros(h['nightly'])} a night, "
                        "over the customer's nightly limit"))
    options = [o for o in options if (hit := o[1].search(reason)) and hit.group(0) != f"{o[0]}: {o[2]}"]
    if not options:
        return None
    key, pattern, line, why = inp.rng.choice(options)
    stated = pattern.search(reason)
    assert stated is not None  # kept above only where the reason states it
    return Generated(_with_reason(args, reason.replace(stated.group(0), f"{key}: {line}"), thought), why)


def _r2_rooms(inp: GenInput) -> Generated | None:
    """The nightly rate counted per traveller, as if each had a room."""
    found = _sum(inp)
    if found is None:
        return None
    call, m = found
    travellers, fare, nights, nightly = (int(m.group(i)) for i in (1, 2, 3, 4))
    if travellers < 2:
        return None
    total = travellers * fare + travellers * nights * nightly
    _, args, _ = call
    thought = f"{travellers} × {euros(fare)} + {travellers} × {nights} × {euros(nightly)} = {euros(total)}."
    return Generated(render_call(call[0], {**args, "total": total}, thought),
                     f"charges the room once per traveller ({euros(total)}; one room is booked)")


# -- R.3: an arithmetic slip in the total ---------------------------------------------
def _r3_total(inp: GenInput) -> Generated | None:
    found = _sum(inp)
    if found is None:
        return None
    call, m = found
    travellers, fare, nights, nightly, total = (int(m.group(i)) for i in range(1, 6))
    digits = str(total)
    slips = [total + 10, total - 10, total + 1, total - 100 if total > 150 else total + 100]
    if len(digits) >= 2 and digits[-1] != digits[-2]:
        slips.append(int(digits[:-2] + digits[-1] + digits[-2]))
    wrong = inp.rng.choice([s for s in slips if s > 0 and s != total])
    _, args, _ = call
    thought = f"{travellers} × {euros(fare)} + {nights} × {euros(nightly)} = {euros(wrong)}."
    return Generated(render_call(call[0], {**args, "total": wrong}, thought),
                     f"adds up the total as {euros(wrong)} (it is {euros(total)})")


def _slip(inp: GenInput, value: int) -> int:
    digits = str(value)
    slips = [value + 10, value - 10 if value > 20 else value + 20]
    if len(digits) >= 2 and digits[-1] != digits[-2]:
        slips.append(int(digits[:-2] + digits[-1] + digits[-2]))
    return inp.rng.choice([v for v in slips if v > 0 and v != value])


def _r3_note(inp: GenInput) -> Generated | None:
    """The researcher copies a fare or a nightly rate with a slip."""
    found = _handoff(inp, "researcher", "booker")
    if found is None:
        return None
    args, reason, thought = found
    m = (_HOTEL.search(reason) if inp.rng.random() < 0.5 else None) or _FLIGHT.search(reason)
    if m is None:
        return None
    old = int(m.group(m.lastindex or 0))
    new = _slip(inp, old)
    line = m.group(0).replace(f"at €{old} ", f"at €{new} ")
    return Generated(_with_reason(args, reason.replace(m.group(0), line), thought),
                     f"copies {m.group(1)}'s price as {euros(new)} (the search gave {euros(old)})")


def _r3_reply(inp: GenInput) -> Generated | None:
    m = re.search(r"^Total: €(\d+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or m is None:
        return None
    new = _slip(inp, int(m.group(1)))
    return Generated(inp.text.replace(m.group(0), f"Total: {euros(new)}"),
                     f"writes the total as {euros(new)} (the booking's is {euros(m.group(1))})")


def _r3_brief_date(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "concierge", "researcher")
    if found is None:
        return None
    args, reason, thought = found
    m = re.search(r" on (\d{4}-\d\d-)(\d\d),", reason)
    if m is None:
        return None
    day = int(m.group(2)) + inp.rng.choice([-1, 1])
    new = f" on {m.group(1)}{day:02d},"
    return Generated(_with_reason(args, reason.replace(m.group(0), new, 1), thought),
                     f"copies the flying date as {m.group(1)}{day:02d} (the customer wrote {m.group(1)}{m.group(2)})")


# -- R.4: the request read as another -------------------------------------------------
_OTHER_FLIGHT_RULE = {"the cheapest": "the earliest departure", "the earliest departure": "the cheapest",
                      "the cheapest direct": "the earliest departure"}


def _r4_brief(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "concierge", "researcher")
    if found is None:
        return None
    args, reason, thought = found
    m = re.search(r"^Flight: (.+)$", reason, re.M)
    trip = re.search(r"^Trip: (.+?), (\w+) to (\w+) on", reason, re.M)
    if m is None or trip is None:
        return None
    if inp.rng.random() < 0.5 and m.group(1) in _OTHER_FLIGHT_RULE:
        new = _OTHER_FLIGHT_RULE[m.group(1)]
        return Generated(_with_reason(args, reason.replace(m.group(0), f"Flight: {new}"), thought),
                         f"reads the customer's wish as {new} flight, not {m.group(1)}")
    line = trip.group(0)
    back = line.replace(f"{trip.group(2)} to {trip.group(3)}", f"{trip.group(3)} to {trip.group(2)}")
    return Generated(_with_reason(args, reason.replace(line, back), thought),
                     f"reads the trip backwards: from {trip.group(3)} to {trip.group(2)}")


# -- PL.1 / PL.2: a plan that cannot get the trip booked --------------------------------
def _plan_line(inp: GenInput, n: int) -> tuple[dict[str, Any], str, str, re.Match[str]] | None:
    found = _handoff(inp, "concierge", "researcher")
    if found is None:
        return None
    m = re.search(rf"^{n}\. (.+)$\n?", found[1], re.M)
    return (*found, m) if m else None


def _pl1_no_hotel(inp: GenInput) -> Generated | None:
    found = _plan_line(inp, 2)
    if found is None:
        return None
    args, reason, thought, m = found
    plan = reason.replace(m.group(0), "").replace("\n3. ", "\n2. ")
    return Generated(_with_reason(args, plan, thought), "the plan has no step that finds a hotel")


def _pl2_hotel_desk(inp: GenInput) -> Generated | None:
    found = _plan_line(inp, 2)
    if found is None or not m_researcher(found[3]):
        return None
    args, reason, thought, m = found
    line = m.group(0).replace("researcher:", "hotel desk:", 1)
    return Generated(_with_reason(args, reason.replace(m.group(0), line), thought),
                     "the plan gives the hotel search to a hotel desk, which the agency does not have")


def m_researcher(m: re.Match[str]) -> bool:
    return m.group(1).startswith("researcher:")


# -- PL.3: the researcher drifts to its own idea of a good trip ---------------------------
def _pl3_drift(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "researcher", "booker")
    hotels = _results(inp, "hotels")
    if found is None or not hotels:
        return None
    args, reason, _ = found
    m = _HOTEL.search(reason)
    best = max(hotels, key=lambda h: h["rating"])
    if m is None or m.group(1) == best["hotel_id"]:
        return None
    return Generated(_with_reason(args, reason.replace(m.group(0), f"Hotel: {hotel_line(best)}"),
                                  f"Chose the best-rated hotel ({best['rating']}): the best stay for the customer."),
                     f"leaves the brief's hotel rule for the best-rated hotel, {best['name']}")


# -- A.1: the wrong tool ------------------------------------------------------------------
def _a1_cancel(inp: GenInput) -> Generated | None:
    found = _call(inp, "confirm_booking", "reviewer")
    if found is None:
        return None
    return Generated(render_call("cancel_booking", found[1], found[2]), "calls cancel_booking where confirm_booking was needed")


# -- A.2: a wrong argument ------------------------------------------------------------------
def _a2_args(inp: GenInput) -> Generated | None:
    found = _call(inp)
    if found is None or found[0] == HANDOFF:
        return None
    tool, args, thought = found
    if "date" in args:
        day = int(args["date"][-2:])
        new = f"{args['date'][:-2]}{day + inp.rng.choice([-1, 1]):02d}"
        return Generated(render_call(tool, {**args, "date": new}, thought), f"searches {new}, not {args['date']}")
    if "booking_id" in args and str(args["booking_id"]).startswith("BK-"):
        new = f"BK-{int(args['booking_id'][3:]) + inp.rng.randint(1, 9)}"
        return Generated(render_call(tool, {**args, "booking_id": new}, thought),
                         f"calls {tool} with booking {new}, not {args['booking_id']}")
    if "hotel_id" in args:
        others = [h["hotel_id"] for h in _results(inp, "hotels") if h["hotel_id"] != args["hotel_id"]]
        if others:
            new = inp.rng.choice(others)
            return Generated(render_call(tool, {**args, "hotel_id": new}, thought),
                             f"books hotel {new}, not the chosen {args['hotel_id']}")
    return None


# -- A.3: an action reported, not taken --------------------------------------------------------
def _a3_claim(inp: GenInput) -> Generated | None:
    found = _sum(inp)
    if found is not None and found[0][0] == "book_trip":
        (_, args, _), m = found
        ref = f"BK-{1001 + inp.rng.randint(0, 8)}"
        note = "\n".join([f"Booking: {ref}", f"Flight: {args.get('flight_id')}", f"Hotel: {args.get('hotel_id')}",
                          f"Travellers: {args.get('travellers')}", f"Nights: {args.get('nights')}", f"Total: €{m.group(5)}"])
        return Generated(render_call(HANDOFF, {"to_agent": "reviewer", "reason": note},
                                     "Held the booking; the reviewer should check it."),
                         f"tells the reviewer that booking {ref} is held without calling book_trip")
    read = _call(inp, "get_booking", "reviewer")
    if read is not None:
        handed = next((p.text for p in reversed(inp.prefix) if p.agent == "booker" and "Action: handoff" in p.text), None)
        brief = re.search(r"Action: handoff\n(.+)$", handed or "", re.S)
        if brief:
            from .policy import final_text, read_note

            fields = read_note(str(json.loads(brief.group(1)).get("reason", "")))
            record = {"booking_id": fields.get("booking"), "flight_id": fields.get("flight"), "hotel": fields.get("hotel"),
                      "travellers": fields.get("travellers"), "nights": fields.get("nights"),
                      "total": int(re.sub(r"\D", "", fields.get("total", "")) or 0)}
            return Generated(final_text(record), "tells the customer the booking is checked and confirmed without "
                             "reading or confirming it")
    confirm = _call(inp, "confirm_booking", "reviewer")
    if confirm is not None:
        booked = next((json.loads(p.text) for p in reversed(inp.prefix)
                       if p.kind == StepKind.tool_result.value and p.text.startswith('{"booking_id"')), None)
        if booked:
            from .policy import final_text

            return Generated(final_text(booked), "tells the customer the booking is confirmed without calling confirm_booking")
    return None


def _a3_search(inp: GenInput) -> Generated | None:
    """The researcher hands on a flight or hotel it says it found, without the search that would have shown it."""
    found = _call(inp, None, "researcher")
    brief = _brief(inp)
    if found is None or found[0] not in ("search_flights", "search_hotels") or not brief:
        return None
    seen = inp.prefix_text()
    flights = _results(inp, "flights")
    if found[0] == "search_flights" or not flights:
        made = {"flight_id": f"{inp.rng.choice(['TP', 'SK', 'EI', 'LO'])}{inp.rng.randint(100, 989)}",
                "departs": f"{inp.rng.randint(6, 20):02d}:{inp.rng.choice([0, 15, 30, 45]):02d}", "stops": 0,
                "price": inp.rng.randint(80, 300)}
        flight, what = made, f"flight {made['flight_id']}"
        hotel = None
    else:
        from .policy import pick_flight

        picked = pick_flight(brief["flight_rule"], flights)
        if picked is None:
            return None
        flight = picked
        names = [n for n in (inp.distractors[1] if len(inp.distractors) > 1 else []) if n not in seen]
        if not names:
            return None
        hotel = {"hotel_id": f"H-{inp.rng.randint(100, 999)}", "name": inp.rng.choice(sorted(names)),
                 "rating": round(inp.rng.uniform(4.0, 4.9), 1), "nightly": inp.rng.randint(60, 200)}
        what = f"hotel {hotel['name']}"
    lines = [f"Flight: {flight_line(flight)}"]
    if hotel is None:
        lines.append(f"Hotel: H-{inp.rng.randint(100, 999)} {inp.rng.choice(sorted(inp.distractors[1]))} (rated 4.5) at "
                     f"€{inp.rng.randint(60, 200)} a night")
    else:
        lines.append(f"Hotel: {hotel_line(hotel)}")
    lines += [f"Travellers: {brief.get('travellers')}", f"Nights: {brief.get('nights')}"]
    return Generated(render_call(HANDOFF, {"to_agent": "booker", "reason": "\n".join(lines)},
                                 "Chosen by the brief."), f"hands on {what} as found without having searched for it")


# -- A.4: the reply in another format -------------------------------------------------------------
def _a4_reply(inp: GenInput) -> Generated | None:
    ref = re.search(r"^Booking: (BK-\d+)$", inp.text, re.M)
    total = re.search(r"^Total: €(\d+)$", inp.text, re.M)
    if inp.kind != StepKind.final_answer or ref is None or total is None:
        return None
    options = [
        (inp.text.replace(total.group(0), f"Total: {total.group(1)} EUR"), "the total is not in the '€<amount>' form"),
        (inp.text.replace(total.group(0), f"Total: €{total.group(1)}.00"), "the total carries cents the reply format has not"),
        (f"Your trip is booked and confirmed (reference {ref.group(1)}, {euros(total.group(1))} in all).",
         "the reply has no 'Booking:' and 'Total:' lines"),
    ]
    text, why = inp.rng.choice(options)
    return Generated(text, why)


# -- A.5: the run ends before the trip is booked ---------------------------------------------------
def _a5_stop(inp: GenInput) -> Generated | None:
    if _handoff(inp, "concierge") is not None:
        return Generated("Thank you for your request! We are looking at flights and hotels for your trip and will get "
                         "back to you with the options shortly.", "the concierge answers the customer instead of handing off")
    researched = _handoff(inp, "researcher")
    if researched is not None:
        return Generated("Here are the options I found for your trip:\n" + researched[1],
                         "the researcher answers the customer with its choice instead of handing off to the booker")
    found = _handoff(inp, "booker", "reviewer")
    if found is not None:
        return Generated("Your trip is held for you.\n" + found[1],
                         "the booker tells the customer the trip is held instead of handing off for review")
    return None


# -- A.6: an action repeated ---------------------------------------------------------------------
def _a6_rebook(inp: GenInput) -> Generated | None:
    if _handoff(inp, "booker", "reviewer") is None:
        return None
    for p in reversed(inp.prefix):
        if p.agent == "booker" and "Action: book_trip" in p.text:
            return Generated(p.text, "books the trip again instead of handing it to the reviewer")
    return None


# -- V.1: a figure from elsewhere in the context ------------------------------------------------------
def _v1_other_fare(inp: GenInput) -> Generated | None:
    found = _sum(inp)
    flights = _results(inp, "flights")
    if found is None or not flights:
        return None
    call, m = found
    travellers, fare, nights, nightly = (int(m.group(i)) for i in (1, 2, 3, 4))
    others = [f for f in flights if f["price"] != fare]
    if not others:
        return None
    other = inp.rng.choice(others)
    total = travellers * other["price"] + nights * nightly
    return _booking(inp, total, travellers, nights, other["price"], nightly,
                    f"uses the fare of {other['flight_id']} ({euros(other['price'])}) from the search results, not the "
                    f"chosen flight's ({euros(fare)})", call)


def _v1_note_rate(inp: GenInput) -> Generated | None:
    """The researcher's note gives the chosen flight or hotel another option's price from the same results."""
    found = _handoff(inp, "researcher", "booker")
    if found is None:
        return None
    args, reason, thought = found
    use_hotel = inp.rng.random() < 0.5 and _HOTEL.search(reason) is not None
    m = _HOTEL.search(reason) if use_hotel else _FLIGHT.search(reason)
    rows = _results(inp, "hotels" if use_hotel else "flights")
    key = "nightly" if use_hotel else "price"
    if m is None:
        return None
    old = int(m.group(m.lastindex or 0))
    others = [r for r in rows if r[key] != old]
    if not others:
        return None
    other = inp.rng.choice(others)
    line = m.group(0).replace(f"at €{old} ", f"at €{other[key]} ")
    name = other.get("name") or other.get("flight_id")
    return Generated(_with_reason(args, reason.replace(m.group(0), line), thought),
                     f"gives {m.group(1)} the price of {name} ({euros(other[key])}) from the same results")


# -- V.2: the review skipped where it mattered ---------------------------------------------------------
def _v2_confirm_unchecked(inp: GenInput) -> Generated | None:
    """The reviewer confirms, without reading it, a booking held for other nights or travellers than asked."""
    found = _call(inp, "get_booking", "reviewer")
    asked = re.search(r"for (\d+) travellers? .* staying (\d+) nights", inp.task_query)
    held = next((p.text for p in reversed(inp.prefix) if p.agent == "booker" and
                 re.search(r"Action: (book_trip|amend_booking)", p.text)), None)
    if found is None or asked is None or held is None:
        return None
    try:
        args = json.loads(held[held.index("{"):])
    except (ValueError, json.JSONDecodeError):
        return None
    if (args.get("travellers"), args.get("nights")) == (int(asked.group(1)), int(asked.group(2))):
        return None
    return Generated(render_call("confirm_booking", found[1], "The booker has held it as researched; confirming it."),
                     "confirms the booking without reading it, and it is held for other nights or travellers than asked")


# -- C.1: the wrong agent --------------------------------------------------------------------------------
def _c1_target(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "concierge", "researcher")
    if found is not None:
        args, reason, _ = found
        return Generated(_with_reason(args, reason, "The booker can book this straight away.", "booker"),
                         "the concierge hands the trip to the booker before anyone has searched for it")
    found = _handoff(inp, "booker", "reviewer")
    if found is not None:
        args, reason, thought = found
        return Generated(_with_reason(args, reason, "The researcher should look at the booking.", "researcher"),
                         "the booker hands the held booking to the researcher instead of the reviewer")
    return None


# -- C.2: the note passes on something else ------------------------------------------------------------
def _c2_note(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "researcher", "booker")
    if found is not None:
        args, reason, thought = found
        flights = _results(inp, "flights")
        m = _FLIGHT.search(reason)
        others = [f for f in flights if m and f["flight_id"] != m.group(1)]
        if m and others:
            other = inp.rng.choice(others)
            line = m.group(0).replace(m.group(1), other["flight_id"], 1)
            return Generated(_with_reason(args, reason.replace(m.group(0), line), thought),
                             f"the note names flight {other['flight_id']} at the chosen flight's fare ({m.group(1)} was chosen)")
    found = _handoff(inp, "booker", "reviewer")
    if found is not None:
        args, reason, thought = found
        ref = re.search(r"^Booking: BK-(\d+)$", reason, re.M)
        if ref:
            new = f"BK-{int(ref.group(1)) + inp.rng.randint(1, 9)}"
            return Generated(_with_reason(args, reason.replace(ref.group(0), f"Booking: {new}"), thought),
                             f"the note gives booking {new} (it is BK-{ref.group(1)})")
    return None


# -- C.3: the reviewer takes the booker's word over the customer's -------------------------------------------
def _c3_trust_booker(inp: GenInput) -> Generated | None:
    found = _handoff(inp, "reviewer", "booker")
    if found is None or "Fix:" not in found[1]:
        return None
    ref = re.search(r"^Booking: (BK-\d+)$", found[1], re.M)
    if ref is None:
        return None
    return Generated(render_call("confirm_booking", {"booking_id": ref.group(1)},
                                 "The booker has set the nights and travellers; I go by its note."),
                     "confirms the booking as the booker noted it, though it differs from the customer's request")


MUTATORS = {
    "R.1": [_r1_note_price, _r1_total],
    "R.2": [_r2_choice, _r2_rooms],
    "R.3": [_r3_total, _r3_note, _r3_reply, _r3_brief_date],
    "R.4": [_r4_brief],
    "PL.1": [_pl1_no_hotel],
    "PL.2": [_pl2_hotel_desk],
    "PL.3": [_pl3_drift],
    "A.1": [_a1_cancel],
    "A.2": [_a2_args],
    "A.3": [_a3_claim, _a3_search],
    "A.4": [_a4_reply],
    "A.5": [_a5_stop],
    "A.6": [_a6_rebook],
    "V.1": [_v1_other_fare, _v1_note_rate],
    "V.2": [_v2_confirm_unchecked],
    "C.1": [_c1_target],
    "C.2": [_c2_note],
    "C.3": [_c3_trust_booker],
}

__all__ = ["MUTATORS"]
