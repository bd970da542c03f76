"""The simulated travel agency behind `workflow_team`: tasks, flights and hotels, the tools, the correct booking.

A task is one customer's trip request (travellers, origin, destination, a
flying date, nights) with a way to choose the flight and the hotel, one of
three families: `budget` (the cheapest flight, the cheapest hotel rated at
least r), `comfort` (the cheapest direct flight, the best-rated hotel at
most €c a night) and `early` (the earliest flight of the day, the cheapest
hotel rated at least r). The agency's data is in `task.metadata["world"]`:
five flights on the route that day and five hotels in the destination,
drawn so that each criterion matters (the cheapest flight of a `comfort`
task has a stop, the cheapest hotel is under the rating floor, the
best-rated hotel is over the cap). `resolve` computes the correct booking;
`Agency` runs the tools over the data and logs every write, which is what
the evaluator checks. Prices are whole euros, so amounts are exact.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

FAMILIES = ("budget", "comfort", "early")
CITIES = ("Lisbon", "Oslo", "Vienna", "Prague", "Dublin", "Athens", "Krakow", "Porto", "Seville", "Bergen")
AIRLINES = ("TP", "SK", "OS", "OK", "EI", "A3", "LO", "FR")
HOTELS = ("Harbour Inn", "Old Town Suites", "Riverside Lodge", "Plaza Hotel", "Garden House", "Station Hotel",
          "Bellevue", "Cathedral Rooms", "Park View", "Castle Hotel")
PEOPLE = ("Ana Costa", "Omar Haddad", "Lena Fischer", "Ravi Patel", "Tom Baker", "Mei Chen", "Ada Novak", "Luis Romero")
WRITES = ("book_trip", "amend_booking", "confirm_booking", "cancel_booking")


def euros(value: int | float | str) -> str:
    """A whole euro amount as the team writes it (`€120`); a string of digits, as a reply states it, too."""
    return f"€{int(value)}"


def request_text(req: dict[str, Any]) -> str:
    """The customer's message for a request."""
    who = f"{req['travellers']} traveller{'s' if req['travellers'] > 1 else ''}"
    if req["family"] == "comfort":
        wish = f"the cheapest direct flight and the best-rated hotel costing at most {euros(req['cap'])} a night"
    else:
        flight = "the cheapest flight" if req["family"] == "budget" else "the earliest flight of the day"
        wish = f"{flight} and the cheapest hotel rated at least {req['rating']}"
    return (f"Hi, this is {req['customer']}. Please book a trip for {who} from {req['origin']} to {req['destination']}, "
            f"flying on {req['date']} and staying {req['nights']} nights. I'd like {wish}. Please tell me the booking "
            "reference and the total price.")


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the customer's message, the agency's data) of one task of `family`."""
    origin, destination = rng.sample(CITIES, 2)
    req: dict[str, Any] = {"family": family, "customer": rng.choice(PEOPLE), "origin": origin, "destination": destination,
                           "date": f"2026-{rng.randint(4, 9):02d}-{rng.randint(10, 28):02d}",
                           "travellers": rng.randint(1, 3), "nights": rng.randint(2, 5)}
    while True:
        flights = []
        prices = rng.sample(range(60, 420, 7), 5)
        minutes = sorted(rng.sample(range(6 * 60, 21 * 60, 5), 5))
        order = list(range(5))
        rng.shuffle(order)
        for k in order:
            code = rng.choice(AIRLINES)
            flights.append({"flight_id": f"{code}{rng.randint(100, 989)}", "departs": f"{minutes[k] // 60:02d}:{minutes[k] % 60:02d}",
                            "stops": rng.choice((0, 0, 1)), "price": prices[k]})
        direct = [f for f in flights if f["stops"] == 0]
        cheapest = min(flights, key=lambda f: f["price"])
        if len({f["flight_id"] for f in flights}) == 5 and direct and cheapest["stops"] == 1:
            break
    names = rng.sample(HOTELS, 5)
    while True:
        ratings = [round(rng.uniform(3.0, 4.9), 1) for _ in names]
        nightly = rng.sample(range(55, 260, 5), 5)
        hotels: list[dict[str, Any]] = [{"hotel_id": f"H-{rng.randint(100, 999)}", "name": n, "rating": r, "nightly": p}
                                        for n, r, p in zip(names, ratings, nightly)]
        if len({h["hotel_id"] for h in hotels}) < 5 or len(set(ratings)) < 5:
            continue
        by_price = sorted(hotels, key=lambda h: h["nightly"])
        if family == "comfort":
            best = max(hotels, key=lambda h: h["rating"])
            under = sorted(h["nightly"] for h in hotels if h["nightly"] < best["nightly"])
            if len(under) >= 2:
                req["cap"] = under[-1] + 5 * rng.randint(0, 1)  # the best-rated hotel is over the cap
                if req["cap"] < best["nightly"]:
                    break
        else:
            # the cheapest hotel is under the floor, and some hotel is at or over it
            floor = by_price[0]["rating"] + 0.1
            above = [h for h in hotels if h["rating"] >= floor]
            if above:
                req["rating"] = round(min(4.5, max(floor, min(h["rating"] for h in above))), 1)
                if any(h["rating"] >= req["rating"] for h in hotels) and by_price[0]["rating"] < req["rating"]:
                    break
    world = {"request": req, "flights": flights, "hotels": hotels}
    return request_text(req), world


@dataclass(frozen=True)
class Booking:
    """The correct booking of a task."""

    flight: dict[str, Any]
    hotel: dict[str, Any]
    travellers: int
    nights: int

    @property
    def total(self) -> int:
        return self.travellers * self.flight["price"] + self.nights * self.hotel["nightly"]


def choose_flight(family: str, flights: list[dict[str, Any]]) -> dict[str, Any]:
    if family == "comfort":
        return min((f for f in flights if f["stops"] == 0), key=lambda f: f["price"])
    if family == "early":
        return min(flights, key=lambda f: f["departs"])
    return min(flights, key=lambda f: f["price"])


def choose_hotel(family: str, req: dict[str, Any], hotels: list[dict[str, Any]]) -> dict[str, Any]:
    if family == "comfort":
        return max((h for h in hotels if h["nightly"] <= req["cap"]), key=lambda h: h["rating"])
    return min((h for h in hotels if h["rating"] >= req["rating"]), key=lambda h: h["nightly"])


def resolve(world: dict[str, Any]) -> Booking:
    req = world["request"]
    return Booking(choose_flight(req["family"], world["flights"]), choose_hotel(req["family"], req, world["hotels"]),
                   req["travellers"], req["nights"])


def _positive_whole(*values: Any) -> list[int] | None:
    """The values as whole numbers when every one is a positive whole number, else None."""
    numbers = [_number(v) for v in values]
    return [n for n in numbers if n is not None and n > 0] if all(n is not None and n > 0 for n in numbers) else None


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


class Agency:
    """The agency's tools over a task's data; `log` holds every call (tool, arguments, ok) in order."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world
        self.bookings: dict[str, dict[str, Any]] = {}
        self.log: list[dict[str, Any]] = []
        self.outputs: dict[str, str] = {}

    def call(self, tool: str, args: dict[str, Any], call_id: str | None = None) -> str:
        out = getattr(self, tool)(**args)
        self.log.append({"tool": tool, "args": args, "ok": not out.startswith("error")})
        if call_id is not None:
            self.outputs[call_id] = out
        return out

    # -- research ----------------------------------------------------------------
    def search_flights(self, origin: str = "", destination: str = "", date: str = "") -> str:
        req = self.world["request"]
        for city in (origin, destination):
            if city not in CITIES:
                return f"error: unknown city {city!r}; cities: {', '.join(CITIES)}"
        if (origin, destination, date) != (req["origin"], req["destination"], req["date"]):
            return json.dumps({"flights": [], "note": f"no flights from {origin} to {destination} on {date}"})
        return json.dumps({"flights": self.world["flights"], "prices": "per traveller, in euros"})

    def search_hotels(self, city: str = "") -> str:
        if city not in CITIES:
            return f"error: unknown city {city!r}; cities: {', '.join(CITIES)}"
        if city != self.world["request"]["destination"]:
            return json.dumps({"hotels": [], "note": f"no rooms available in {city}"})
        return json.dumps({"hotels": self.world["hotels"], "prices": "per room and night, in euros"})

    # -- booking -----------------------------------------------------------------
    def book_trip(self, flight_id: str = "", hotel_id: str = "", travellers: Any = None, nights: Any = None,
                  total: Any = None) -> str:
        flight = next((f for f in self.world["flights"] if f["flight_id"] == flight_id), None)
        hotel = next((h for h in self.world["hotels"] if h["hotel_id"] == hotel_id), None)
        if flight is None:
            return f"error: no flight {flight_id!r} on this route and date"
        if hotel is None:
            return f"error: no hotel {hotel_id!r} in {self.world['request']['destination']}"
        values = _positive_whole(travellers, nights, total)
        if values is None:
            return "error: travellers, nights and total must be positive whole numbers (total in euros, no symbol)"
        ref = f"BK-{1001 + len(self.bookings)}"
        self.bookings[ref] = {"booking_id": ref, "flight_id": flight_id, "hotel_id": hotel_id, "hotel": hotel["name"],
                              "date": self.world["request"]["date"], "travellers": values[0], "nights": values[1],
                              "total": values[2], "status": "held"}
        return f"held booking {ref}: flight {flight_id}, {hotel['name']}, {values[0]} travellers, {values[1]} nights, total {euros(values[2])}"

    def amend_booking(self, booking_id: str = "", travellers: Any = None, nights: Any = None, total: Any = None) -> str:
        booking = self.bookings.get(booking_id)
        if booking is None or booking["status"] == "cancelled":
            return f"error: no booking {booking_id!r}"
        values = _positive_whole(travellers, nights, total)
        if values is None:
            return "error: travellers, nights and total must be positive whole numbers (total in euros, no symbol)"
        booking.update(travellers=values[0], nights=values[1], total=values[2])
        return f"amended booking {booking_id}: {values[0]} travellers, {values[1]} nights, total {euros(values[2])}"

    # -- review ------------------------------------------------------------------
    def get_booking(self, booking_id: str = "") -> str:
        booking = self.bookings.get(booking_id)
        if booking is None:
            return f"error: no booking {booking_id!r}"
        flight = next(f for f in self.world["flights"] if f["flight_id"] == booking["flight_id"])
        hotel = next(h for h in self.world["hotels"] if h["hotel_id"] == booking["hotel_id"])
        return json.dumps({**booking, "flight_price": flight["price"], "nightly": hotel["nightly"]})

    def confirm_booking(self, booking_id: str = "") -> str:
        booking = self.bookings.get(booking_id)
        if booking is None or booking["status"] == "cancelled":
            return f"error: no booking {booking_id!r}"
        booking["status"] = "confirmed"
        return f"confirmed booking {booking_id}"

    def cancel_booking(self, booking_id: str = "") -> str:
        booking = self.bookings.get(booking_id)
        if booking is None:
            return f"error: no booking {booking_id!r}"
        booking["status"] = "cancelled"
        return f"cancelled booking {booking_id}"
