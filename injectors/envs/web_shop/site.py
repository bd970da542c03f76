"""The simulated web shop behind `web_shop`: a catalogue, pages as accessibility trees, and actions.

The site is a pure function: `act(tool, argument, url, cart, task)` → the new
page. The browser state is the page's URL and the cart, and both are printed
at the top of every page (`URL: ...`, `Cart: ...`), so the harness reads the
state back from the last page it was shown, and a replayed run gets the same
state as the recorded one.

Pages: home (`/`), results (`/search?q=...&sort=...&<filter>=...&page=N`),
product (`/product/<SKU>?back=<results URL>`), cart (`/cart`), checkout
(`/checkout`), order confirmation (`/order/<ORD-number>`). Elements are
numbered per page (`[7] link "..."`); actions are `click [id]`,
`type [id] <text>` (typing in the search box submits it) and
`select [id] <option>`.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from faultlens.middleware.model.trace import Task

from ..base import stable_seed

PER_PAGE = 6
COLOURS = ["black", "grey", "blue", "green", "red", "orange"]
# category: (noun, plural for the menu, boolean feature label, model names, size suffixes)
CATEGORIES: dict[str, tuple[str, str, str, list[str], list[str]]] = {
    "backpack": ("backpack", "Backpacks", "Waterproof", ["Trail", "Summit", "Metro", "Ridge", "Nomad", "Canyon", "Alpine", "Urban", "Drift", "Harbor"], ["20L", "25L", "30L", "35L", "40L"]),
    "headphones": ("headphones", "Headphones", "Noise cancelling", ["Pulse", "Echo", "Nova", "Quiet", "Aria", "Tempo", "Vibe", "Sonic", "Halo", "Orbit"],
                   ["On-Ear", "Over-Ear", "Studio", "Mini", "Pro"]),
    "tent": ("tent", "Tents", "Freestanding", ["Basecamp", "Ridgeline", "Meadow", "Cascade", "Pine", "Glacier", "Dune", "Aspen", "Fjord", "Cedar"], ["1P", "2P", "3P", "4P", "Dome"]),
    "kettle": ("kettle", "Kettles", "Cordless", ["Brew", "Steam", "Copper", "Morning", "Swift", "Pebble", "Loft", "Kiln", "Lumen", "Tide"], ["1.0L", "1.2L", "1.5L", "1.7L", "Compact"]),
    "lamp": ("desk lamp", "Desk lamps", "Dimmable", ["Beam", "Arc", "Glow", "Studio", "Lumo", "Flex", "Atlas", "Ember", "Prism", "Vela"], ["LED", "Clamp", "Swing", "Mini", "Pro"]),
}
ACCESSORIES = {"backpack": ["Rain Cover", "Chest Strap", "Bottle Pouch"], "headphones": ["Carry Case", "Ear Pads", "Stand"],
               "tent": ["Footprint", "Stake Set", "Repair Kit"], "kettle": ["Descaler", "Filter", "Trivet"],
               "lamp": ["Bulb", "Clamp Mount", "Shade"]}
SORTS = {"relevance": "Relevance", "price_asc": "Price: low to high", "price_desc": "Price: high to low", "rating": "Rating: high to low"}
RATING_FILTER = {"": "Any", "3": "3+ stars", "4": "4+ stars", "4.5": "4.5+ stars"}
SHIPPING = {"standard": ("Standard (free)", 0.0), "express": ("Express (+$9.99)", 9.99)}


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    category: str  # a CATEGORIES key, or "accessories"
    price: float
    rating: float
    reviews: int
    colour: str
    feature: bool
    in_stock: bool

    def to_json(self) -> list:
        return [self.sku, self.name, self.category, self.price, self.rating, self.reviews, self.colour, self.feature, self.in_stock]

    @classmethod
    def from_json(cls, row: list) -> Product:
        return cls(*row)


def money(value: float) -> str:
    return f"${value:,.2f}"


def catalogue(task: Task) -> list[Product]:
    return [Product.from_json(r) for r in task.metadata["catalogue"]]


def make_catalogue(rng: random.Random, category: str) -> list[Product]:
    """Products of the target category, accessories that match its searches, and other categories."""
    noun, _, _, models, sizes = CATEGORIES[category]
    base = {"backpack": 60, "headphones": 90, "tent": 160, "kettle": 45, "lamp": 40}[category]
    prefix = category[:2].upper()
    out: list[Product] = []
    names = rng.sample([f"{m} {noun.title()} {s}" for m in models for s in sizes], 16)
    skus = rng.sample(range(1000, 9999), 40)
    for i, name in enumerate(names):
        price = round(base * rng.uniform(0.45, 2.2), 0) - rng.choice([0.01, 0.05, 0.51, 0.01])
        out.append(Product(f"{prefix}-{skus[i]}", name, category, round(price, 2), round(rng.uniform(3.0, 5.0), 1),
                           rng.randint(3, 900), rng.choice(COLOURS), rng.random() < 0.5, rng.random() < 0.8))
    for j, acc in enumerate(ACCESSORIES[category]):
        out.append(Product(f"AC-{skus[16 + j]}", f"{noun.title()} {acc}", "accessories", round(rng.uniform(6, 25), 0) - 0.01,
                           round(rng.uniform(3.5, 5.0), 1), rng.randint(3, 400), rng.choice(COLOURS), False, True))
    for k, other in enumerate(c for c in CATEGORIES if c != category):
        onoun, _, _, omodels, osizes = CATEGORIES[other]
        for n in range(2):
            out.append(Product(f"{other[:2].upper()}-{skus[20 + 2 * k + n]}", f"{rng.choice(omodels)} {onoun.title()} {rng.choice(osizes)}",
                               other, round(rng.uniform(20, 150), 0) - 0.01, round(rng.uniform(3.0, 5.0), 1), rng.randint(3, 500),
                               rng.choice(COLOURS), rng.random() < 0.5, True))
    rng.shuffle(out)
    return out


# ---------------------------------------------------------------- pages

@dataclass
class Element:
    role: str
    label: str
    target: str = ""       # a URL for links and buttons
    value: str = ""
    options: tuple[str, ...] = ()
    disabled: bool = False
    extra: str = ""


@dataclass
class Page:
    url: str
    cart: list[tuple[str, int]]
    title: str
    elements: list[Element]
    texts: list[str]

    def render(self, task: Task) -> str:
        items = {p.sku: p for p in catalogue(task)}
        cart = ", ".join(f"{q} × {items[s].name} [{s}]" for s, q in self.cart if s in items) or "empty"
        lines = [f"URL: {self.url}", f"Cart: {cart}", f"Page: {self.title}"]
        body: list[str] = []
        for i, el in enumerate(self.elements, 1):
            text = f'[{i}] {el.role} "{el.label}"'
            if el.role == "textbox":
                text += f' value="{el.value}"'
            if el.role == "combobox":
                text += f' value="{el.value}" options: {" | ".join(el.options)}'
            if el.extra:
                text += f" {el.extra}"
            if el.disabled:
                text += " (disabled)"
            body.append(text)
        return "\n".join(lines + self.texts + body)


def _search_url(params: dict[str, str]) -> str:
    keep = {k: v for k, v in params.items() if v and not (k == "page" and v == "1") and not (k == "sort" and v == "relevance")}
    return "/search?" + urlencode(sorted(keep.items()), quote_via=quote)


def _matches(product: Product, words: list[str]) -> bool:
    hay = (product.name + " " + product.category).lower()
    return all(w in hay or w.rstrip("s") in hay for w in words)


def _results(task: Task, params: dict[str, str]) -> list[Product]:
    words = [w for w in re.findall(r"[a-z0-9.]+", params.get("q", "").lower()) if len(w) > 1]
    feature_label = CATEGORIES[task.metadata["category"]][2]
    found = [p for p in catalogue(task) if words and _matches(p, words)]
    if params.get("feature") in ("yes", "no"):
        found = [p for p in found if p.category != "accessories" and p.feature == (params["feature"] == "yes")]
    if params.get("colour"):
        found = [p for p in found if p.colour == params["colour"]]
    if params.get("rating"):
        found = [p for p in found if p.rating >= float(params["rating"])]
    sort = params.get("sort", "relevance")
    if sort == "price_asc":
        found.sort(key=lambda p: (p.price, p.sku))
    elif sort == "price_desc":
        found.sort(key=lambda p: (-p.price, p.sku))
    elif sort == "rating":
        found.sort(key=lambda p: (-p.rating, p.sku))
    del feature_label
    return found


def page_for(url: str, cart: list[tuple[str, int]], task: Task) -> Page:
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    items = {p.sku: p for p in catalogue(task)}
    category = task.metadata["category"]
    feature_label = CATEGORIES[category][2]
    cart_link = Element("link", f"Cart ({sum(q for _, q in cart)})", "/cart")
    if parts.path == "/search":
        url = _search_url(params)  # one spelling per page, whatever link led here
        found = _results(task, params)
        page_no = max(1, int(params.get("page", "1") or 1))
        pages = max(1, (len(found) + PER_PAGE - 1) // PER_PAGE)
        shown = found[(page_no - 1) * PER_PAGE: page_no * PER_PAGE]
        els = [Element("textbox", "Search", value=params.get("q", "")),
               Element("combobox", "Sort by", value=SORTS[params.get("sort", "relevance")], options=tuple(SORTS.values())),
               Element("combobox", feature_label, value={"yes": "Yes", "no": "No"}.get(params.get("feature", ""), "Any"), options=("Any", "Yes", "No")),
               Element("combobox", "Colour", value=params.get("colour", "") or "Any", options=("Any", *COLOURS)),
               Element("combobox", "Rating", value=RATING_FILTER[params.get("rating", "")], options=tuple(RATING_FILTER.values()))]
        for p in shown:
            kind = "accessory" if p.category == "accessories" else p.category
            els.append(Element("link", p.name, f"/product/{p.sku}?back={quote(url, safe='')}",
                               extra=f"— {kind} — {p.colour} — {money(p.price)} — {p.rating} stars ({p.reviews} reviews)"))
        if page_no > 1:
            els.append(Element("link", "Previous page", _search_url({**params, "page": str(page_no - 1)})))
        if page_no < pages:
            els.append(Element("link", "Next page", _search_url({**params, "page": str(page_no + 1)})))
        els.append(cart_link)
        if found:
            texts = [f'text "Showing {(page_no - 1) * PER_PAGE + 1}-{(page_no - 1) * PER_PAGE + len(shown)} of {len(found)} results '
                     f'for \'{params.get("q", "")}\' (page {page_no} of {pages})"']
        else:
            texts = [f'text "No results for \'{params.get("q", "")}\'"']
        return Page(url, cart, "Search results", els, texts)
    if parts.path.startswith("/product/"):
        sku = parts.path.rsplit("/", 1)[-1]
        listed = items.get(sku)
        if listed is None:
            return Page(url, cart, "Not found", [Element("link", "Home", "/"), cart_link], ['text "This product does not exist."'])
        p = listed
        back = params.get("back", "") or "/"
        qty = params.get("qty", "1")
        feature = ("Yes" if p.feature else "No") if p.category != "accessories" else "n/a"
        texts = [f'heading "{p.name}"', f'text "SKU {p.sku} — {p.category if p.category != "accessories" else "accessory"}"',
                 f'text "Price: {money(p.price)}"', f'text "Rating: {p.rating} stars ({p.reviews} reviews)"',
                 f'text "Colour: {p.colour}"', f'text "{feature_label}: {feature}"',
                 f'text "Availability: {"In stock" if p.in_stock else "Out of stock"}"']
        els = [Element("combobox", "Quantity", value=qty, options=("1", "2", "3", "4", "5")),
               Element("button", "Add to cart", f"add:{p.sku}:{qty}", disabled=not p.in_stock),
               Element("link", "Back to results", back), cart_link]
        return Page(url, cart, "Product", els, texts)
    if parts.path == "/cart":
        els, texts = [], []
        total = 0.0
        for sku, q in cart:
            p = items[sku]
            total += p.price * q
            texts.append(f'text "{q} × {p.name} [{sku}] — {money(p.price)} each — {money(p.price * q)}"')
            els.append(Element("button", f"Remove {p.name}", f"remove:{sku}"))
        texts.append(f'text "Total: {money(total)}"')
        els += [Element("button", "Checkout", "/checkout", disabled=not cart), Element("link", "Continue shopping", "/")]
        return Page(url, cart, "Cart", els, texts)
    if parts.path == "/checkout":
        ship = params.get("ship", "standard")
        total = sum(items[s].price * q for s, q in cart) + SHIPPING[ship][1]
        texts = [f'text "{q} × {items[s].name} [{s}]"' for s, q in cart] + [f'text "Order total: {money(total)}"']
        els = [Element("combobox", "Shipping", value=SHIPPING[ship][0], options=tuple(v[0] for v in SHIPPING.values())),
               Element("button", "Place order", f"order:{ship}", disabled=not cart), Element("link", "Back to cart", "/cart")]
        return Page(url, cart, "Checkout", els, texts)
    if parts.path.startswith("/order/"):
        number = parts.path.rsplit("/", 1)[-1]
        ordered = [(s, q) for s, q in (tuple(x.split("x")) for x in params.get("items", "").split(",") if "x" in x)]
        lines = [f'text "{q} × {items[s].name} [{s}]"' for s, q in ordered if s in items]
        return Page(url, cart, "Order confirmation", [Element("link", "Home", "/")],
                    [f'heading "Thank you! Order {number} is placed."', *lines, f'text "Order total: {params.get("total", "")}"'])
    # home
    els = [Element("textbox", "Search", value="")]
    for key, (_, plural, *_rest) in CATEGORIES.items():
        els.append(Element("link", plural, _search_url({"q": CATEGORIES[key][0]})))
    deals = sorted(catalogue(task), key=lambda p: (p.category != "accessories", p.sku))[:2]
    for p in deals:
        els.append(Element("link", f"Deal: {p.name}", f"/product/{p.sku}?back=%2F", extra=f"— {money(p.price)}"))
    els.append(cart_link)
    return Page("/", cart, "Home", els, ['heading "Outfitters — gear for every day"'])


def order_number(task: Task, cart: list[tuple[str, int]]) -> str:
    return f"ORD-{stable_seed(task.id, cart) % 90000 + 10000}"


_ARG = re.compile(r"^\[(\d+)\]\s*(.*)$", re.S)


def _select(el: Element, index: int, rest: str, url: str, params: dict[str, str], cart: list[tuple[str, int]], task: Task) -> str:
    """`select [index] rest`: a drop-down's option changes the quantity, the shipping or a search filter."""
    if el.role != "combobox":
        return f"Element [{index}] is a {el.role}, not a drop-down."
    if rest not in el.options:
        return f"'{rest}' is not an option of [{index}] ({' | '.join(el.options)})."
    path = urlsplit(url).path
    if el.label == "Quantity":
        return page_for(f"{path}?{urlencode(sorted({**params, 'qty': rest}.items()), quote_via=quote)}", cart, task).render(task)
    if el.label == "Shipping":
        key = next(k for k, v in SHIPPING.items() if v[0] == rest)
        return page_for(f"/checkout?ship={key}", cart, task).render(task)
    key = {"Sort by": "sort", "Colour": "colour", "Rating": "rating"}.get(el.label, "feature")
    value = {"sort": {v: k for k, v in SORTS.items()}, "rating": {v: k for k, v in RATING_FILTER.items()},
             "colour": {"Any": ""}, "feature": {"Any": "", "Yes": "yes", "No": "no"}}[key].get(rest, rest)
    return page_for(_search_url({**params, key: value, "page": "1"}), cart, task).render(task)


