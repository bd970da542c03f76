"""The simulated store behind `agents_desk`: tasks, orders, the desk's tools and the correct resolution.

A task is one customer message about one order (a damaged-item refund, a
return, compensation for a late delivery, a change to an order), with the
store's data in `task.metadata["store"]`: the orders (items, prices, status,
dates), which customer owns each, today's date and the store's policy
figures (return window, restocking fee, lateness threshold, credit rate),
which vary per task so that an agent has to read them. `resolve` computes
the correct resolution (what must be written to the store, and what the
desk must report); `Store` runs the tools over the data and logs every
verification and write in order, which is what the evaluator checks.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

FAMILIES = ("damaged", "return", "late", "change")

CATALOGUE = (
    ("LMP-204", "Desk Lamp", "29.99"), ("KTL-310", "Electric Kettle", "44.50"), ("MUG-118", "Travel Mug", "14.25"),
    ("BAG-455", "Laptop Bag", "62.00"), ("CHR-771", "Phone Charger", "19.95"), ("HDP-602", "Headphones", "89.90"),
    ("BTL-129", "Water Bottle", "12.40"), ("PLW-338", "Memory Pillow", "36.75"), ("PAN-540", "Frying Pan", "27.80"),
    ("TWL-215", "Bath Towel", "9.60"), ("CLK-803", "Wall Clock", "23.45"), ("SPK-917", "Bluetooth Speaker", "54.20"),
)
NAMES = ("Jane Doe", "Omar Haddad", "Lena Fischer", "Ravi Patel", "Sofia Costa", "Tom Baker", "Mei Chen",
         "Ada Novak", "Luis Romero", "Nora Berg")
TODAY = date(2026, 3, 20)
TOPICS = {"damaged": "damaged_items", "return": "returns", "late": "late_delivery", "change": "order_changes"}
CASES = {"damaged": "damaged item refund", "return": "return", "late": "late delivery compensation",
         "change": "order change"}


def cents(value: Decimal | str | float) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def money(value: Decimal | str | float) -> str:
    return f"${cents(value)}"


def email_of(name: str) -> str:
    return name.lower().replace(" ", ".") + "@example.com"


def policy_text(topic: str, figures: dict[str, int]) -> str | None:
    """The store's policy on `topic`, with this task's figures (what `get_policy` returns)."""
    texts = {
        "damaged_items": ("Damaged items: refund the unit price of each damaged unit to the original payment "
                          "method with issue_refund. Shipping is not refunded."),
        "returns": (f"Returns: items returned within {figures['window']} days of delivery are refunded with "
                    "issue_refund. Unopened items: the full unit price. Opened items: the unit price less a "
                    f"{figures['fee']}% restocking fee, rounded to the cent. Past {figures['window']} days: no "
                    "refund; decline politely."),
        "late_delivery": (f"Late delivery: if an order was delivered more than {figures['late']} days after the "
                          f"promised date, issue store credit with issue_store_credit of {figures['credit']}% of "
                          "the item subtotal (all items, without shipping), rounded to the cent. Otherwise decline "
                          "politely."),
        "order_changes": ("Order changes: the items of an order in status 'processing' can be changed with "
                          "update_order (quantity 0 removes the item). Shipped or delivered orders cannot be "
                          "changed; decline politely."),
    }
    return texts.get(topic)


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the customer's message, the store's data) of one task of `family`."""
    names = list(NAMES)
    rng.shuffle(names)
    owner, stranger = names[0], names[1]
    products = list(CATALOGUE)
    rng.shuffle(products)
    oid, other, third = (f"A{n}" for n in rng.sample(range(1000, 9999), 3))
    items: list[dict[str, Any]] = [{"sku": s, "name": n, "unit_price": p, "quantity": rng.randint(1, 4)}
                                   for s, n, p in products[:rng.randint(2, 3)]]
    figures = {"window": rng.choice([21, 30, 45]), "fee": rng.choice([10, 15, 20]), "late": rng.choice([2, 3, 5]),
               "credit": rng.choice([10, 15])}
    # Most returns fall inside the window and most late deliveries past the threshold (a few do not).
    promised = TODAY - timedelta(days=rng.randint(5, 40) if family == "return" else rng.randint(14, 60))
    delivered: date | None = promised + timedelta(days=rng.randint(0, 3) if family == "return" else rng.randint(1, 12))
    status = "delivered"
    target = items[0]
    target["quantity"] = max(target["quantity"], 2)
    k = rng.randint(1, target["quantity"])
    detail = ""
    if family == "change":
        status = rng.choice(["processing"] * 5 + ["shipped"])
        delivered = None
        new_qty = rng.choice([q for q in range(0, 6) if q != target["quantity"]])
        detail = str(new_qty)
    elif family == "return":
        detail = rng.choice(["opened", "unopened"])
    order = {"order_id": oid, "owner": owner, "status": status, "promised": promised.isoformat(),
             "delivered": delivered.isoformat() if delivered else None, "shipping": rng.choice(["4.99", "5.99", "0.00"]),
             "items": items}
    others = [{"order_id": other, "owner": owner, "status": "delivered", "promised": (promised - timedelta(days=40)).isoformat(),
               "delivered": (promised - timedelta(days=38)).isoformat(), "shipping": "4.99",
               "items": [{"sku": s, "name": n, "unit_price": p, "quantity": 1} for s, n, p in products[3:5]]},
              {"order_id": third, "owner": stranger, "status": "delivered", "promised": promised.isoformat(),
               "delivered": promised.isoformat(), "shipping": "0.00",
               "items": [{"sku": s, "name": n, "unit_price": p, "quantity": 2} for s, n, p in products[5:7]]}]
    # One customer in eight writes about someone else's order: the desk must not act on it.
    impostor = rng.random() < 0.125
    sender = stranger if impostor else owner
    store = {"today": TODAY.isoformat(), "figures": figures, "orders": [order, *others], "family": family,
             "request": {"order_id": oid, "sku": target["sku"], "item": target["name"], "quantity": k,
                         "detail": detail, "email": email_of(sender)}}
    return request_text(rng, family, sender, oid, target["name"], k, detail, promised), store


