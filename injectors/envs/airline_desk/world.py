"""The airline behind `airline_desk`: a task's bookings and fare policies, its question families and the answers.

A task is a customer-service request on one booking that the airline's fare
policy prices (the policy-bound booking family τ-bench's airline domain
stands for). Each task has five bookings (an id, a passenger, a flight, a
fare class, the price paid, its taxes) and the policy of each of the three
fare classes (change fee, cancellation fee, free checked bags, extra bag
price), drawn anew per task so it must be looked up. The families:
`cancel_refund` (what cancelling refunds: paid minus the cancellation fee),
`change_cost` (what moving to a dearer flight costs: its fare minus paid plus
the change fee) and `bag_fee` (what checking N bags costs: the bags beyond
the free ones at the extra bag price). All figures are whole euros.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ..docs_team.calculator import calculate

FAMILIES = ("cancel_refund", "change_cost", "bag_fee")
FARES = ("basic", "main", "flex")
PASSENGERS = ("Lina Ortiz", "Tomas Berg", "Asha Rao", "Kofi Mensah", "Mei Tanaka", "Jonas Weber", "Nadia Haddad",
              "Pavel Novak", "Sofia Reyes", "Omar Farouk")
# The policy's items, as a lookup states them and a plan names them.
POLICY_ITEMS = ("change fee", "cancellation fee", "free bags", "extra bag")
# What each family's plan computes, over the booking's and the policy's items and the question's own figure.
FORMULAS = {"cancel_refund": "paid - cancellation fee", "change_cost": "new fare - paid + change fee",
            "bag_fee": "(bags - free bags) * extra bag"}
_POLICY_LINE = re.compile(r"^- (change fee|cancellation fee|free bags|extra bag): €?(\d+)", re.M)
_BOOKING = re.compile(r"fare class (\w+), paid €(\d+) \(taxes €(\d+)\)")


def policy_text(fare: str, policy: dict[str, int]) -> str:
    """What `lookup_policy` returns for a fare class: one line per item."""
    return f"Fare class {fare}:\n" + "\n".join(
        f"- {item}: {policy[item]}" if item == "free bags" else f"- {item}: €{policy[item]}" for item in POLICY_ITEMS)


def read_policy(text: str) -> dict[str, int]:
    return {item: int(value) for item, value in _POLICY_LINE.findall(text)}


def booking_text(b: dict[str, Any]) -> str:
    """What `get_booking` returns for a booking."""
    return (f"{b['id']}: passenger {b['passenger']}, flight {b['flight']}, fare class {b['fare']}, paid €{b['paid']} "
            f"(taxes €{b['taxes']}), checked bags {b['bags']}.")


def read_booking(text: str) -> dict[str, Any] | None:
    """The fare class, price paid and taxes a booking's record states, or None."""
    m = _BOOKING.search(text)
    return {"fare class": m.group(1), "paid": int(m.group(2)), "taxes": int(m.group(3))} if m else None


def _policies(rng: random.Random) -> dict[str, dict[str, int]]:
    # the dearer the fare, the cheaper its changes and the more it includes: every item differs between classes
    change = sorted(rng.sample(range(20, 160, 5), 3), reverse=True)
    cancel = sorted(rng.sample(range(40, 180, 10), 3), reverse=True)  # below any price paid
    bag = sorted(rng.sample(range(25, 75, 5), 3), reverse=True)
    return {fare: {"change fee": change[i], "cancellation fee": cancel[i], "free bags": i, "extra bag": bag[i]}
            for i, fare in enumerate(FARES)}


def question_text(q: dict[str, Any], booking: dict[str, Any]) -> str:
    who = f"{booking['passenger']} (booking {booking['id']})"
    if q["family"] == "cancel_refund":
        return (f"{who} wants to cancel the trip. Under the fare policy, how many euros are refunded? "
                "End with a line 'ANSWER: <number>'.")
    if q["family"] == "change_cost":
        return (f"{who} wants to move to flight {q['new_flight']}, whose fare is €{q['new fare']}. Under the fare policy, "
                "how many euros does the change cost in total? End with a line 'ANSWER: <number>'.")
    return (f"{who} wants to check {q['bags']} bags in total. Under the fare policy, how many euros do the checked "
            "bags cost? End with a line 'ANSWER: <number>'.")


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the request, the bookings, policies and question) of one task of `family`."""
    ids = rng.sample(range(1000, 9999), 5)
    bookings: list[dict[str, Any]] = [{"id": f"BK-{i}", "passenger": p, "flight": f"AX {rng.randint(100, 899)}", "fare": rng.choice(FARES),
                 "paid": rng.randint(180, 640), "taxes": rng.randint(21, 79), "bags": 0}
                for i, p in zip(ids, rng.sample(PASSENGERS, 5))]
    policies = _policies(rng)
    booking = bookings[0]
    q: dict[str, Any] = {"family": family, "booking": booking["id"]}
    if family == "change_cost":
        q.update({"new_flight": f"AX {rng.randint(100, 899)}", "new fare": booking["paid"] + rng.randint(15, 140)})
    if family == "bag_fee":
        q["bags"] = policies[booking["fare"]]["free bags"] + rng.randint(1, 3)
    rng.shuffle(bookings)
    return question_text(q, booking), {"question": q, "bookings": bookings, "policies": policies}


def booking_of(world: dict[str, Any]) -> dict[str, Any]:
    return next(b for b in world["bookings"] if b["id"] == world["question"]["booking"])


def evaluate_formula(formula: str, values: dict[str, int]) -> str:
    """The formula with each named quantity replaced by its value (longest names first: 'free bags' before 'bags')."""
    out = formula
    for name in sorted(values, key=len, reverse=True):
        out = re.sub(rf"\b{re.escape(name)}\b", str(values[name]), out)
    return out


def answer_of(world: dict[str, Any]) -> int:
    """The reference answer: the family's formula on the booking's, the policy's and the question's figures."""
    q, booking = world["question"], booking_of(world)
    values = {"paid": booking["paid"], **world["policies"][booking["fare"]]}
    values.update({k: q[k] for k in ("new fare", "bags") if k in q})
    return int(calculate(evaluate_formula(FORMULAS[q["family"]], values)))
