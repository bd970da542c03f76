"""`web_shop`: one shopper agent buys a product with constraints on a simulated web shop (GUI).

Each task has its own catalogue (`task.metadata["catalogue"]`): 16 products of
one category (backpacks, headphones, tents, kettles or desk lamps), cheap
accessories that match the same searches, and a few products of other
categories. The site (`injectors.envs.web_shop.site`) shows every page as an
accessibility-tree-like text: numbered elements (`[7] link "..."`,
`[3] combobox "Sort by" value=... options: ...`) under a header with the URL
and the cart. Actions: `click [id]`, `type [id] <text>`, `select [id] <option>`.

Three kinds of task, each with a budget and distractors (cheaper products that
miss one constraint, accessories, products that are out of stock, which only
the product page shows):

- the cheapest <feature> <product> rated at least R stars;
- the highest-rated <product> within the budget (ties: the cheaper);
- Q units of the cheapest <colour> <product> in stock.

The shopper (simulated policy; a real LLM gets the same prompt):

1. sometimes first searches to look around, then writes a plan (`- search:`,
   optional `- filter:` and `- sort:` lines, the
   `- want:`/`- need:` constraints, `- quantity:`, `- budget:`, `- then:`),
   choosing for itself whether to filter and sort (so runs differ in shape:
   without a sort it pages through every result); when a planned filter does
   not exist, on half of the tasks it revises its plan without it, otherwise
   it gives up;
2. follows its plan, not the task text (a bad plan is carried forward): it
   searches, filters, sorts, picks the best visible candidate, opens it and
   checks what only the product page shows (feature, stock), goes back if it
   does not fit, sets the quantity, adds it to the cart;
3. checks the cart (the items, the quantity, the total against the budget),
   fixing what is off; checks out; places the order;
4. reports `Answer: <order number>`.

The evaluator checks what was bought (the order the site placed: exactly the
reference product and quantity, its total with shipping within the budget) and
that the reported number is that order's.

Recovered mistakes in seeds (rate `noise`): a mistyped search that finds
nothing and is retyped; a click on the wrong result that the shopper notices
on the product page and goes back from.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task

from faultlens.injectors.generators import slip_text
from ..registry import register
from ..base import (
    Conversation,
    Environment,
    Runtime,
    ToolSpec,
    parse_action,
    render_action,
    stable_seed,
)
from . import mistakes
from .site import (
    CATEGORIES,
    COLOURS,
    RATING_FILTER,
    SORTS,
    act,
    decode_state,
    encode_state,
    make_catalogue,
    money,
    page_for,
    state_of,
)
from .world import Plan, results, visible_ok

MAX_TURNS = 36


def _tool(name: str):
    def run(argument: str, task: Task) -> str:
        agent_argument, url, cart = decode_state(argument)
        return act(name, agent_argument, url, cart, task)

    run.__name__ = f"web_{name}"
    return run


# ---------------------------------------------------------------- tasks

def _make_task(rng: random.Random, index: int, seed: int) -> Task | None:
    category = rng.choice(sorted(CATEGORIES))
    noun, _, feature_label, _, _ = CATEGORIES[category]
    cat = make_catalogue(rng, category)
    targets = [p for p in cat if p.category == category]
    kind = ["cheapest", "best", "colour"][index % 3]
    qty = 1
    if kind == "cheapest":
        r = rng.choice([3.5, 4.0, 4.5])
        fits = sorted([p for p in targets if p.feature and p.rating >= r and p.in_stock], key=lambda p: (p.price, p.sku))
        if not fits or fits[0].price == min(p.price for p in targets):
            return None
        answer = fits[0]
        budget = math.ceil((answer.price * rng.uniform(1.1, 1.6)) / 5) * 5
        query = (f"Buy the cheapest {feature_label.lower()} {noun} rated at least {r} stars, spending at most ${budget}. "
                 "Reply with the order number.")
        needs: dict[str, Any] = {"feature": True, "rating": r, "budget": budget}
    elif kind == "best":
        prices = sorted(p.price for p in targets)
        budget = math.ceil(prices[len(prices) // 2] / 5) * 5
        fits = sorted([p for p in targets if p.in_stock and p.price <= budget], key=lambda p: (-p.rating, p.price))
        best_any = max(targets, key=lambda p: (p.rating, -p.price))
        if len(fits) < 2 or best_any == fits[0] or (fits[0].rating == fits[1].rating and fits[0].price == fits[1].price):
            return None
        answer = fits[0]
        query = (f"Buy the highest-rated {noun} that costs at most ${budget} (if two are rated the same, take the cheaper). "
                 "Reply with the order number.")
        needs = {"budget": budget, "best": True}
    else:
        colour = rng.choice(COLOURS)
        qty = rng.choice([2, 3])
        fits = sorted([p for p in targets if p.colour == colour and p.in_stock], key=lambda p: (p.price, p.sku))
        if not fits or len([p for p in targets if p.colour == colour]) < 2:
            return None
        answer = fits[0]
        budget = math.ceil((answer.price * qty * rng.uniform(1.05, 1.3)) / 5) * 5
        query = (f"Buy {qty} units of the cheapest {colour} {noun} that is in stock, spending at most ${budget} in total. "
                 "Reply with the order number.")
        needs = {"colour": colour, "budget": budget}
    return Task(id=f"web_shop-{seed}-{index}", query=query, reference_answer=f"{qty} × {answer.sku}",
                metadata={"category": category, "kind": kind, "sku": answer.sku, "qty": qty, "needs": needs,
                          "catalogue": [p.to_json() for p in cat]})


# ---------------------------------------------------------------- the shopper's plan

_WANT = {"cheapest": "cheapest", "best": "highest-rated"}


def plan_from_task(query: str, rng: random.Random) -> str | None:
    """The shopper's plan for a task text (its choices of filters and sort are its own)."""
    features = "|".join(re.escape(v[2].lower()) for v in CATEGORIES.values())
    m1 = re.search(rf"Buy the cheapest ({features}) (\w[\w ]*?) rated at least ([\d.]+) stars, spending at most \$(\d+)", query)
    m2 = re.search(r"Buy the highest-rated (\w[\w ]*?) that costs at most \$(\d+)", query)
    m3 = re.search(r"Buy (\d) units of the cheapest (\w+) (\w[\w ]*?) that is in stock, spending at most \$(\d+)", query)
    lines = ["Plan:"]
    if m1:
        feature, noun, r, budget = m1.group(1).capitalize(), m1.group(2), m1.group(3), m1.group(4)
        lines.append(f"- search: {noun}")
        if rng.random() < 0.55:
            lines.append(f"- filter: {feature} = Yes")
        if rng.random() < 0.4 and r in ("4.0", "4.5"):
            lines.append(f"- filter: Rating = {r.rstrip('0').rstrip('.')}+ stars")
        if rng.random() < 0.75:
            lines.append("- sort: Price: low to high")
        lines += ["- want: cheapest", f"- need: {feature} = Yes", f"- need: rating >= {r}", "- need: in stock",
                  "- quantity: 1", f"- budget: {budget}"]
    elif m2:
        noun, budget = m2.group(1), m2.group(2)
        lines.append(f"- search: {noun}")
        if rng.random() < 0.75:
            lines.append("- sort: Rating: high to low")
        lines += ["- want: highest-rated", "- need: in stock", "- quantity: 1", f"- budget: {budget}"]
    elif m3:
        qty, colour, noun, budget = m3.group(1), m3.group(2), m3.group(3), m3.group(4)
        lines.append(f"- search: {noun}")
        if rng.random() < 0.55:
            lines.append(f"- filter: Colour = {colour}")
        if rng.random() < 0.75:
            lines.append("- sort: Price: low to high")
        lines += ["- want: cheapest", f"- need: colour = {colour}", "- need: in stock", f"- quantity: {qty}", f"- budget: {budget}"]
    else:
        return None
    lines.append("- then: add to cart, check the cart, check out, place order, report the order number")
    return "\n".join(lines)


