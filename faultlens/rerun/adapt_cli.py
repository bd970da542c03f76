"""`faultlens adapt`: inject errors into your system's successful runs by re-running it, and train `learned` on the failures."""

from __future__ import annotations

from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from faultlens.middleware.capture.upstream import DEFAULT_TIMEOUT, LiteLLMUpstream
from faultlens.middleware.store import open_store
from faultlens.middleware.terminal.options import db_option
from .adapt import DEFAULT_MODES, Attempt, adapt, train_adapted
from .contract import Judge, Program

console = Console()


@click.command("adapt")
@db_option()
@click.option("--rerun", "command", required=True, metavar="CMD", help="The command that runs your program under the re-run contract (docs/rerun.md).")
@click.option("--judge", "judge_command", default=None, metavar="CMD", help="Judges a re-run: the program's stdout on stdin, exit 0 = success.")
@click.option("--upstream", metavar="MODEL", required=True, help="litellm model of the calls after the injected one ({agent} is the agent's name).")
@click.option("--api-base", default=None, help="Base URL of the upstream.")
@click.option("--upstream-timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT, show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder of attempts.jsonl, injected.jsonl, model.joblib and report.json; run again to resume.")
@click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True, help="Successful runs to inject into (oldest first).")
@click.option("--draws", type=click.IntRange(min=0), default=1, show_default=True,
              help="New draws of each call from the upstream per run (your agents' own slips; one model call each, a re-run "
                   "only when the reply changes). 0: none.")
@click.option("--per-run", type=click.IntRange(min=0), default=3, show_default=True, help="Injected (call, mode) pairs re-run per run.")
@click.option("--modes", default=",".join(DEFAULT_MODES), show_default=True, help="Failure modes to inject, comma-separated.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=300.0, show_default=True, help="Seconds one re-run may take.")
@click.option("--no-train", is_flag=True, help="Only inject; do not train `learned`.")
def adapt_command(db_path, command, judge_command, upstream, api_base, upstream_timeout, out, runs, draws, per_run, modes, seed, timeout, no_train):
    """Learn your system from its own successful runs: inject errors by re-running it, keep the failures with exact labels.

    For each successful run recorded through the gateway, each call is drawn
    anew from the upstream (a reply that changes is re-run in its place; a run
    that fails twice with it is a slip of that call), and a few calls are
    answered with an error of a chosen mode; the calls before are replayed
    exactly, the rest run live, and the judge decides. Each failure is stored
    as a labelled run marked as injected. Then `learned` is trained
    on the shipped data plus these runs, and scored before and after on the
    runs of held-out source runs. Interrupt at any time; the same command resumes.
    """
    store = open_store(db_path)
    live = LiteLLMUpstream(upstream, timeout=upstream_timeout, api_base=api_base)
    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console) as bar:
        task = bar.add_task("adapting", total=None)

        def step(attempt: Attempt, n: int, total: int) -> None:
            bar.update(task, completed=n, total=total, description=f"adapting ({attempt.mode} at {attempt.run} call {attempt.call}: {attempt.result})")

        result = adapt(store, Program(command, timeout=timeout), live, out, judge=Judge(judge_command), runs=runs, per_run=per_run,
                       modes=chosen, draws=draws, seed=seed, on_attempt=step)
    table = Table(title=f"yield per mode: {len(result.traces)} labelled failed run(s)", box=box.SIMPLE_HEAD,
                  caption="drawn: calls drawn anew; same: the recorded reply again; other: failed once, or not verifiable")
    columns = {"labelled": "injected", "succeeded": "still_succeeded", "no rule": "no_rule", "same": "unchanged"}
    for column in ("mode", "tried", *columns, "other"):
        table.add_column(column, justify="right", no_wrap=True)
    for mode, counts in result.yield_by_mode().items():
        other = counts["attempts"] - sum(counts.get(key, 0) for key in columns.values())
        table.add_row(mode, str(counts["attempts"]), *(str(counts.get(key, 0)) for key in columns.values()), str(other))
    console.print(table)
    if no_train:
        return
    scores = train_adapted(result, out, seed=seed)
    if "before" not in scores:
        console.print(f"trained {scores['model']} on {scores['train']} injected runs; too few source runs to hold some out for scoring")
        return
    before_after = Table(title=f"on the {scores['test']} labelled run(s) of held-out source runs", box=box.SIMPLE_HEAD)
    for column in ("method", "step before", "step after", "agent before", "agent after"):
        before_after.add_column(column, justify="right")
    for method in ("learned", "blend"):
        b, a = scores["before"][method], scores["after"][method]
        before_after.add_row(method, f"{b['step']:.3f}", f"{a['step']:.3f}", f"{b['agent']:.3f}", f"{a['agent']:.3f}")
    console.print(before_after)
    console.print(f"the adapted model: {scores['model']} (use it with -O model_path={scores['model']})")