def request_text(rng: random.Random, family: str, sender: str, oid: str, item: str, k: int, detail: str,
                 promised: date) -> str:
    hello = rng.choice(["Hi, this is", "Hello, I'm", "Good morning, my name is"])
    me = f"{hello} {sender} ({email_of(sender)})."
    units = f"{k} unit{'s' if k > 1 else ''} of the {item}"
    if family == "damaged":
        return f"{me} My order {oid} arrived yesterday and {units} {'were' if k > 1 else 'was'} damaged in the box. Could you refund {'them' if k > 1 else 'it'}?"
    if family == "return":
        state = ("I opened them but they are not what I needed." if detail == "opened"
                 else "They are still sealed in the original packaging.")
        return f"{me} I would like to return {units} from order {oid}. {state}"
    if family == "late":
        return (f"{me} My order {oid} was promised for {promised.isoformat()} but arrived later than that. "
                "Is there any compensation for the delay?")
    return f"{me} Please change the quantity of the {item} in my order {oid} to {detail}."


@dataclass(frozen=True)
class Resolution:
    kind: str  # refund | store_credit | order_updated | declined
    amount: Decimal
    writes: tuple[tuple[str, ...], ...]


def find(store: dict[str, Any], oid: str) -> dict[str, Any] | None:
    return next((o for o in store["orders"] if o["order_id"] == oid), None)


def subtotal(order: dict[str, Any]) -> Decimal:
    return sum((Decimal(i["unit_price"]) * i["quantity"] for i in order["items"]), Decimal(0))


def resolve(store: dict[str, Any]) -> Resolution:
    """The correct resolution of a task, computed from its data."""
    req, fig = store["request"], store["figures"]
    order = find(store, req["order_id"])
    assert order is not None
    if email_of(order["owner"]) != req["email"]:
        return Resolution("declined", Decimal(0), ())
    item = next(i for i in order["items"] if i["sku"] == req["sku"])
    price, k, family = Decimal(item["unit_price"]), req["quantity"], store["family"]
    today = date.fromisoformat(store["today"])
    if family == "damaged":
        amount = cents(price * k)
        return Resolution("refund", amount, (("refund", order["order_id"], str(amount)),))
    if family == "return":
        if (today - date.fromisoformat(order["delivered"])).days > fig["window"]:
            return Resolution("declined", Decimal(0), ())
        rate = Decimal(100 - fig["fee"]) / 100 if req["detail"] == "opened" else Decimal(1)
        amount = cents(price * k * rate)
        return Resolution("refund", amount, (("refund", order["order_id"], str(amount)),))
    if family == "late":
        late = (date.fromisoformat(order["delivered"]) - date.fromisoformat(order["promised"])).days
        if late <= fig["late"]:
            return Resolution("declined", Decimal(0), ())
        amount = cents(subtotal(order) * fig["credit"] / 100)
        return Resolution("store_credit", amount, (("store_credit", order["order_id"], str(amount)),))
    if order["status"] != "processing":
        return Resolution("declined", Decimal(0), ())
    new_qty = int(req["detail"])
    after = subtotal(order) - price * item["quantity"] + price * new_qty
    return Resolution("order_updated", cents(after), (("update", order["order_id"], item["sku"], str(new_qty)),))


