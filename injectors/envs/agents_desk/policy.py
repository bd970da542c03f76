"""The simulated agents of `agents_desk`: a function of the chat request the OpenAI Agents SDK sends.

Each agent reads the request as the SDK builds it: its instructions, the
customer's message, and the whole history the SDK hands on (assistant turns
with their `tool_calls`, `role: "tool"` results, the `transfer_to_<agent>`
handoff call and its `{"assistant": ...}` result). It answers with text in the
environment's action form (`Action: <tool>` then the JSON arguments, after an
optional thought; see `agents_wire`), or with the JSON of the team's
structured output (`Resolution`). A competent desk:

- **Request Screen** (input guardrail agent) says whether the message is a
  store support request;
- **Triage** verifies that the sender owns the order (`verify_customer`),
  declines if not, else hands off to the right specialist with a case note
  (the specialists' brief: case, order, item, quantity, condition);
- **Refunds Specialist** looks the order up, reads the policy on the case's
  topic, computes the refund or store credit from the order's figures and the
  policy's, issues it, adds a case note and reports the resolution (or
  declines when the policy says no);
- **Orders Specialist** looks the order up and, if it is still processing,
  changes the item's quantity (by SKU, by the difference in units), notes it
  and reports the new subtotal.

Specialists act on the triage note (it is their brief) and on the latest
order they looked up. Recovered mistakes (rate `noise`): the order id in
lower case, an unknown policy topic, an amount sent as text, an item named
instead of its SKU; the store's tool answers with an error and the agent
retries.
"""

from __future__ import annotations

import json
import re
from datetime import date
from decimal import Decimal
from typing import Any


from .world import CASES, TOPICS, cents, money
from .wire import Call, history, render_call
from ..framework import chat_turn

SLUGS = {"screen": "Request Screen", "triage": "Triage", "refunds": "Refunds Specialist", "orders": "Orders Specialist"}
HANDOFF = {"Refunds Specialist": "transfer_to_refunds_specialist", "Orders Specialist": "transfer_to_orders_specialist"}
WRITES = ("issue_refund", "issue_store_credit", "update_order")
_FAMILY_OF_CASE = {v: k for k, v in CASES.items()}


def read_request(text: str) -> dict[str, Any] | None:
    """What the customer asks (the triage agent's reading of the message)."""
    email = re.search(r"\(([^()\s]+@[^()\s]+)\)", text)
    oid = re.search(r"\border (A\d{4})\b", text)
    if email is None or oid is None:
        return None
    req: dict[str, Any] = {"email": email.group(1), "order_id": oid.group(1), "item": "", "quantity": 0, "detail": ""}
    units = re.search(r"(\d+) units? of the (.+?) (?:were|was|from)\b", text)
    change = re.search(r"quantity of the (.+?) in my order \S+ to (\d+)", text)
    if "damaged" in text and units:
        req.update(family="damaged", item=units.group(2), quantity=int(units.group(1)))
    elif "return" in text and units:
        req.update(family="return", item=units.group(2), quantity=int(units.group(1)),
                   detail="opened" if "opened" in text else "unopened")
    elif "compensation" in text:
        req.update(family="late")
    elif change:
        req.update(family="change", item=change.group(1), detail=change.group(2))
    else:
        return None
    return req


def note_text(req: dict[str, Any]) -> str:
    lines = [f"Verified {req['email']} as the owner of order {req['order_id']}.", f"Case: {CASES[req['family']]}",
             f"Order: {req['order_id']}"]
    if req["item"]:
        lines.append(f"Item: {req['item']}")
    if req["family"] in ("damaged", "return"):
        lines.append(f"Quantity: {req['quantity']}")
    if req["family"] == "return":
        lines.append(f"Condition: {req['detail']}")
    if req["family"] == "change":
        lines.append(f"New quantity: {req['detail']}")
    return "\n".join(lines)


def read_note(text: str) -> dict[str, str]:
    """The fields of a triage case note (`Key: value` lines)."""
    return {k.strip().lower(): v.strip() for k, v in re.findall(r"^([A-Z][a-z ]+):\s*(.+)$", text, re.M)}


def resolution(kind: str, order_id: str, amount: Decimal | float, message: str) -> str:
    return json.dumps({"resolution": kind, "order_id": order_id, "amount": float(cents(amount)), "message": message})


