"""`faultlens inject`: make failure traces with exact gold labels by warm-start injection."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from faultlens.middleware.terminal.options import db_option


def _checked_envs(env_names: tuple[str, ...], modes: tuple[str, ...], out: Path | None) -> list[str]:
    """The environments asked for, after checking the arguments (usage errors name the option)."""
    from . import envs
    from .applicability import is_mode

    if not env_names:
        raise click.UsageError("give --env NAME (or --list-envs)")
    if out is None:
        raise click.UsageError("give --out FILE.jsonl")
    # "all": the bundled environments; framework ones (an optional extra) are named one by one
    names = envs.names() if "all" in env_names else list(dict.fromkeys(env_names))
    known = envs.names(include_frameworks=True)
    for name in names:
        if name not in known:
            raise click.BadParameter(f"unknown environment {name!r}; known: {', '.join(known)}", param_hint="--env")
    for code in modes:
        if not is_mode(code):
            raise click.BadParameter(f"unknown failure mode {code!r}", param_hint="--mode")
    return names


def _print_yield(console: Console, rows: list[dict], seed_summary: list[dict], seconds: float) -> None:
    """The yield table (per environment and mode) and one line per environment about its seeds."""
    table = Table(title=f"injection yield ({seconds:.0f} s)")
    # unparsed (LLM generator) and crashed (the team's program raised) only appear when they happened
    optional = tuple(c for c in ("unparsed", "crashed") if any(r[c] for r in rows))
    columns = ("env", "mode", "attempted", *optional, "drifted", "still_succeeded", "kept")
    for column in columns:
        table.add_column(column, justify="left" if column in ("env", "mode") else "right")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    totals = {c: sum(r[c] for r in rows) for c in columns[2:]}
    table.add_row("all", f"{len({r['mode'] for r in rows if r['kept']})} modes kept", *(str(totals[c]) for c in columns[2:]))
    console.print(table)
    for s in seed_summary:
        noisy = s["seeds_with_recovered_mistake"]
        extra = f", {noisy} with a recovered mistake before any injection" if noisy is not None else ""
        console.print(f"{s['env']}: {s['seeds_succeeded']}/{s['seeds']} seeds succeeded{extra}; {s['kept']} traces kept "
                      f"(mean {s['mean_steps']} steps)")
        if s["seed_errors"]:
            console.print(f"[red]{s['env']}: {s['seed_errors']} seed(s) raised; first: {s['first_seed_error']}[/]")


@click.command("inject")
@click.option("--env", "env_names", multiple=True, metavar="NAME",
              help="Environment to inject into (repeatable; 'all' for every bundled one; framework environments "
                   "by name). See --list-envs.")
@click.option("--seeds", default=20, show_default=True, help="Seed tasks per environment.")
@click.option("--per-seed", default=4, show_default=True, help="Injections tried per successful seed.")
@click.option("--seed", default=0, show_default=True, help="Seed of tasks, agents' randomness and (t, mode) choices.")
@click.option("--agent-model", default=None, metavar="MODEL",
              help="Run the agents on this litellm model instead of the simulated agents (faultlens-sim/<env>).")
@click.option("--generator", default="template", show_default=True, metavar="template|MODEL",
              help="'template' (offline rules per mode) or a litellm model that writes the errors.")
@click.option("--noise", default=0.2, show_default=True,
              help="Rate of recovered, non-decisive mistakes of the simulated agents in seeds.")
@click.option("--mode", "modes", multiple=True, metavar="CODE", help="Only inject these modes (repeatable).")
@click.option("--workers", default=2, show_default=True, help="Worker processes.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the kept traces here (JSONL).")
@click.option("--summary", "summary_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the yield table here (JSON).")
@db_option(help="Also trace every seed and injected run into this faultlens store (OpenTelemetry tracer); the kept "
               "traces get their gold labels there (see `faultlens traces list --db`).")
@click.option("--otlp", "otlp_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write every run of a framework environment (e.g. ag2_experts) as the framework's own "
                   "OpenInference spans, one OTLP JSON file per run (`faultlens traces import otlp:FILE`).")
@click.option("--native-log", "native_log_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write the framework's own log of every run of a framework environment that keeps one "
                   "(e.g. smol_analyst: smolagents' memory steps), one JSON-lines file per run, `<trace id>.jsonl`.")
@click.option("--list-envs", is_flag=True, help="Print the environment names, one per line, and exit.")
def inject(env_names, seeds, per_seed, seed, agent_model, generator, noise, modes, workers, out, summary_path, db_path,
           otlp_dir, native_log_dir, list_envs):
    """Make failure traces with exact labels by warm-start error injection.

    Each seed task is run to success (simulated agents by default), recorded,
    and replayed exactly up to a step t; step t is replaced by an error of a
    failure mode; the agents continue live; runs that now fail are kept with the
    gold label (agent of step t, t, mode, reason). The same arguments give
    byte-identical output.

    \b
    faultlens inject --list-envs
    faultlens inject --env research_team --env table_qa --seeds 60 --per-seed 5 --out kept.jsonl
    """
    from . import envs
    from .pipeline import InjectConfig
    from .pipeline import inject as run_pipeline

    if list_envs:
        for name in envs.names(include_frameworks=True):
            click.echo(name)
        return
    names = _checked_envs(env_names, modes, out)
    config = InjectConfig(envs=names, seeds=seeds, per_seed=per_seed, seed=seed, agent_model=agent_model,
                          generator=generator, noise=noise, workers=workers,
                          modes=[m.strip().upper() for m in modes] or None, db=db_path,
                          otlp_dir=str(otlp_dir) if otlp_dir else None,
                          native_log_dir=str(native_log_dir) if native_log_dir else None)
    console = Console(stderr=True)
    from tqdm import tqdm

    started = time.time()
    bar = tqdm(total=seeds * len(names), desc="seeds", unit="seed", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.update(done - bar.n)

    result = run_pipeline(config, progress=progress)
    bar.close()
    if result.seeds and all(s.error for s in result.seeds):
        raise click.ClickException(f"every seed run raised; first: {result.seeds[0].error}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for trace in result.traces:
            fh.write(trace.model_dump_json() + "\n")
    rows = result.summary()
    _print_yield(console, rows, result.seed_summary(), time.time() - started)
    if db_path is not None:
        from faultlens.middleware.store import open_store

        # The runs were traced into the store as they ran; the kept ones now get their gold labels.
        store = open_store(db_path)
        saved = store.save_traces(result.traces)
        console.print(f"stored every seed and injected run in {store.location} ({saved} kept, with gold labels)")
    console.print(f"wrote {len(result.traces)} trace(s) to {out}")
    if summary_path:
        summary_path.write_text(json.dumps({"yield": rows, "seeds": result.seed_summary()}, indent=2) + "\n")
