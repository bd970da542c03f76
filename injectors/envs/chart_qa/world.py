"""The chart world: chart tasks, their data and the parsing the agents and the error generators share."""

from __future__ import annotations

import random
import re
from functools import lru_cache

from faultlens.middleware.model.trace import Task

from ..base import (
    stable_seed,
)

REGIONS = ["North", "South", "East", "West", "Central", "Coast", "Valley", "Metro", "Harbor", "Upland"]
PRODUCTS = ["kettles", "lamps", "chairs", "desks", "fans", "rugs", "mugs", "clocks", "kites", "vases"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
MEASURES = [("units sold", "units"), ("orders", "orders"), ("visitors", "visitors"), ("revenue", "k$")]
SERIES = ["Sales", "Returns", "Visits", "Signups", "Orders", "Refunds"]
BAR_KINDS = ["max", "diff", "sum", "min", "value"]
LINE_KINDS = ["change", "first_above", "peak", "value"]


# ---------------------------------------------------------------- tasks and charts

def make_task(seed: int, index: int) -> Task:
    rng = random.Random(stable_seed("chart_qa", seed, index))
    chart_id = f"chart_qa-{seed}-{index}"
    if index % 9 < 5:
        kind = "bar"
        pool = rng.choice([REGIONS, PRODUCTS, MONTHS])
        n = rng.randint(4, 8)
        if pool is MONTHS:
            start = rng.randrange(0, len(MONTHS) - n + 1)
            labels = MONTHS[start:start + n]
        else:
            labels = rng.sample(pool, n)
        measure, unit = rng.choice(MEASURES)
        dim = {id(REGIONS): "region", id(PRODUCTS): "product", id(MONTHS): "month"}[id(pool)]
        bar_values = rng.sample(range(5, 96), n)  # distinct, so max/min questions have one answer
        series = [(measure.capitalize(), bar_values)]
        title = f"{measure.capitalize()} by {dim}"
        qkind = BAR_KINDS[(index // 9 + index) % len(BAR_KINDS)]
    else:
        kind = "line"
        n = rng.randint(5, 8)
        first = rng.randrange(2012, 2018)
        labels = [str(first + i) for i in range(n)]
        names = rng.sample(SERIES, 2 if rng.random() < 0.6 else 1)
        series = []
        for name in names:
            level = rng.randrange(10, 60)
            vals = []
            for _ in range(n):
                level = max(3, min(94, level + rng.randint(-12, 14)))
                vals.append(level)
            series.append((name, vals))
        measure, unit = "value", "k units"
        dim = "year"
        title = " and ".join(s[0] for s in series) + " per year"
        qkind = LINE_KINDS[(index // 9 + index) % len(LINE_KINDS)]
    ymax = (max(v for _, vals in series for v in vals) // 10 + 2) * 10
    target = series[rng.randrange(len(series))][0] if kind == "line" else series[0][0]
    values = dict(zip(labels, dict(series)[target]))
    question, plan, answer = question_for(rng, kind, qkind, labels, values, target, measure, dim)
    if answer is None:  # e.g. no year above any threshold: ask for a plain value instead
        question, plan, answer = question_for(rng, kind, "value", labels, values, target, measure, dim)
    glance = rng.random() < 0.5  # half the teams start with the perceiver's overview of the chart
    meta = {"glance": glance, "chart_id": chart_id, "chart_kind": kind, "title": title, "labels": labels,
            "series": [[name, vals] for name, vals in series], "ymax": ymax, "unit": unit, "dim": dim,
            "question_kind": qkind, "target": target, "plan": plan}
    return Task(id=chart_id, query=question, reference_answer=answer, metadata=meta)


def question_for(rng, kind, qkind, labels, values, target, measure, dim):
    """(question, plan lines, reference answer) for one question kind."""
    if qkind == "max":
        best = max(labels, key=lambda l: values[l])
        return (f"Which {dim} has the highest {measure} in the chart?",
                ["read: every bar", "compute: the label with the highest value"], best)
    if qkind == "min":
        low = min(labels, key=lambda l: values[l])
        return (f"Which {dim} has the lowest {measure} in the chart?",
                ["read: every bar", "compute: the label with the lowest value"], low)
    if qkind == "diff":
        a, b = rng.sample(labels, 2)
        if values[a] < values[b]:
            a, b = b, a
        return (f"How many more {measure} does {a} have than {b}?",
                [f"read: {a}, {b}", f"compute: {a} - {b}"], str(values[a] - values[b]))
    if qkind == "sum":
        picked = rng.sample(labels, 3)
        picked.sort(key=labels.index)
        return (f"What are the combined {measure} of {', '.join(picked[:-1])} and {picked[-1]}?",
                [f"read: {', '.join(picked)}", f"compute: {' + '.join(picked)}"], str(sum(values[p] for p in picked)))
    if qkind == "value":
        label = rng.choice(labels)
        what = f"{target} in {label}" if kind == "line" else f"the {measure} of {label}"
        return (f"What is {what} according to the chart?", [f"read: {label}" + (f" of {target}" if kind == "line" else ""),
                                                          f"compute: {label}"], str(values[label]))
    if qkind == "change":
        a, b = sorted(rng.sample(range(len(labels)), 2))
        ya, yb = labels[a], labels[b]
        return (f"By how much did {target} change from {ya} to {yb}?", [f"read: {ya}, {yb} of {target}", f"compute: {yb} - {ya}"],
                str(values[yb] - values[ya]))
    if qkind == "peak":
        best = max(labels, key=lambda l: (values[l], -labels.index(l)))
        return (f"In which year did {target} reach its highest value?", [f"read: every year of {target}", "compute: the label with the highest value"],
                best)
    # first_above
    above = sorted({values[l] for l in labels})
    if len(above) < 3:
        return None, None, None
    threshold = rng.choice(above[1:-1]) - 1
    first = next(l for l in labels if values[l] > threshold)
    return (f"In which year was {target} above {threshold} for the first time?",
            [f"read: every year of {target}", f"compute: the first label with a value above {threshold}"], first)


@lru_cache(maxsize=256)
def chart_task(chart_id: str) -> Task:
    """The task behind a chart id (`chart_qa-SEED-INDEX`): what the simulated perceiver 'sees'."""
    m = re.fullmatch(r"chart_qa-(\d+)-(\d+)", chart_id.strip())
    if m is None:
        raise KeyError(chart_id)
    return make_task(int(m.group(1)), int(m.group(2)))


READINGS = re.compile(r"Readings \(([^)]*)\):\s*(.+)$", re.M)
_PAIR = re.compile(r"([A-Za-z0-9]+) = (-?\d+)")
CHART_ID = re.compile(r"Chart (chart_qa-\d+-\d+)")


AXIS = re.compile(r"y axis from 0 to (\d+)")


def parse_readings(text: str) -> tuple[str, dict[str, int]]:
    m = READINGS.search(text)
    if m is None:
        return "", {}
    return m.group(1), {k: int(v) for k, v in _PAIR.findall(m.group(2))}


def parse_plan(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, v in re.findall(r"^- (read|compute|answer): (.+)$", text, re.M)}


def compute(spec: str, values: dict[str, int]) -> tuple[str | None, str | None]:
    """(calculator expression or None, direct result or None) for a `compute:` line."""
    spec = spec.strip()
    m = re.fullmatch(r"the label with the (highest|lowest) value", spec)
    if m:
        if not values:
            return None, "unknown"
        pick = max if m.group(1) == "highest" else min
        return None, pick(values, key=lambda k: values[k])
    m = re.fullmatch(r"the first label with a value above (\d+)", spec)
    if m:
        limit = int(m.group(1))
        return None, next((k for k, v in values.items() if v > limit), "none")
    terms = re.findall(r"[A-Za-z0-9]+|[-+]", spec)
    expr = []
    for term in terms:
        if term in "+-":
            expr.append(term)
        elif term in values:
            expr.append(str(values[term]))
        else:
            return None, "unknown"
    if len(expr) == 1:
        return None, expr[0]
    return " ".join(expr), None
