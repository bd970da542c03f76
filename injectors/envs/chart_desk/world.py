"""The chart desk's tasks: charts drawn like `chart_qa`'s (its question kinds and rendering), under their own seeds and ids."""

from __future__ import annotations

import random
import re
from functools import lru_cache

from faultlens.middleware.model.trace import Media, Task

from ..base import stable_seed
from ..chart_qa.env import caption as chart_caption
from ..chart_qa.env import chart_png
from ..chart_qa.world import BAR_KINDS, LINE_KINDS, MEASURES, MONTHS, PRODUCTS, REGIONS, SERIES, question_for
from ..media_render import crop_columns, png_media

ENV = "chart_desk"
CHART_ID = re.compile(r"Chart (chart_desk-\d+-\d+)")
# Task families, one per question kind (so the tasks cycle through all of them).
FAMILIES = tuple(f"bar:{k}" for k in BAR_KINDS) + tuple(f"line:{k}" for k in LINE_KINDS)


def _series(rng: random.Random, kind: str) -> tuple[list[str], list[tuple[str, list[int]]], str, str, str]:
    """(labels, series, measure, unit, dimension) of a new chart."""
    if kind == "bar":
        pool = rng.choice([REGIONS, PRODUCTS, MONTHS])
        n = rng.randint(4, 8)
        if pool is MONTHS:
            start = rng.randrange(0, len(MONTHS) - n + 1)
            labels = MONTHS[start:start + n]
        else:
            labels = rng.sample(pool, n)
        measure, unit = rng.choice(MEASURES)
        dim = "region" if pool is REGIONS else "product" if pool is PRODUCTS else "month"
        return labels, [(measure.capitalize(), rng.sample(range(5, 96), n))], measure, unit, dim  # distinct bars
    n = rng.randint(5, 8)
    first = rng.randrange(2012, 2018)
    labels = [str(first + i) for i in range(n)]
    series = []
    for name in rng.sample(SERIES, 2 if rng.random() < 0.6 else 1):
        level, vals = rng.randrange(10, 60), []
        for _ in range(n):
            level = max(3, min(94, level + rng.randint(-12, 14)))
            vals.append(level)
        series.append((name, vals))
    return labels, series, "value", "k units", "year"


def make_task(seed: int, index: int) -> Task:
    """Task `index` of seed `seed`: its family cycles through `FAMILIES`; the chart data come from its own generator."""
    family = FAMILIES[(seed + index) % len(FAMILIES)]
    kind, qkind = family.split(":")
    rng = random.Random(stable_seed(ENV, seed, index))
    chart_id = f"{ENV}-{seed}-{index}"
    labels, series, measure, unit, dim = _series(rng, kind)
    title = f"{measure.capitalize()} by {dim}" if kind == "bar" else " and ".join(s[0] for s in series) + " per year"
    ymax = (max(v for _, vals in series for v in vals) // 10 + 2) * 10
    target = series[rng.randrange(len(series))][0]
    values = dict(zip(labels, dict(series)[target]))
    question, plan, answer = question_for(rng, kind, qkind, labels, values, target, measure, dim)
    if answer is None:  # no year above any threshold: ask for a plain value instead
        question, plan, answer = question_for(rng, kind, "value", labels, values, target, measure, dim)
    meta = {"family": family, "chart_id": chart_id, "chart_kind": kind, "title": title, "labels": labels,
            "series": [[name, vals] for name, vals in series], "ymax": ymax, "unit": unit, "dim": dim,
            "question_kind": qkind, "target": target, "plan": plan}
    return Task(id=chart_id, query=question, reference_answer=answer, metadata=meta)


@lru_cache(maxsize=256)
def chart_task(chart_id: str) -> Task:
    """The task behind a chart id (`chart_desk-SEED-INDEX`): what the simulated reader 'sees' in the image."""
    m = re.fullmatch(r"chart_desk-(\d+)-(\d+)", chart_id.strip())
    if m is None:
        raise KeyError(chart_id)
    return make_task(int(m.group(1)), int(m.group(2)))


def caption(task: Task) -> str:
    return chart_caption(task)


def view(task: Task, argument: str) -> tuple[str, Media | None]:
    """What `view_chart(view)` shows: its caption line and the image (the whole chart, or a zoom on one x label)."""
    md = task.metadata
    arg = argument.strip()
    png, columns = chart_png(task)
    if arg.lower() in ("", "full", "all"):
        return caption(task), png_media(png, f"chart {md['chart_id']}")
    if arg in md["labels"]:
        left, right = columns[md["labels"].index(arg)]
        return (f"Chart {md['chart_id']}: zoomed on {arg} (y axis from 0 to {md['ymax']}).",
                png_media(crop_columns(png, left, right), f"chart {md['chart_id']}, zoom on {arg}"))
    return f"error: no x label '{arg}' on chart {md['chart_id']}. x labels: {', '.join(md['labels'])}.", None