def act(tool: str, argument: str, url: str, cart: list[tuple[str, int]], task: Task) -> str:
    """Do `tool` (click/type/select) with `argument` on the page at `url`; the new page as text."""
    page = page_for(url, cart, task)
    m = _ARG.match(argument.strip())
    if m is None:
        return f"Cannot read the action argument {argument.strip()[:60]!r}: write '[<element number>]' first."
    index, rest = int(m.group(1)), m.group(2).strip()
    if not 1 <= index <= len(page.elements):
        return f"There is no element [{index}] on this page (elements [1]-[{len(page.elements)}])."
    el = page.elements[index - 1]
    params = dict(parse_qsl(urlsplit(url).query))
    if tool == "type":
        if el.role != "textbox":
            return f"Element [{index}] is a {el.role}, not a text box."
        return page_for(_search_url({"q": rest}), cart, task).render(task)
    if tool == "select":
        return _select(el, index, rest, url, params, cart, task)
    if tool != "click":
        return f"Unknown action {tool!r}."
    if el.role in ("textbox", "combobox"):
        return page.render(task)  # focusing a field changes nothing
    if el.disabled:
        return f'The button "{el.label}" is disabled.\n' + page.render(task)
    target = el.target
    if target.startswith("add:"):
        _, sku, qty = target.split(":")
        new = [(s, q) for s, q in cart if s != sku] + [(sku, int(qty) + dict(cart).get(sku, 0))]
        return page_for("/cart", new, task).render(task)
    if target.startswith("remove:"):
        sku = target.split(":", 1)[1]
        return page_for("/cart", [(s, q) for s, q in cart if s != sku], task).render(task)
    if target.startswith("order:"):
        ship = target.split(":", 1)[1]
        items = {p.sku: p for p in catalogue(task)}
        total = sum(items[s].price * q for s, q in cart) + SHIPPING[ship][1]
        number = order_number(task, cart)
        query = urlencode({"items": ",".join(f"{s}x{q}" for s, q in cart), "total": money(total)}, quote_via=quote)
        return page_for(f"/order/{number}?{query}", [], task).render(task)
    return page_for(target, cart, task).render(task)


