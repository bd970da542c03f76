"""Error rules specific to `web_shop` (tried before the generic rules of each mode).

Each rule takes a `GenInput` and returns a `Generated` (the rewritten action and
a one-line reason for the gold label) or None when it does not fit the step.
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput, perturb_number
from ..base import parse_action, render_action
from .world import Plan, results, visible_ok


def _plan(inp: GenInput) -> bool:
    return inp.kind == StepKind.plan and inp.text.startswith("Plan:")


def _action(inp: GenInput, tool: str | None = None):
    action = parse_action(inp.text) if inp.kind == StepKind.tool_call else None
    if action is None or (tool is not None and action.tool != tool):
        return None
    return action


def _last_page(inp: GenInput) -> str:
    for p in reversed(inp.prefix):
        if p.kind == StepKind.tool_result.value and p.text.startswith("URL: "):
            return p.text
    return ""


def _links(page: str) -> list[tuple[int, str]]:
    return [(int(i), n) for i, n in re.findall(r'^\[(\d+)\] link "(.+?)" — ', page, re.M)]


# -- the plan ---------------------------------------------------------------

def plan_r4(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    text = inp.text
    needs = [m for m in re.finditer(r"^- need: (?!in stock).+\n", text, re.M)]
    if needs and inp.rng.random() < 0.5:
        drop = inp.rng.choice(needs)
        body = drop.group(0)[8:].strip()
        key = body.split(" ")[0]
        out = text[: drop.start()] + text[drop.end():]
        out = re.sub(rf"^- filter: {re.escape(key)}.*\n", "", out, flags=re.M | re.I)
        return Generated(out, f"the plan drops the task's condition '{body}'")
    if "- want: cheapest" in text:
        out = text.replace("- want: cheapest", "- want: highest-rated").replace("- sort: Price: low to high", "- sort: Rating: high to low")
        return Generated(out, "the plan looks for the highest-rated product where the task asks for the cheapest")
    out = text.replace("- want: highest-rated", "- want: cheapest").replace("- sort: Rating: high to low", "- sort: Price: low to high")
    return Generated(out, "the plan looks for the cheapest product where the task asks for the highest-rated")


def plan_pl1(inp: GenInput) -> Generated | None:
    if not _plan(inp) or ", place order" not in inp.text:
        return None
    return Generated(inp.text.replace(", check out, place order", ""), "the plan never checks out or places the order")


def plan_pl2(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    extra = inp.rng.choice(["- filter: Free shipping = Yes", "- filter: Brand = Outfitters", "- filter: Discount = 20% or more"])
    m = re.search(r"^- (sort|want):", inp.text, re.M)
    if m is None:
        return None
    return Generated(inp.text[: m.start()] + extra + "\n" + inp.text[m.start():], f"the plan relies on a filter the shop does not have ({extra[10:]})")


def plan_pl3(inp: GenInput) -> Generated | None:
    if not _plan(inp) or "- want: cheapest" not in inp.text:
        return None
    return Generated(inp.text.replace("- want: cheapest", "- want: cheapest accessory"),
                     "the plan turns to buying an accessory instead of the product itself")


def plan_r1(inp: GenInput) -> Generated | None:
    if not _plan(inp):
        return None
    m = re.search(r"^- (budget|need: rating >=) ([\d.]+)$", inp.text, re.M)
    if m is None:
        return None
    value = m.group(2)
    new = perturb_number(value, inp.rng)
    if m.group(1) == "budget":
        new = str(int(float(value) * inp.rng.choice([0.5, 0.6, 0.7])))
    elif float(new) <= float(value):
        new = f"{min(5.0, float(value) + 0.5):.1f}"
    if new == value:
        return None
    return Generated(inp.text[: m.start(2)] + new + inp.text[m.end(2):], f"the plan states {m.group(1).split(':')[0]} {new}, which the task never says (it says {value})")


# -- acting on pages ----------------------------------------------------------

def click_a1(inp: GenInput) -> Generated | None:
    action = _action(inp)
    page = _last_page(inp)
    if action is None:
        return None
    if action.thought == "Place the order.":
        ship = re.search(r'^\[(\d+)\] combobox "Shipping"', page, re.M)
        if ship is None:
            return None
        return Generated(render_action("select", f"[{ship.group(1)}] Express (+$9.99)", action.thought),
                         "chooses express shipping instead of placing the order with free shipping")
    if action.tool == "select" and not action.thought.startswith("Set the quantity"):
        # clicks the drop-down instead of choosing the option: nothing changes, and it carries on as if it had
        element = action.argument.split("]", 1)[0] + "]"
        return Generated(render_action("click", element, action.thought), "clicks the drop-down instead of selecting the option")
    if action.thought == "Check out.":
        remove = re.search(r'^\[(\d+)\] button "Remove ', page, re.M)
        if remove:
            return Generated(render_action("click", f"[{remove.group(1)}]", action.thought), "clicks 'Remove' instead of 'Checkout'")
    if not page.startswith("URL: /search"):
        return None
    m = re.match(r"^\[(\d+)\]$", action.argument.strip()) if action.thought.startswith("Open ") else None
    links = [(i, n) for i, n in _links(page) if m is None or i != int(m.group(1))]
    plan_text = next((p.text for p in inp.prefix if p.text.startswith("Plan:")), "")
    if plan_text:
        plan = Plan(plan_text)
        plausible = {r["id"] for r in results(page) if visible_ok(plan, r)}
        links = [(i, n) for i, n in links if i in plausible] or links
    if not links:
        return None
    i, name = inp.rng.choice(links)
    listing = re.search(rf'^\[{i}\] link ".+?" — .+? — \w+ — (\$[\d,.]+) — ([\d.]+) stars', page, re.M)
    why = f"{listing.group(1)}, {listing.group(2)} stars" if listing else "listed here"
    return Generated(render_action("click", f"[{i}]", f"Open {name} ({why}), the best candidate so far."),
                     f"clicks {name} instead of the best candidate on the page")


def step_a2(inp: GenInput) -> Generated | None:
    action = _action(inp)
    if action is None:
        return None
    if action.tool == "select" and re.match(r"^\[\d+\] \d$", action.argument):
        n = int(action.argument[-1])
        return Generated(render_action("select", action.argument[:-1] + str(n + 1 if n < 5 else n - 1), action.thought),
                         f"sets the quantity to {n + 1 if n < 5 else n - 1} instead of {n}")
    if action.tool == "type":
        m = re.match(r"^(\[\d+\]) (.+)$", action.argument)
        if m and len(m.group(2)) > 4:
            q = m.group(2)
            i = inp.rng.randrange(1, len(q) - 2)
            return Generated(render_action("type", f"{m.group(1)} {q[:i] + q[i + 1:]}", action.thought), f"types '{q[:i] + q[i + 1:]}' for '{q}'")
    if action.tool == "click" and action.thought.startswith("Open "):
        return click_a1(inp)
    return None


def place_a3(inp: GenInput) -> Generated | None:
    action = _action(inp, "click")
    if action is None or action.thought != "Place the order.":
        return None
    number = f"ORD-{inp.rng.randint(10000, 99999)}"
    return Generated(f"I placed the order; the confirmation number is {number}.\nAnswer: {number}",
                     "reports an order as placed without clicking 'Place order'")


def cart_a5(inp: GenInput) -> Generated | None:
    if _cart_ok(inp) is None:
        return None
    return Generated("The product is in the cart, so the purchase is done.\nAnswer: done", "stops before checking out and placing the order")


def plan_a5(inp: GenInput) -> Generated | None:
    if not _plan(inp) or ", check out, place order" not in inp.text:
        return None
    return Generated(inp.text.replace(", check the cart, check out, place order, report the order number", ", report what is in the cart"),
                     "the plan ends once the product is in the cart")


def page_v3(inp: GenInput) -> Generated | None:
    if inp.kind != StepKind.tool_result:
        return None
    if "Availability: In stock" in inp.text:
        text = inp.text.replace("Availability: In stock", "Availability: Out of stock")
        text = re.sub(r'(\[\d+\] button "Add to cart")', r"\1 (disabled)", text)
        return Generated(text, "the product page shows stale stock data (out of stock) and the shopper moves on")
    prices = [p for p in re.finditer(r'^(\[\d+\] link ".+?" — (.+?) — \w+ — )\$([\d,.]+)', inp.text, re.M) if p.group(2) != "accessory"]
    if prices:
        m = min(prices, key=lambda p: float(p.group(3).replace(",", "")))
        new = f"{float(m.group(3).replace(',', '')) * inp.rng.choice([1.6, 1.9, 2.4]):,.2f}"
        return Generated(inp.text[: m.start(3)] + new + inp.text[m.end(3):], f"the results page shows a stale price (${new} for ${m.group(3)})")
    return None


def product_r2(inp: GenInput) -> Generated | None:
    action = _action(inp, "click")
    m = re.match(r"^(.+?) fits \(", action.thought) if action else None
    page = _last_page(inp)
    back = re.search(r'^\[(\d+)\] link "Back to results"', page, re.M)
    if m is None or back is None:
        return None
    reason = inp.rng.choice(["with this many reviews a better one must be further down", "the next one is surely cheaper",
                             "a product this popular is usually sold out soon"])
    return Generated(render_action("click", f"[{back.group(1)}]", f"{m.group(1)} does not fit: {reason}."),
                     f"rejects {m.group(1)}, which meets every condition, on a reason that does not follow")


def _cart_ok(inp: GenInput):
    m = re.match(r"^Cart check: (\d+) × (.+?) \[(.+?)\], total \$([\d,.]+), within the budget of \$([\d,.]+)\. OK\.$", inp.text)
    return m if inp.kind == StepKind.message else None


def cart_r3(inp: GenInput) -> Generated | None:
    m = _cart_ok(inp)
    if m is None:
        return None
    total = float(m.group(4).replace(",", ""))
    budget = float(m.group(5).replace(",", ""))
    wrong = total * 10 if total * 10 > budget else total + budget
    return Generated(f"Cart check: {m.group(2)} does not fit: the total ${wrong:,.2f} is over the budget of ${budget:,.2f}.",
                     f"computes the cart total as ${wrong:,.2f} instead of ${total:,.2f}")


def cart_v1(inp: GenInput) -> Generated | None:
    m = _cart_ok(inp)
    if m is None:
        return None
    total = float(m.group(4).replace(",", ""))
    budget = int(total * inp.rng.choice([0.5, 0.7, 0.8]))
    return Generated(f"Cart check: {m.group(2)} does not fit: the total ${total:,.2f} is over the budget of ${budget:,.2f}.",
                     f"checks the cart against a budget of ${budget} instead of the task's {m.group(5)}")


def product_v2(inp: GenInput) -> Generated | None:
    action = _action(inp, "click")
    m = re.match(r"^(.+?) does not fit: ", action.thought) if action else None
    page = _last_page(inp)
    if m is not None:
        add = re.search(r'^\[(\d+)\] button "Add to cart"', page, re.M)
        qty = re.search(r'^\[\d+\] combobox "Quantity" value="(\d)"', page, re.M)
        if add is None:
            return None
        return Generated(render_action("click", f"[{add.group(1)}]", f"{m.group(1)} fits. Add {qty.group(1) if qty else 1} to the cart."),
                         f"adds {m.group(1)} to the cart without checking the conditions it fails")
    ok = _cart_ok(inp)
    if ok is not None:
        return Generated(f"Cart check: {ok.group(2)} does not fit: the quantity looks off.",
                         "the cart check rejects a cart that is right")
    return None


def search_a6(inp: GenInput) -> Generated | None:
    """Runs its earlier search again, which resets the filters and the sort it has set (and it does not notice)."""
    action = _action(inp)
    page = _last_page(inp)
    if action is None or action.tool == "type" or not page.startswith("URL: /search?"):
        return None
    header = page.split("\n", 1)[0]
    if "sort=" not in header and "feature=" not in header and "colour=" not in header and "rating=" not in header:
        return None
    for p in reversed(inp.prefix):
        earlier = parse_action(p.text) if p.kind == StepKind.tool_call.value else None
        if earlier is not None and earlier.tool == "type":
            return Generated(p.text, "types its search again, which clears the filters and sort it had set")
    return None


def final_r1(inp: GenInput) -> Generated | None:
    if inp.kind != StepKind.final_answer:
        return None
    m = re.search(r"ORD-(\d+)", inp.text)
    if m is None:
        return None
    new = perturb_number(m.group(1), inp.rng)
    if len(new) != 5:
        new = str((int(m.group(1)) + 1111) % 90000 + 10000)
    return Generated(inp.text.replace(m.group(0), f"ORD-{new}"), f"reports order ORD-{new}, a number the site never showed")


MUTATORS = {
    "R.1": [final_r1, plan_r1],
    "R.2": [product_r2],
    "R.3": [cart_r3],
    "R.4": [plan_r4],
    "PL.1": [plan_pl1],
    "PL.2": [plan_pl2],
    "PL.3": [plan_pl3],
    "A.1": [click_a1],
    "A.2": [step_a2],
    "A.3": [place_a3],
    "A.5": [cart_a5, plan_a5],
    "V.3": [page_v3],
    "A.6": [search_a6],
    "V.1": [cart_v1],
    "V.2": [product_v2],
}