_EL = re.compile(r'^\[(\d+)\] (\w+) "(.+?)"(?: value="(.*?)")?', re.M)


def elements(page: str) -> list[tuple[int, str, str, str]]:
    return [(int(i), role, label, value or "") for i, role, label, value in _EL.findall(page)]


def find(page: str, role: str, label: str) -> int | None:
    for i, r, lab, _ in elements(page):
        if r == role and lab == label:
            return i
    return None


def value_of(page: str, label: str) -> str | None:
    for _, r, lab, value in elements(page):
        if r == "combobox" and lab == label:
            return value
    return None


def product_facts(page: str) -> dict:
    facts = dict(re.findall(r'^text "([\w ]+): (.+?)"$', page, re.M))
    name = re.search(r'^heading "(.+)"$', page, re.M)
    facts["name"] = name.group(1) if name else ""
    price = re.search(r"\$([\d,.]+)", facts.get("Price", ""))
    facts["price"] = float(price.group(1).replace(",", "")) if price else math.inf
    rating = re.match(r"([\d.]+)", facts.get("Rating", ""))
    facts["rating"] = float(rating.group(1)) if rating else 0.0
    return facts


def cart_lines(page: str) -> list[tuple[int, str, str, float]]:
    return [(int(q), n, s, float(t.replace(",", ""))) for q, n, s, t in
            re.findall(r'^text "(\d+) × (.+?) \[([A-Z]{2}-\d{4})\] — \$[\d,.]+ each — \$([\d,.]+)"$', page, re.M)]