def order_view(order: dict[str, Any], today: str) -> str:
    """What `lookup_order` shows: the order without its owner."""
    shown = {k: v for k, v in order.items() if k != "owner"}
    return json.dumps({**shown, "today": today}, ensure_ascii=False)


@dataclass
class Store:
    """The store during one run: the tools, and the log of verifications and writes they made."""

    data: dict[str, Any]
    log: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)  # tool call id -> output

    def call(self, tool: str, arguments: str, call_id: str) -> str:
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError:
            out = f"error: the arguments of {tool} are not valid JSON: {arguments!r}"
        else:
            out = self._run(tool, args) if isinstance(args, dict) else f"error: the arguments of {tool} must be an object"
        self.outputs[call_id] = out
        return out

    def _order(self, args: dict[str, Any]) -> dict[str, Any] | str:
        oid = str(args.get("order_id", ""))
        order = find(self.data, oid)
        if order is None:
            hint = f"; order ids are upper-case, like '{oid.upper()}'" if find(self.data, oid.upper()) else ""
            return f"error: no order {oid!r}{hint}"
        return order

    def _amount(self, args: dict[str, Any]) -> Decimal | str:
        amount = args.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            return f"error: amount must be a number, got {amount!r}"
        if amount <= 0:
            return "error: amount must be positive"
        return cents(amount)

    def _run(self, tool: str, args: dict[str, Any]) -> str:
        if tool == "get_policy":
            text = policy_text(str(args.get("topic", "")), self.data["figures"])
            return text or f"error: unknown topic {args.get('topic')!r}; topics: {', '.join(TOPICS.values())}"
        order = self._order(args)
        if isinstance(order, str):
            return order
        oid = order["order_id"]
        if tool == "lookup_order":
            return order_view(order, self.data["today"])
        if tool == "verify_customer":
            ok = email_of(order["owner"]) == str(args.get("email", "")).strip().lower()
            self.log.append({"event": "verify", "order_id": oid, "ok": ok})
            return (f"verified: the customer owns order {oid}" if ok
                    else f"not verified: {args.get('email')!r} is not the email on order {oid}")
        if tool in ("issue_refund", "issue_store_credit"):
            amount = self._amount(args)
            if isinstance(amount, str):
                return amount
            kind = "refund" if tool == "issue_refund" else "store_credit"
            self.log.append({"event": kind, "order_id": oid, "amount": str(amount)})
            label = "Refund" if kind == "refund" else "Store credit"
            return f"{label} of {money(amount)} issued for order {oid}."
        if tool == "update_order":
            return self._update(order, args)
        if tool == "add_case_note":
            return f"Note added to order {oid}."
        return f"error: unknown tool {tool!r}"

    def _update(self, order: dict[str, Any], args: dict[str, Any]) -> str:
        oid, sku = order["order_id"], str(args.get("sku", ""))
        change = args.get("change")
        if isinstance(change, bool) or not isinstance(change, int) or change == 0:
            return f"error: change must be a non-zero whole number of units, got {change!r}"
        if order["status"] != "processing":
            return f"error: order {oid} is {order['status']} and cannot be changed"
        item = next((i for i in order["items"] if i["sku"] == sku), None)
        if item is None:
            return f"error: order {oid} has no item with SKU {sku!r}; use the item's SKU"
        before = item["quantity"]
        qty = before + change
        if qty < 0:
            return f"error: order {oid} has only {before} of {item['name']}; it cannot change by {change}"
        item["quantity"] = qty
        self.log.append({"event": "update", "order_id": oid, "sku": sku, "quantity": str(qty)})
        return (f"Order {oid} updated: {item['name']} quantity {before} -> {qty}; item subtotal now "
                f"{money(subtotal(order))}.")


def writes(log: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The writes of a store log, in the form of `Resolution.writes`."""
    out: list[tuple[str, ...]] = []
    for e in log:
        if e["event"] in ("refund", "store_credit"):
            out.append((e["event"], e["order_id"], e["amount"]))
        elif e["event"] == "update":
            write = ("update", e["order_id"], e["sku"], e["quantity"])
            if not out or out[-1] != write:  # setting the same quantity again changes nothing
                out.append(write)
    return out


def unverified_writes(log: list[dict[str, Any]]) -> list[str]:
    """Orders written to before a successful verification of that order (the desk's rule)."""
    verified: set[str] = set()
    bad = []
    for e in log:
        if e["event"] == "verify":
            if e["ok"]:
                verified.add(e["order_id"])
        elif e["order_id"] not in verified:
            bad.append(e["order_id"])
    return bad

