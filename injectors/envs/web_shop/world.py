"""The shop world as the shopper reads it: plans, result listings and what a listing must show to fit a plan."""

from __future__ import annotations

import math
import re

from .site import (
    CATEGORIES,
)


class Plan:
    def __init__(self, text: str) -> None:
        def one(key: str) -> str | None:
            m = re.search(rf"^- {key}: (.+?)\s*$", text, re.M)
            return m.group(1) if m else None

        self.text = text
        self.search = one("search") or ""
        self.filters = [tuple(x.strip() for x in f.split("=", 1)) for f in re.findall(r"^- filter: (.+?)\s*$", text, re.M) if "=" in f]
        self.sort = one("sort")
        self.want = one("want") or "cheapest"
        self.needs = re.findall(r"^- need: (.+?)\s*$", text, re.M)
        try:
            self.qty = int(one("quantity") or "1")
        except ValueError:
            self.qty = 1
        try:
            self.budget = float((one("budget") or "inf").lstrip("$"))
        except ValueError:
            self.budget = math.inf
        self.then = one("then") or ""
        noun = self.search.lower()
        self.category = next((k for k, v in CATEGORIES.items() if v[0] == noun), None)
        self.accessory = "accessor" in self.want

    def need(self, key: str) -> str | None:
        for n in self.needs:
            m = re.match(rf"^{re.escape(key)}\s*(=|>=)\s*(.+)$", n, re.I)
            if m:
                return m.group(2).strip()
        return None

    def in_stock(self) -> bool:
        return any(n.lower() == "in stock" for n in self.needs)


# ---------------------------------------------------------------- reading pages

_LINK = re.compile(r'^\[(\d+)\] link "(.+?)" — (.+?) — (\w+) — \$([\d,.]+) — ([\d.]+) stars', re.M)


def results(page: str) -> list[dict]:
    return [{"id": int(i), "name": n, "kind": k, "colour": c, "price": float(p.replace(",", "")), "rating": float(r)}
            for i, n, k, c, p, r in _LINK.findall(page)]


def visible_ok(plan: Plan, item: dict) -> bool:
    """Whether a listed item fits the plan as far as its listing shows (kind, rating, colour, price)."""
    if plan.accessory:
        if item["kind"] != "accessory":
            return False
    elif plan.category and item["kind"] != plan.category:
        return False
    rating = plan.need("rating")
    if rating and item["rating"] < float(rating):
        return False
    colour = plan.need("colour")
    if colour and item["colour"] != colour:
        return False
    return item["price"] * plan.qty <= plan.budget
