"""`faultlens detect`: score finished runs with the offline failure detector (`p_failed`), a dataset or a store."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from faultlens.middleware.errors import ConfigError
from faultlens.middleware.model.trace import Trace
from faultlens.middleware.terminal.options import db_option

console = Console(stderr=True)


def _scored(detector, traces: Iterable[Trace], total: int | None, quiet: bool) -> Iterator[tuple[Trace, object]]:
    """Each run with its `Detection`, with a progress bar on a terminal."""
    with Progress(TextColumn("[bold]scoring runs"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console, transient=True, disable=quiet) as bar:
        task = bar.add_task("detect", total=total)
        for trace in traces:
            yield trace, detector.score_one(trace)
            bar.advance(task)


def _write(detections: Iterable, out: Path) -> tuple[int, int]:
    out.mkdir(parents=True, exist_ok=True)
    n = unscored = 0
    with (out / "predictions.jsonl").open("w", encoding="utf-8") as fh:
        for _, d in detections:
            row = {"trace_id": d.trace_id, "p_failed": d.p_failed}
            if d.reason:
                row["reason"] = d.reason
                unscored += 1
            fh.write(json.dumps(row) + "\n")
            n += 1
    return n, unscored


def _table(detections: list, limit: int) -> Table:
    table = Table(title="runs without an outcome, most likely failed first")
    for col in ("run", "p_failed", "steps", "note"):
        table.add_column(col, justify="right" if col in ("p_failed", "steps") else "left")
    ranked = sorted(detections, key=lambda d: -1.0 if d[0].p_failed is None else d[0].p_failed, reverse=True)
    for d, steps in ranked[:limit]:
        table.add_row(d.trace_id, "–" if d.p_failed is None else f"{d.p_failed:.2f}", str(steps), d.reason or "")
    return table


@click.command("detect")
@click.option("--dataset", "spec", help="Score every run of this dataset spec (jsonl:PATH, taubench:FILE.json, bundled, ...).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="With --dataset: write OUT/predictions.jsonl.")
@db_option()
@click.option("--model", "model_path", type=click.Path(dir_okay=False), help="A detector model file (default: the shipped one).")
@click.option("--judge", "judge_model", default=None, metavar="MODEL",
              help="Score with an LLM judge through litellm (e.g. openai/gpt-4o-mini) instead of the offline detector; same output.")
@click.option("--limit", default=50, show_default=True, help="With --db: how many runs the table shows.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def detect(spec: str | None, out_dir: str | None, db_path: str | None, model_path: str | None, judge_model: str | None,
           limit: int, quiet: bool) -> None:
    """Score finished runs with the offline failure detector: p_failed, the probability a run failed.

    `--dataset SPEC --out DIR` writes DIR/predictions.jsonl ({trace_id, p_failed} per run);
    `--db DB` scores the store's runs that have no outcome and prints them, most likely failed first.
    No key, no network: the detector reads each run's own evidence, never an answer key.
    `--judge MODEL` asks a model instead (one call per run; it too sees no answer key).
    """
    from faultlens.attributors.detect import Detector

    if spec is None and db_path is None:
        raise ConfigError("give --dataset SPEC --out DIR, or --db DB")
    if judge_model is not None and model_path is not None:
        raise ConfigError("--judge and --model are two detectors: give one")
    if judge_model is not None:
        from faultlens.attributors.detect.judge import LLMJudge

        detector: Detector | LLMJudge = LLMJudge(judge_model)
    else:
        detector = Detector(model_path)
    if spec is not None:
        if out_dir is None:
            raise ConfigError("--dataset needs --out DIR (predictions.jsonl is written there)")
        from faultlens.benchmark.datasets import load_dataset

        out = Path(out_dir)
        n, unscored = _write(_scored(detector, load_dataset(spec), None, quiet), out)
        note = f" ({unscored} without p_failed: see their reason)" if unscored else ""
        click.echo(f"scored {n} runs -> {out / 'predictions.jsonl'}{note}")
    if db_path is not None or spec is None:
        _detect_store(detector, db_path, limit, quiet)


def _detect_store(detector, db_path: str | None, limit: int, quiet: bool) -> None:
    from faultlens.cli import get_store

    store = get_store(db_path)
    try:
        ids = [s.id for s in store.list_traces(status="unknown", limit=None)]
        found = [(d, len(t.steps)) for t, d in _scored(detector, store.iter_traces(ids), len(ids), quiet)]
    finally:
        store.close()
    if not found:
        click.echo("no runs without an outcome in the store")
        return
    Console().print(_table(found, limit))