def _page_no(page: str) -> int:
    m = re.search(r"\(page (\d+) of \d+\)", page)
    return int(m.group(1)) if m else 1


def _base(url: str) -> tuple:
    params = dict(parse_qsl(urlsplit(url).query))
    params.pop("page", None)
    return tuple(sorted(params.items()))


def _misfits(plan: Plan, facts: dict[str, Any], page: str) -> list[str]:
    """Why the product on `page` does not fit the plan, as the shopper reads it (empty: it fits)."""
    problems = []
    kind = re.search(r'^text "SKU [A-Z]{2}-\d{4} — (.+?)"$', page, re.M)
    wanted = "accessory" if plan.accessory else plan.category
    if kind and wanted and kind.group(1) != wanted:
        problems.append(f"it is a {kind.group(1)}, not a {CATEGORIES[wanted][0] if wanted in CATEGORIES else wanted}")
    for need in plan.needs:
        m = re.match(r"^(.+?)\s*(=|>=)\s*(.+)$", need)
        if need.lower() == "in stock":
            if facts.get("Availability") != "In stock":
                problems.append("it is out of stock")
        elif m and m.group(1).lower() == "rating":
            if facts["rating"] < float(m.group(3)):
                problems.append(f"it is rated {facts['rating']}, below {m.group(3)}")
        elif m and m.group(1).lower() == "colour":
            if facts.get("Colour") != m.group(3):
                problems.append(f"it is {facts.get('Colour')}, not {m.group(3)}")
        elif m and m.group(1) in facts:
            if facts[m.group(1)] != m.group(3):
                problems.append(f"{m.group(1)}: {facts[m.group(1)]}")
    if facts["price"] * plan.qty > plan.budget:
        problems.append(f"{plan.qty} × {money(facts['price'])} is over the budget of {money(plan.budget)}")
    if "is disabled" in page:
        problems.append("it cannot be added to the cart")
    return problems


