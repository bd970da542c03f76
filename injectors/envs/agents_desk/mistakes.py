"""Error rules of `agents_desk` (tried before the generic ones): the desk's own kinds of mistakes.

Each rule reads one step in the environment's action form (see
`agents_wire`): the guardrail's verdict, Triage's `verify_customer` call or its
handoff with the case note, a specialist's tool call (a write carries its
computation as the thought) or the final `Resolution` JSON; and what came
before it (the order a specialist looked up, the policy it read).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput
from .policy import HANDOFF, note_text, read_note, read_request
from .world import cents, money
from .wire import render_call
from ..base import parse_action

WRITE_TOOLS = ("issue_refund", "issue_store_credit")
_PRICE = re.compile(r"(\d+) × \$(\d+\.\d\d)")
_SUBTOTAL = re.compile(r"(\d+)% of the \$(\d+\.\d\d) item subtotal")


def _args(inp: GenInput) -> tuple[str, dict[str, Any], str] | None:
    action = inp.action
    if action is None:
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return (action.tool, args, action.thought) if isinstance(args, dict) else None


def _order(inp: GenInput) -> dict[str, Any] | None:
    """The latest order the agent looked up (a tool result before the step)."""
    for p in reversed(inp.prefix):
        if p.kind == StepKind.tool_result.value and p.text.startswith("{") and '"items"' in p.text:
            return json.loads(p.text)
    return None


def _note(inp: GenInput) -> dict[str, str]:
    for p in reversed(inp.prefix):
        if p.agent == "Triage" and any(t in p.text for t in HANDOFF.values()):
            action = parse_action(p.text)
            return read_note(action.thought if action else p.text)
    return {}


def _write(inp: GenInput) -> tuple[str, dict[str, Any], str] | None:
    found = _args(inp)
    return found if found is not None and found[0] in WRITE_TOOLS else None


def _rewrite(inp: GenInput, tool: str, args: dict[str, Any], thought: str, amount: Decimal, reason: str,
             old: str | None = None, new: str | None = None) -> Generated:
    """The write with `amount`, its thought ending in that amount (and `old` replaced by `new`)."""
    if old is not None and new is not None:
        thought = thought.replace(old, new, 1)
    thought = re.sub(r"= \$\d+\.\d\d\.$", f"= {money(amount)}.", thought)
    return Generated(render_call(tool, {**args, "amount": float(cents(amount))}, thought), reason)


def _fee(thought: str) -> int | None:
    m = re.search(r"less (\d+)%", thought)
    return int(m.group(1)) if m else None


def _amount(k: int, price: Decimal, fee: int | None) -> Decimal:
    return cents(price * k * (100 - (fee or 0)) / 100)


# -- R.1: a figure that appears nowhere -------------------------------------------
def _r1_price(inp: GenInput) -> Generated | None:
    found = _write(inp)
    if found is None:
        return None
    tool, args, thought = found
    seen = inp.prefix_text()
    m = _PRICE.search(thought) or _SUBTOTAL.search(thought)
    if m is None:
        return None
    base = Decimal(m.group(2))
    for _ in range(10):
        new = cents(base + Decimal(inp.rng.choice([-1, 1]) * inp.rng.randint(150, 900)) / 100)
        if new > 0 and str(new) not in seen:
            break
    else:
        return None
    if m.re is _PRICE:
        amount = _amount(int(m.group(1)), new, _fee(thought))
    else:
        amount = cents(new * int(m.group(1)) / 100)
    return _rewrite(inp, tool, args, thought, amount, f"computes with {money(new)}, a figure found nowhere in the order "
                    f"(it shows {money(base)})", f"${m.group(2)}", money(new))


def _r1_item(inp: GenInput) -> Generated | None:
    m = re.search(r"^Item: (.+)$", inp.text, re.M)
    if inp.agent != "Triage" or m is None:
        return None
    seen = inp.task_query + inp.prefix_text()
    names = sorted(n for n in inp.distractors[0] if n not in seen) if inp.distractors else []
    if not names:
        return None
    new = inp.rng.choice(names)
    return Generated(inp.text.replace(m.group(0), f"Item: {new}"), f"the case note names the {new}, which the customer "
                     f"never mentioned, instead of the {m.group(1)}")


# -- R.2: the policy read to a conclusion it does not support ------------------------
def _r2_write(inp: GenInput) -> Generated | None:
    found = _write(inp)
    order = _order(inp)
    if found is None or order is None:
        return None
    tool, args, thought = found
    fee = _fee(thought)
    m = _PRICE.search(thought)
    if fee is not None and m is not None:
        k, price = int(m.group(1)), Decimal(m.group(2))
        amount = cents(price * k)
        new = re.sub(r"Opened: .*$", f"Opened, but returned within the window, so the full price applies: {k} × "
                     f"{money(price)} = {money(amount)}.", thought)
        return Generated(render_call(tool, {**args, "amount": float(amount)}, new),
                         f"refunds opened items in full although the policy deducts a {fee}% restocking fee")
    policy_fee = re.search(r"(\d+)% restocking fee", inp.prefix_text())
    if "Unopened" in thought and m is not None and policy_fee is not None:
        k, price, cut = int(m.group(1)), Decimal(m.group(2)), int(policy_fee.group(1))
        amount = _amount(k, price, cut)
        new = re.sub(r"Unopened: .*$", f"The restocking fee applies to every return: {k} × {money(price)} less {cut}% = "
                     f"{money(amount)}.", thought)
        return Generated(render_call(tool, {**args, "amount": float(amount)}, new),
                         f"deducts the {cut}% restocking fee from unopened items, which the policy refunds in full")
    shipping = Decimal(str(order.get("shipping", "0")))
    item = next((i for i in order["items"] if m is not None and i["unit_price"] == m.group(2)), None)
    if shipping <= 0 and "damaged" in thought and m is not None and item is not None and item["quantity"] > int(m.group(1)):
        n, price = item["quantity"], Decimal(m.group(2))
        amount = cents(price * n)
        new = f"The policy refunds the damaged item, so the whole line: {n} × {money(price)} = {money(amount)}."
        return Generated(render_call(tool, {**args, "amount": float(amount)}, new),
                         f"refunds all {n} units of the line although the policy refunds only the damaged ones")
    if shipping <= 0:
        return None
    if "damaged" in thought and m is not None:
        amount = cents(Decimal(m.group(2)) * int(m.group(1)) + shipping)
        new = f"{thought[:-1]}, plus the {money(shipping)} shipping = {money(amount)}."
        return Generated(render_call(tool, {**args, "amount": float(amount)}, new),
                         "adds the shipping fee although the policy says shipping is not refunded")
    s = _SUBTOTAL.search(thought)
    if s is not None:
        base = Decimal(s.group(2)) + shipping
        amount = cents(base * int(s.group(1)) / 100)
        new = thought.replace(f"the ${s.group(2)} item subtotal", f"the {money(base)} order total with shipping")
        new = re.sub(r"= \$\d+\.\d\d\.$", f"= {money(amount)}.", new)
        return Generated(render_call(tool, {**args, "amount": float(amount)}, new),
                         "computes the credit on the total with shipping although the policy says the item subtotal")
    return None


def _r2_decline(inp: GenInput) -> Generated | None:
    """A specialist that correctly declines talks itself into paying out."""
    if inp.kind != StepKind.final_answer or inp.agent != "Refunds Specialist":
        return None
    try:
        out = json.loads(inp.text)
    except json.JSONDecodeError:
        return None
    order, note = _order(inp), _note(inp)
    if out.get("resolution") != "declined" or order is None:
        return None
    msg = str(out.get("message", ""))
    window = re.search(r"delivered (\d+) days ago, past the (\d+)-day", msg)
    late = re.search(r"arrived (\d+) days after the promised date; compensation applies only after more than (\d+)", msg)
    oid = order["order_id"]
    if window is not None:
        item = next((i for i in order["items"] if i["name"] == note.get("item")), None)
        k = int(note.get("quantity", "0") or 0)
        if item is None or k <= 0:
            return None
        amount = cents(Decimal(item["unit_price"]) * k)
        thought = (f"Delivered {window.group(1)} days ago; the {window.group(2)}-day window counts from the day the "
                   f"customer asked, so the return qualifies. {k} × {money(item['unit_price'])} = {money(amount)}.")
        return Generated(render_call("issue_refund", {"order_id": oid, "amount": float(amount), "reason": "returned items"},
                                     thought), "refunds a return that the policy's window excludes")
    if late is not None:
        subtotal = sum((Decimal(i["unit_price"]) * i["quantity"] for i in order["items"]), Decimal(0))
        rate = re.search(r"of (\d+)% of the item subtotal", inp.prefix_text())
        if rate is None:
            return None
        amount = cents(subtotal * int(rate.group(1)) / 100)
        thought = (f"Delivered {late.group(1)} days after the promised date, so it was late: {rate.group(1)}% of the "
                   f"{money(subtotal)} item subtotal = {money(amount)}.")
        return Generated(render_call("issue_store_credit", {"order_id": oid, "amount": float(amount), "reason": "late delivery"},
                                     thought), f"grants late-delivery credit for a delay the policy does not compensate "
                                               f"(not more than {late.group(2)} days)")
    return None


# -- R.3: an arithmetic slip ---------------------------------------------------------
def _r3_write(inp: GenInput) -> Generated | None:
    found = _write(inp)
    if found is None:
        return None
    tool, args, thought = found
    m = re.search(r"= \$(\d+\.\d\d)\.$", thought)
    if m is None:
        return None
    right = Decimal(m.group(1))
    slips = [right + Decimal("1.00"), right - Decimal("1.00"), right + Decimal("10.00"), right * 10, right / 10]
    digits = m.group(1).replace(".", "")
    if len(digits) >= 3 and digits[-3] != digits[-2]:
        swapped = digits[:-3] + digits[-2] + digits[-3] + digits[-1]
        slips.append(Decimal(swapped[:-2] + "." + swapped[-2:]))
    wrong = cents(inp.rng.choice([s for s in slips if s > 0 and cents(s) != right]))
    return _rewrite(inp, tool, args, thought, wrong, f"computes {money(wrong)} where the figures give {money(right)}")


# -- R.4 / C.1 / C.2 / A.5 / V.2 at Triage --------------------------------------------
def _handoff(inp: GenInput) -> tuple[str, dict[str, str], str] | None:
    action = inp.action
    if inp.agent != "Triage" or action is None or action.tool not in HANDOFF.values():
        return None
    return action.tool, read_note(action.thought), action.thought


def _r4_case(inp: GenInput) -> Generated | None:
    found = _handoff(inp)
    if found is None:
        return None
    tool, note, thought = found
    case = note.get("case", "")
    other = {"damaged item refund": "return", "return": "damaged item refund", "late delivery compensation": "return",
             "order change": "return"}.get(case)
    if other is None:
        return None
    new = thought.replace(f"Case: {case}", f"Case: {other}")
    if other == "return" and "Condition:" not in new:
        new += "\nCondition: opened"
    if other != "return":
        new = re.sub(r"\nCondition: .*", "", new)
    return Generated(f"{new}\nAction: {tool}\n{{}}", f"reads the customer's {case} request as a {other}")


def _c1_target(inp: GenInput) -> Generated | None:
    found = _handoff(inp)
    if found is None:
        return None
    tool, _, thought = found
    wrong = next(t for t in HANDOFF.values() if t != tool)
    target = next(a for a, t in HANDOFF.items() if t == wrong)
    return Generated(f"{thought}\nAction: {wrong}\n{{}}", f"hands the case to the {target}, who does not handle it")


def _c2_note(inp: GenInput) -> Generated | None:
    found = _handoff(inp)
    if found is None:
        return None
    tool, note, thought = found
    options = []
    if "quantity" in note:
        k = int(note["quantity"])
        options.append(("Quantity", str(k), str(k + 1 if k == 1 else k - 1 if inp.rng.random() < 0.5 else k + 1)))
    if "condition" in note:
        options.append(("Condition", note["condition"], "unopened" if note["condition"] == "opened" else "opened"))
    if "new quantity" in note:
        q = int(note["new quantity"])
        options.append(("New quantity", str(q), str(q + 1 if q == 0 else q - 1)))
    if not options and inp.distractors and len(inp.distractors) > 3:
        others = [o for o in inp.distractors[3] if o != note.get("order")]
        if others:
            options.append(("Order", note.get("order", ""), others[0]))
    if not options:
        return None
    field, old, new = inp.rng.choice(options)
    text = thought.replace(f"{field}: {old}", f"{field}: {new}", 1)
    return Generated(f"{text}\nAction: {tool}\n{{}}", f"the case note gives {field.lower()} {new} where the customer said {old}")


def _a5_triage(inp: GenInput) -> Generated | None:
    found = _handoff(inp)
    if found is None:
        return None
    oid = found[1].get("order", "")
    return Generated(json.dumps({"resolution": "escalated", "order_id": oid, "amount": 0.0,
                                 "message": f"Thank you, your request about order {oid} has been passed on; our team "
                                            "will get back to you by email."}),
                     "closes the conversation with a promise instead of handing the case to a specialist")


def _v2_skip(inp: GenInput) -> Generated | None:
    found = _args(inp)
    if inp.agent != "Triage" or found is None or found[0] != "verify_customer":
        return None
    req = read_request(inp.task_query)
    if req is None:
        return None
    target = HANDOFF["Orders Specialist" if req["family"] == "change" else "Refunds Specialist"]
    note = note_text(req).replace(f"Verified {req['email']} as the owner of order {req['order_id']}.",
                                  f"Customer {req['email']} writes about order {req['order_id']}.")
    return Generated(f"{note}\nAction: {target}\n{{}}", "hands the case on without verifying that the sender owns the order")


def _v2_screen(inp: GenInput) -> Generated | None:
    if inp.agent != "Request Screen":
        return None
    return Generated(json.dumps({"is_store_request": False, "reason": "The message does not look like a request the "
                                 "store's support desk handles."}), "the guardrail turns away a genuine support request")


# -- A.1 / A.2 / A.3 / A.4 / A.6 ---------------------------------------------------
def _a1_write(inp: GenInput) -> Generated | None:
    found = _write(inp)
    if found is None:
        return None
    tool, args, thought = found
    other = "issue_store_credit" if tool == "issue_refund" else "issue_refund"
    return Generated(render_call(other, args, thought), f"calls {other} where the policy calls for {tool}")


def _a2_args(inp: GenInput) -> Generated | None:
    found = _args(inp)
    if found is None:
        return None
    tool, args, thought = found
    if tool == "verify_customer" and "@" in str(args.get("email")):
        user, domain = str(args["email"]).split("@", 1)
        typo = user[:-2] + user[-1] + user[-2] if len(user) > 2 else user + "s"
        return Generated(render_call(tool, {**args, "email": f"{typo}@{domain}"}, thought),
                         f"checks {typo}@{domain} where the customer wrote from {args['email']}")
    if tool == "update_order":
        order = _order(inp)
        skus = [i["sku"] for i in (order or {}).get("items", []) if i["sku"] != args.get("sku")]
        if skus:
            new = inp.rng.choice(skus)
            return Generated(render_call(tool, {**args, "sku": new}, thought), f"updates {new} instead of {args.get('sku')}")
        return None
    if tool in (*WRITE_TOOLS, "lookup_order") and inp.distractors and len(inp.distractors) > 3:
        others = [o for o in inp.distractors[3] if o != args.get("order_id")]
        if others:
            new = inp.rng.choice(sorted(others))
            return Generated(render_call(tool, {**args, "order_id": new}, thought),
                             f"calls {tool} on order {new} instead of {args.get('order_id')}")
    return None


def _a3_claim(inp: GenInput) -> Generated | None:
    found = _args(inp)
    if found is None or found[0] not in (*WRITE_TOOLS, "update_order"):
        return None
    tool, args, _ = found
    oid = str(args.get("order_id", ""))
    if tool == "update_order":
        out = {"resolution": "order_updated", "order_id": oid, "amount": 0.0,
               "message": f"Your order {oid} is updated: the item is changed by {args.get('change')}."}
    else:
        amount = Decimal(str(args.get("amount", 0))) if isinstance(args.get("amount"), (int, float)) else Decimal(0)
        kind = "refund" if tool == "issue_refund" else "store_credit"
        out = {"resolution": kind, "order_id": oid, "amount": float(cents(amount)),
               "message": f"We have {'refunded' if kind == 'refund' else 'added store credit of'} {money(amount)} for order {oid}."}
    return Generated(json.dumps(out), f"reports the {tool.replace('_', ' ')} as done without calling {tool}")


def _a4_output(inp: GenInput) -> Generated | None:
    if inp.kind not in (StepKind.final_answer, StepKind.message) or parse_action(inp.text) is not None:
        return None
    try:
        out = json.loads(inp.text)
    except json.JSONDecodeError:
        return None
    if not isinstance(out, dict):
        return None
    choice = inp.rng.randrange(3)
    if choice == 0 and "amount" in out:
        text = json.dumps({**out, "amount": money(out["amount"])})
        why = "the amount is a string with a currency sign, not the number the output schema requires"
    elif choice == 1:
        text = inp.text.rstrip("}").rstrip()
        why = "the structured output is cut off before its closing brace (not valid JSON)"
    else:
        text = str(out.get("message") or out.get("reason") or "")
        why = "answers in plain text where the agent's output type requires JSON"
    return Generated(text, why) if text and text != inp.text else None


def _a6_repeat(inp: GenInput) -> Generated | None:
    """Right after a write, the specialist makes the same write again."""
    found = _args(inp)
    if found is None or found[0] != "add_case_note":
        return None
    for p in reversed(inp.prefix):
        if p.agent == inp.agent and p.kind == StepKind.tool_call.value:
            action = parse_action(p.text)
            if action is not None and action.tool in (*WRITE_TOOLS, "update_order"):
                return Generated(p.text, f"repeats its {action.tool} call instead of moving on")
            return None
    return None


# -- V.1: a figure from elsewhere in the context -------------------------------------
def _v1_other_item(inp: GenInput) -> Generated | None:
    found = _write(inp)
    order = _order(inp)
    if found is None or order is None:
        return None
    tool, args, thought = found
    m = _PRICE.search(thought)
    item = re.search(r"for the damaged (.+)\.$", thought)
    note = _note(inp)
    name = item.group(1) if item else note.get("item")
    others = [i for i in order["items"] if i["name"] != name and i["unit_price"] != m.group(2)] if m else []
    if m is None or not others:
        return None
    other = inp.rng.choice(others)
    price = Decimal(other["unit_price"])
    amount = _amount(int(m.group(1)), price, _fee(thought))
    return _rewrite(inp, tool, args, thought, amount, f"uses the unit price of the {other['name']} ({money(price)}) "
                    f"from the order, not the {name}'s ({money(m.group(2))})", f"${m.group(2)}", money(price))


_CHANGE = re.compile(r"has (\d+) × (.+?); to make it (\d+): change [+-]?\d+\.$")


def _change(inp: GenInput) -> tuple[str, dict[str, Any], str, re.Match[str]] | None:
    found = _args(inp)
    if found is None or found[0] != "update_order":
        return None
    m = _CHANGE.search(found[2])
    return (*found, m) if m else None


def _with_change(tool: str, args: dict[str, Any], thought: str, m: re.Match[str], n: int, change: int) -> str:
    text = thought[: m.start()] + f"has {n} × {m.group(2)}; to make it {m.group(3)}: change {change:+d}."
    return render_call(tool, {**args, "change": change}, text)


def _v1_other_quantity(inp: GenInput) -> Generated | None:
    """The difference is taken from another item's quantity in the order it looked up."""
    found, order = _change(inp), _order(inp)
    if found is None or order is None:
        return None
    tool, args, thought, m = found
    n, target = int(m.group(1)), int(m.group(3))
    others = [i for i in order["items"] if i["name"] != m.group(2) and i["quantity"] not in (n, target)]
    if not others:
        return None
    other = inp.rng.choice(others)
    change = target - other["quantity"]
    return Generated(_with_change(tool, args, thought, m, other["quantity"], change),
                     f"takes {other['quantity']}, the quantity of the {other['name']} in the order, as the "
                     f"{m.group(2)}'s (it has {n}), and changes it by {change:+d}")


def _r3_change(inp: GenInput) -> Generated | None:
    found = _change(inp)
    if found is None:
        return None
    tool, args, thought, m = found
    n, target = int(m.group(1)), int(m.group(3))
    right = target - n
    wrong = inp.rng.choice([c for c in (right + 1, right - 1, n - target) if c not in (right, 0)])
    return Generated(_with_change(tool, args, thought, m, n, wrong), f"computes a change of {wrong:+d} from {n} to "
                     f"{target} (it is {right:+d})")


MUTATORS = {
    "R.1": [_r1_price, _r1_item],
    "R.2": [_r2_write, _r2_decline],
    "R.3": [_r3_write, _r3_change],
    "R.4": [_r4_case],
    "A.1": [_a1_write],
    "A.2": [_a2_args],
    "A.3": [_a3_claim],
    "A.4": [_a4_output],
    "A.5": [_a5_triage],
    "A.6": [_a6_repeat],
    "V.1": [_v1_other_item, _v1_other_quantity],
    "V.2": [_v2_skip, _v2_screen],
    "C.1": [_c1_target],
    "C.2": [_c2_note],
}

__all__ = ["MUTATORS"]