_URL = re.compile(r"^URL: (\S+)$", re.M)
_CART = re.compile(r"^Cart: (.+)$", re.M)
_CART_ITEM = re.compile(r"(\d+) × .+? \[([A-Z]{2}-\d{4})\]")


def state_of(page_text: str) -> tuple[str, list[tuple[str, int]]] | None:
    """The (URL, cart) a page shows, or None if the text is not a page."""
    url, cart = _URL.search(page_text), _CART.search(page_text)
    if url is None or cart is None:
        return None
    return url.group(1), [(sku, int(q)) for q, sku in _CART_ITEM.findall(cart.group(1))]


def encode_state(url: str, cart: list[tuple[str, int]]) -> str:
    return f"@page {url}\n@cart {','.join(f'{s}x{q}' for s, q in cart) or '-'}"


def decode_state(argument: str) -> tuple[str, str, list[tuple[str, int]]]:
    """Split what the harness sends to a tool: (the agent's argument, URL, cart)."""
    m = re.search(r"\n@page (\S+)\n@cart (\S+)\s*$", argument)
    if m is None:
        return argument, "/", []
    cart = [(x.split("x")[0], int(x.split("x")[1])) for x in m.group(2).split(",") if "x" in x]
    return argument[: m.start()], m.group(1), cart