def _candidates(plan: Plan, pages: list[str], url: str, rejected) -> tuple[list[dict], set[str], bool]:
    """The listings seen on this search's pages that fit the plan, best first; the pages' urls; whether the
    site's order already is the plan's (so the first page's best is the best)."""
    base = _base(url)
    seen: dict[str, dict] = {}
    seen_urls = set()
    for p in pages:
        st = state_of(p)
        if st and urlsplit(st[0]).path == "/search" and _base(st[0]) == base:
            seen_urls.add(st[0])
            for item in results(p):
                seen[item["name"]] = {**item, "page": _page_no(p)}  # the latest listing wins
    candidates = [i for i in seen.values() if visible_ok(plan, i) and i["name"] not in rejected]
    if plan.want == "highest-rated":
        candidates.sort(key=lambda i: (-i["rating"], i["price"]))
        sorted_for_want = plan.sort == SORTS["rating"]
    else:
        candidates.sort(key=lambda i: (i["price"], i["name"]))
        sorted_for_want = plan.sort == SORTS["price_asc"]
    return candidates, seen_urls, sorted_for_want


class ShopperPolicy:
    """The simulated shopper: plans, then acts on the page it sees, following its plan."""

    def respond(self, ctx) -> str:
        msgs = ctx.messages
        mine = [m["content"] for m in msgs if m["role"] == "assistant"]
        plans = [text for text in mine if text.startswith("Plan:")]
        plan_text = plans[-1] if plans else None  # the latest plan (it may revise one it cannot follow)
        if plan_text is None:
            first_plan = plan_from_task(ctx.task_text.split("Task: ", 1)[-1].split("\n", 1)[0], ctx.rng("plan"))
            if first_plan is None:
                return slip_text(ctx, StepKind.final_answer, "I do not understand what to buy.\nAnswer: none")
            if not mine and ctx.rng("explore").random() < 0.4:
                # look around first: what does a plain search for the product show?
                noun = Plan(first_plan).search
                return slip_text(ctx, StepKind.tool_call, render_action("type", f"[1] {noun}", "Let me see what the shop has first."))
            return slip_text(ctx, StepKind.plan, first_plan)
        plan = Plan(plan_text)
        outputs = [m["content"] for m in msgs if m["role"] == "user" and m["content"].startswith("Observation:")]
        stuck = 0
        for out in reversed(outputs):
            if "\nURL: " in out:
                break
            stuck += 1
        if stuck >= 3:
            return slip_text(ctx, StepKind.final_answer, "The site keeps refusing my actions, so I stop here.\nAnswer: none")
        pages = [m["content"].split("\n", 1)[-1] for m in msgs if m["role"] == "user" and "\nURL: " in "\n" + m["content"].split("\n", 1)[-1]]
        page = pages[-1] if pages else ""
        state = state_of(page)
        url = state[0] if state else "/"
        path = urlsplit(url).path
        text, kind = self._decide(ctx, plan, mine, pages, page, url, path)
        return slip_text(ctx, kind, text)

    # one decision from the current page
    def _decide(self, ctx, plan: Plan, mine: list[str], pages: list[str], page: str, url: str, path: str):
        rejected = set(re.findall(r"^(?:Cart check: )?(.+?) does not fit", "\n".join(mine), re.M))
        if path.startswith("/order/"):
            number = re.search(r"Order (ORD-\d+) is placed", page)
            items = re.findall(r'^text "(\d+ × .+?) \[', page, re.M)
            return (f"Order {number.group(1) if number else '?'} is placed for {', '.join(items)}.\n"
                    f"Answer: {number.group(1) if number else 'none'}", StepKind.final_answer)
        if path == "/checkout":
            if "place order" not in plan.then:
                return "The product is in the cart, ready for checkout.\nAnswer: none", StepKind.final_answer
            return render_action("click", f"[{find(page, 'button', 'Place order')}]", "Place the order."), StepKind.tool_call
        if path == "/cart":
            return self._cart(ctx, plan, mine, page)
        if path.startswith("/product/"):
            return self._product(ctx, plan, mine, page, rejected)
        if path == "/search":
            return self._results(ctx, plan, mine, pages, page, url, rejected)
        box = find(page, "textbox", "Search")
        if box is None:
            return "I am lost on this site.\nAnswer: none", StepKind.final_answer
        return self._type_search(ctx, plan, mine, box), StepKind.tool_call

    def _type_search(self, ctx, plan: Plan, mine: list[str], box: int) -> str:
        query = plan.search
        typed = [a for a in (parse_action(m) for m in mine) if a is not None and a.tool == "type"]
        if not typed and ctx.noise("search-typo") and len(query) > 5:
            i = ctx.rng("typo").randrange(1, len(query) - 2)
            query = query[:i] + query[i + 1] + query[i] + query[i + 2:]  # two letters swapped; nothing matches
        return render_action("type", f"[{box}] {query}", f"Search for {plan.search}.")

    def _results(self, ctx, plan: Plan, mine, pages, page, url, rejected):
        params = dict(parse_qsl(urlsplit(url).query))
        box = find(page, "textbox", "Search")
        if params.get("q", "") != plan.search:
            thought = "No results; I mistyped the search." if "No results" in page else f"Search for {plan.search}."
            return render_action("type", f"[{box}] {plan.search}", thought), StepKind.tool_call
        # a filter or sort it has already set is taken as done (it does not re-read the drop-down)
        issued = set(re.findall(r"^(Filter: .+? = .+?\.|Sort by .+?\.)$", "\n".join(mine), re.M))
        for label, want in plan.filters:
            current = value_of(page, label)
            if current is None:
                if len([m for m in mine if m.startswith("Plan:")]) == 1 and random.Random(
                        stable_seed(ctx.config.seed, ctx.task_text, "replan")).random() < 0.5:
                    revised = "\n".join(line for line in plan.text.splitlines() if line != f"- filter: {label} = {want}")
                    return revised, StepKind.plan
                return (f"There is no '{label}' filter on this site, so I cannot follow my plan.\nAnswer: none", StepKind.final_answer)
            if current != want and f"Filter: {label} = {want}." not in issued:
                return render_action("select", f"[{find(page, 'combobox', label)}] {want}", f"Filter: {label} = {want}."), StepKind.tool_call
        if plan.sort and value_of(page, "Sort by") != plan.sort and f"Sort by {plan.sort}." not in issued:
            return render_action("select", f"[{find(page, 'combobox', 'Sort by')}] {plan.sort}", f"Sort by {plan.sort}."), StepKind.tool_call
        candidates, seen_urls, sorted_for_want = _candidates(plan, pages, url, rejected)
        nxt = find(page, "link", "Next page")
        next_url = None
        if nxt is not None:
            m = re.search(r"page (\d+) of", page)
            next_url = (int(m.group(1)) + 1) if m else None
        if nxt is not None and (not sorted_for_want or not candidates):
            visited_next = any(f"page={next_url}" in u for u in seen_urls)
            if not visited_next:
                return render_action("click", f"[{nxt}]", "Look at the next page of results."), StepKind.tool_call
        if not candidates:
            return "No product on this site meets all the conditions.\nAnswer: none", StepKind.final_answer
        best = candidates[0]
        here = {i["name"]: i for i in results(page)}
        if best["name"] not in here:
            earlier = best["page"] < _page_no(page)
            link = find(page, "link", "Previous page" if earlier else "Next page")
            if link is None:
                return "I cannot find my way back to the product.\nAnswer: none", StepKind.final_answer
            where = "an earlier" if earlier else "a later"
            return render_action("click", f"[{link}]", f"{best['name']} was on {where} page."), StepKind.tool_call
        target = here[best["name"]]["id"]
        if ctx.noise(f"misclick:{best['name']}") and any(i["id"] == target + 1 for i in here.values()):
            target += 1  # a slip of the pointer; noticed on the product page
        why = f"{money(best['price'])}, {best['rating']} stars"
        return render_action("click", f"[{target}]", f"Open {best['name']} ({why}), the best candidate so far."), StepKind.tool_call

    def _product(self, ctx, plan: Plan, mine, page, rejected):
        facts = product_facts(page)
        name = facts["name"]
        back = find(page, "link", "Back to results")
        last = mine[-1] if mine else ""
        opened = re.search(r"^Open (.+?) \(", last, re.M)
        if opened and opened.group(1) != name:
            return render_action("click", f"[{back}]", f"This is {name}, not {opened.group(1)}. Back to the results."), StepKind.tool_call
        problems = _misfits(plan, facts, page)
        if problems:
            return render_action("click", f"[{back}]", f"{name} does not fit: {'; '.join(problems)}."), StepKind.tool_call
        qty = value_of(page, "Quantity")
        if qty != str(plan.qty):
            return render_action("select", f"[{find(page, 'combobox', 'Quantity')}] {plan.qty}", f"Set the quantity to {plan.qty}."), StepKind.tool_call
        checked = ", ".join(n for n in plan.needs) or "the budget"
        return (render_action("click", f"[{find(page, 'button', 'Add to cart')}]", f"{name} fits ({checked}). Add {plan.qty} to the cart."),
                StepKind.tool_call)

    def _cart(self, ctx, plan: Plan, mine, page):
        last = mine[-1] if mine else ""
        lines = cart_lines(page)
        if last.startswith("Cart check:"):
            if last.rstrip().endswith("OK."):
                return render_action("click", f"[{find(page, 'button', 'Checkout')}]", "Check out."), StepKind.tool_call
            if not lines:
                return render_action("click", f"[{find(page, 'link', 'Continue shopping')}]", "Back to shopping."), StepKind.tool_call
            bad = re.search(r"^Cart check: (.+?) (?:does not fit|does not belong)", last)
            name = bad.group(1) if bad else lines[0][1]
            button = find(page, "button", f"Remove {name}") or find(page, "button", f"Remove {lines[0][1]}")
            return render_action("click", f"[{button}]", f"Remove {name}."), StepKind.tool_call
        approved = [m for m in re.findall(r"^(.+?) fits \(", "\n".join(mine), re.M)]
        chosen = approved[-1] if approved else None
        total_m = re.search(r'^text "Total: \$([\d,.]+)"', page, re.M)
        total = float(total_m.group(1).replace(",", "")) if total_m else 0.0
        if not lines:
            return "Cart check: the cart is empty.", StepKind.message
        for q, name, sku, _ in lines:
            if name != chosen:
                return f"Cart check: {name} does not belong in the cart.", StepKind.message
        q, name, sku, _ = lines[0]
        if q != plan.qty:
            return f"Cart check: {name} does not fit: the cart holds {q}, not {plan.qty}.", StepKind.message
        if total > plan.budget:
            return f"Cart check: {name} does not fit: the total {money(total)} is over the budget of {money(plan.budget)}.", StepKind.message
        return f"Cart check: {q} × {name} [{sku}], total {money(total)}, within the budget of {money(plan.budget)}. OK.", StepKind.message