class DeskPolicy:
    """The simulated desk: `respond(agent slug, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        calls = history(messages, Call)
        if agent == "screen":
            about = "an order" if re.search(r"\border A\d{4}\b", user) else "something"
            return json.dumps({"is_store_request": True, "reason": f"A customer asks the store for help with {about}."})
        if agent == "triage":
            return self.triage(user, calls, chance)
        if agent in ("refunds", "orders"):
            handoffs = [c for c in calls if c.tool == HANDOFF[SLUGS[agent]]]
            note = read_note(handoffs[-1].thought) if handoffs else {}
            mine = [c for c in calls if handoffs and c.position > handoffs[-1].position]
            if agent == "refunds":
                return self.refunds(note, mine, chance)
            return self.orders(note, mine, chance)
        raise ValueError(f"agents_desk: no simulated agent {agent!r}")

    # -- triage ---------------------------------------------------------------
    def triage(self, user: str, calls: list[Call], chance) -> str:
        req = read_request(user)
        if req is None:
            return resolution("declined", "", 0, "I could not tell which order and request you mean; please write again "
                                                  "with your order number and what you need.")
        checks = [c for c in calls if c.tool == "verify_customer" and c.result is not None]
        if not checks or str(checks[-1].result).startswith("error"):
            oid = req["order_id"]
            if not checks and chance("lower-case-id"):
                oid = oid.lower()
            return render_call("verify_customer", {"order_id": oid, "email": req["email"]},
                               f"First I check that {req['email']} owns order {req['order_id']}.")
        if not checks[-1].ok:
            return resolution("declined", req["order_id"], 0, f"I'm sorry, I cannot act on order {req['order_id']}: "
                              "the email you wrote from is not the one on the order.")
        target = "Orders Specialist" if req["family"] == "change" else "Refunds Specialist"
        return render_call(HANDOFF[target], {}, note_text(req))

    # -- refunds --------------------------------------------------------------
    @staticmethod
    def _looked_up(note: dict[str, str], mine: list[Call], chance) -> tuple[dict[str, Any] | None, str | None]:
        """(the latest order looked up, or None and the lookup to make now)."""
        lookups = [c for c in mine if c.tool == "lookup_order" and c.result is not None]
        good = [c for c in lookups if c.ok]
        if good:
            return json.loads(good[-1].result or "{}"), None
        oid = note.get("order", "")
        if not lookups and chance("lower-case-id"):
            oid = oid.lower()
        return None, render_call("lookup_order", {"order_id": oid}, f"Looking up order {note.get('order', '')}.")

    def refunds(self, note: dict[str, str], mine: list[Call], chance) -> str:
        family = _FAMILY_OF_CASE.get(note.get("case", ""))
        oid = note.get("order", "")
        if family not in ("damaged", "return", "late"):
            return resolution("declined", oid, 0, "This request is not a refund or compensation case, which is all "
                                                  "I can handle; please contact the orders team.")
        done = [c for c in mine if c.tool in WRITES and c.ok]
        if done:
            return self._finish(oid, done, mine)
        order, lookup = self._looked_up(note, mine, chance)
        if order is None:
            return lookup or ""
        policies = [c for c in mine if c.tool == "get_policy" and c.result is not None]
        if not policies or not policies[-1].ok:
            topic = TOPICS[family]
            if not policies and chance("topic"):
                topic = {"damaged": "damage", "return": "refunds", "late": "late_orders"}[family]
            return render_call("get_policy", {"topic": topic}, f"Reading the store's policy on {TOPICS[family].replace('_', ' ')}.")
        decision = decide(family, note, order, policies[-1].result or "")
        if decision[0] == "declined":
            return resolution("declined", order.get("order_id", oid), 0, decision[2])
        tool, amount, thought = decision
        attempts = [c for c in mine if c.tool == tool]
        value: Any = float(amount)
        if not attempts and chance("amount-text"):
            value = money(amount)
        reason = {"damaged": "damaged items", "return": "returned items", "late": "late delivery"}[family]
        return render_call(tool, {"order_id": order.get("order_id", oid), "amount": value, "reason": reason}, thought)

    @staticmethod
    def _finish(oid: str, done: list[Call], mine: list[Call]) -> str:
        last = done[-1]
        oid = str(last.args.get("order_id", oid))
        figure = re.search(r"\$(\d+\.\d\d)", last.result or "")
        amount = Decimal(figure.group(1)) if figure else Decimal(0)
        if last.tool == "update_order":
            kind, what = "order_updated", f"Your order {oid} is updated; its item subtotal is now {money(amount)}."
        elif last.tool == "issue_store_credit":
            kind, what = "store_credit", f"We have added {money(amount)} of store credit for order {oid}."
        else:
            kind, what = "refund", f"We have refunded {money(amount)} for order {oid} to your original payment method."
        if not any(c.tool == "add_case_note" and c.position > last.position for c in mine):
            return render_call("add_case_note", {"order_id": oid, "note": (last.result or "").rstrip(".")},
                               "Recording what was done on the order.")
        return resolution(kind, oid, amount, what)

    # -- orders ---------------------------------------------------------------
    def orders(self, note: dict[str, str], mine: list[Call], chance) -> str:
        oid = note.get("order", "")
        if _FAMILY_OF_CASE.get(note.get("case", "")) != "change":
            return resolution("declined", oid, 0, "This request is not a change to an order, which is all I can "
                                                  "handle; please contact the refunds team.")
        done = [c for c in mine if c.tool in WRITES and c.ok]
        if done:
            return self._finish(oid, done, mine)
        order, lookup = self._looked_up(note, mine, chance)
        if order is None:
            return lookup or ""
        if order.get("status") != "processing":
            return resolution("declined", order.get("order_id", oid), 0,
                              f"Order {order.get('order_id', oid)} is already {order.get('status')}, so it can no longer be changed.")
        item = next((i for i in order.get("items", []) if i.get("name") == note.get("item")), None)
        if item is None:
            return resolution("declined", order.get("order_id", oid), 0,
                              f"Order {order.get('order_id', oid)} has no {note.get('item')}, so there is nothing to change.")
        try:
            qty = int(note.get("new quantity", ""))
        except ValueError:
            return resolution("declined", oid, 0, "I could not tell what the new quantity should be.")
        attempts = [c for c in mine if c.tool == "update_order"]
        sku = item["name"] if not attempts and chance("name-for-sku") else item["sku"]
        n = item["quantity"]
        return render_call("update_order", {"order_id": order["order_id"], "sku": sku, "change": qty - n},
                           f"The order is still processing and has {n} × {item['name']}; to make it {qty}: "
                           f"change {qty - n:+d}.")


def _figure(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None


def decide(family: str, note: dict[str, str], order: dict[str, Any], policy: str) -> tuple[str, Decimal, str]:
    """(tool, amount, thought) of the write the policy calls for, or ("declined", 0, the reason to the customer)."""
    oid = order.get("order_id", "")
    today = date.fromisoformat(order.get("today", "2026-01-01"))
    if family == "late":
        threshold, rate = _figure(r"more than (\d+) days", policy), _figure(r"of (\d+)% of the item subtotal", policy)
        if threshold is None or rate is None or not order.get("delivered"):
            return "declined", Decimal(0), "I could not apply the late-delivery policy to this order."
        late = (date.fromisoformat(order["delivered"]) - date.fromisoformat(order["promised"])).days
        if late <= threshold:
            return "declined", Decimal(0), (f"Order {oid} arrived {late} days after the promised date; compensation "
                                            f"applies only after more than {threshold} days.")
        sub = sum((Decimal(i["unit_price"]) * i["quantity"] for i in order.get("items", [])), Decimal(0))
        amount = cents(sub * rate / 100)
        return "issue_store_credit", amount, (f"Delivered {late} days after the promised date (more than {threshold}): "
                                              f"{rate}% of the {money(sub)} item subtotal = {money(amount)}.")
    item = next((i for i in order.get("items", []) if i.get("name") == note.get("item")), None)
    try:
        k = int(note.get("quantity", ""))
    except ValueError:
        k = 0
    if item is None or not 0 < k <= item["quantity"]:
        return "declined", Decimal(0), f"Order {oid} does not hold {k} × {note.get('item')}, so I cannot refund that."
    price = Decimal(item["unit_price"])
    if family == "damaged":
        amount = cents(price * k)
        return "issue_refund", amount, f"{k} × {money(price)} = {money(amount)} for the damaged {item['name']}."
    window, fee = _figure(r"within (\d+) days", policy), _figure(r"(\d+)% restocking fee", policy)
    if window is None or fee is None or not order.get("delivered"):
        return "declined", Decimal(0), "I could not apply the returns policy to this order."
    days = (today - date.fromisoformat(order["delivered"])).days
    if days > window:
        return "declined", Decimal(0), (f"Order {oid} was delivered {days} days ago, past the {window}-day return "
                                        "window, so it cannot be refunded.")
    if note.get("condition") == "opened":
        amount = cents(price * k * (100 - fee) / 100)
        return "issue_refund", amount, (f"Delivered {days} days ago (within {window}). Opened: {k} × {money(price)} "
                                        f"less {fee}% = {money(amount)}.")
    amount = cents(price * k)
    return "issue_refund", amount, (f"Delivered {days} days ago (within {window}). Unopened: {k} × {money(price)} = "
                                    f"{money(amount)}.")
