"""`faultlens patterns`: what keeps failing, grouped by agent, failure mode and evidence, with trend and lesson effect."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import click
from rich.console import Console
from rich.table import Table

from faultlens.middleware.store import open_store
from faultlens.middleware.when import BadMoment, moment
from faultlens.middleware.terminal.options import db_option

from .patterns import find_patterns

console = Console()
_BARS = " ▁▂▃▄▅▆▇█"


def parse_since(value: str | None) -> float | None:
    try:
        return moment(value)
    except BadMoment as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None


def _trend(per_day: dict[str, int], days: int = 14) -> str:
    if not per_day:
        return ""
    counts = list(per_day.values())[-days:]
    top = max(counts) or 1
    return "".join(_BARS[round(8 * c / top)] for c in counts)


@click.command("patterns")
@db_option()
@click.option("--since", default=None, help="Only runs since: 7d, 24h, an ISO time or epoch seconds.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Show this many patterns.")
@click.option("--json", "as_json", is_flag=True, help="Print every pattern as JSON.")
def patterns(db_path, since, top, as_json):
    """What keeps failing: attributed failed runs grouped into recurring patterns (agent, mode, evidence).

    Each pattern has its count and share of the failed runs, first and last
    seen, the runs per day, example runs, and the lesson drawn from it with its
    measured effect (failure rate of comparable runs shown it against not).
    """
    found = find_patterns(open_store(db_path), since=parse_since(since))
    if as_json:
        click.echo(json.dumps([p.as_dict() for p in found], indent=2, ensure_ascii=False))
        return
    if not found:
        console.print("No patterns yet: they appear once failed runs are attributed (`faultlens serve`, `faultlens attribute`).")
        return
    table = Table(title=f"{len(found)} pattern(s) over {sum(p.count for p in found)} attributed failed run(s)")
    for column in ("pattern", "runs", "share", "trend", "last seen", "example", "lesson: effect"):
        table.add_column(column, overflow="fold")
    for p in found[:top]:
        lesson = f"{p.lesson.advice[:80]}: {p.effect.sentence() if p.effect else ''}" if p.lesson else "no lesson yet"
        last = datetime.fromtimestamp(p.last_seen, tz=timezone.utc).strftime("%Y-%m-%d")
        table.add_row(p.title(), str(p.count), f"{p.share:.0%}", _trend(p.per_day), last, p.examples[0] if p.examples else "", lesson)
    console.print(table)