# ---------------------------------------------------------------- the environment

PROMPT = (
    "You are the shopper, an assistant that buys things on the Outfitters web shop for a user.\n"
    "You see each page as an accessibility tree: a URL line, a cart line, then numbered elements such as "
    "[7] link \"...\" or [3] combobox \"Sort by\" value=\"...\" options: ...\n"
    "Act with one action per reply: a short thought, then a line 'Action: click' / 'Action: type' / 'Action: select' "
    "and on the next line the element and its argument: '[7]', '[1] trail backpack', '[3] Price: low to high'.\n"
    "First reply with a plan: 'Plan:' then lines '- search: <words>', optional '- filter: <drop-down> = <option>' and "
    "'- sort: <option>', '- want: cheapest|highest-rated', one '- need: ...' per condition of the task, "
    "'- quantity: <n>', '- budget: <dollars>', '- then: add to cart, check the cart, check out, place order, report the "
    "order number'.\nCheck each product page before adding it (some things are only shown there), and check the cart "
    "with a message 'Cart check: ... OK.' before checking out. Finish with 'Answer: <order number>'."
)


@register
class WebShop(Environment):
    name = "web_shop"
    stands_in_for = "shopping on a web GUI (WebShop)"
    modality = "text"
    topology = "single"
    description = "one shopper buys a product under constraints on a simulated web shop seen as accessibility trees (GUI)"
    not_applicable = {
        "A.6": "repeating a click or a search lands on the same page; the shopper's next action is unchanged (0/34 kept)",
    }
    agents = [AgentInfo(name="shopper", role="GUI agent", description="searches, filters, compares, buys and reports the order")]
    tools = {
        "click": ToolSpec("click", "click element [id] of the current page", "element", _tool("click")),
        "type": ToolSpec("type", "type text into text box [id] and submit it", "element and text", _tool("type")),
        "select": ToolSpec("select", "choose an option of drop-down [id]", "element and option", _tool("select")),
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        rng = random.Random(seed)
        out: list[Task] = []
        index = 0
        while len(out) < n:
            task = _make_task(rng, len(out), seed)
            index += 1
            if task is not None:
                out.append(task)
        return out

    def system_prompt(self, agent: str, task: Task) -> str:
        return PROMPT

    def program(self, task: Task, rt: Runtime) -> str | None:
        home = page_for("/", [], task).render(task)
        conv = Conversation().user(f"Task: {task.query}\nYou are on the shop's home page.\nObservation:\n{home}\nReply with your plan first.")
        url, cart = "/", cast(list[Any], [])
        orders: list[dict] = []
        reported = None
        for turn in range(MAX_TURNS):
            reply = rt.ask("shopper", conv.messages, kind=StepKind.message)
            conv.assistant(reply)
            if reply.startswith("Plan:") and rt.steps[-1].kind == StepKind.message:
                rt.steps[-1].kind = StepKind.plan
            action = parse_action(reply)
            if action is not None:
                argument = action.argument
                if action.tool in self.tools:
                    argument = f"{argument}\n{encode_state(url, cart)}"
                output = rt.tool("shopper", action.tool, argument)
                state = state_of(output)
                if state is not None:
                    url, cart = state
                    if urlsplit(url).path.startswith("/order/") and not any(o["url"] == url for o in orders):
                        orders.append(_order(url))
                conv.user(f"Observation:\n{output}")
                continue
            m = _ANSWER.search(reply)
            if m is not None:
                rt.steps[-1].kind = StepKind.final_answer
                reported = m.group(1)
                break
            conv.user("Continue.")
        return json.dumps({"reported": reported, "orders": orders}, sort_keys=True)

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        try:
            data = json.loads(answer or "")
        except json.JSONDecodeError:
            data = {"reported": answer, "orders": []}
        orders = data.get("orders") or []
        want = [[task.metadata["sku"], task.metadata["qty"]]]
        budget = float(task.metadata["needs"]["budget"])
        ok = (len(orders) == 1 and orders[0]["items"] == want and data.get("reported") == orders[0]["number"]
              and orders[0]["total"] <= budget + 1e-9)
        got = "; ".join(f"{o['number']}: " + ", ".join(f"{q} × {s}" for s, q in o["items"]) + f" (total ${o['total']:.2f})"
                        for o in orders) or "no order"
        return Outcome(success=ok, score=float(ok), evaluator="web_shop.order",
                       detail=f"expected {task.reference_answer}; placed {got}; reported {data.get('reported')!r}")

    def policy(self) -> ShopperPolicy:
        return ShopperPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        groups = [list(COLOURS), list(SORTS.values())[1:], ["Yes", "No"], list(RATING_FILTER.values())[1:]]
        if task is not None:
            groups.append([row[1] for row in task.metadata["catalogue"] if row[2] == task.metadata["category"]])
        return groups

    def mutators(self):
        return mistakes.MUTATORS


_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)


def _order(url: str) -> dict:
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    items = [[x.split("x")[0], int(x.split("x")[1])] for x in params.get("items", "").split(",") if "x" in x]
    total = float(params.get("total", "$0").lstrip("$").replace(",", "") or 0)
    return {"url": url, "number": parts.path.rsplit("/", 1)[-1], "items": items, "total": total}
