"""`faultlens bench`: validate an attributor on a benchmark, and report.

Plugged into the `faultlens` root command through the `faultlens.cli` entry
point `bench = "benchmark.cli:bench"`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console

from faultlens.middleware.errors import FaultlensError

console = Console()


@click.group()
def bench() -> None:
    """Score attributors on benchmark datasets and compare them.

    \b
    Dataset specs:
      bundled, bundled:dev, bundled:test, bundled:test:ENV   the bundled benchmark
      jsonl:PATH                                             native JSONL with gold labels
      whowhen:DIR                                            Who&When (ICML 2025)
      whowhenpro:DIR                                         Who&When Pro (2026), see docs/datasets.md
    """


@bench.command("run")
@click.option("--dataset", "dataset", required=True, help="Dataset spec, e.g. bundled:test or whowhen:data/Who&When.")
@click.option("--method", required=True, help="Attribution method, e.g. heuristic, all_at_once, baseline:majority-agent, or baseline:most-common-step (the dataset-level baseline).")
@click.option("--model", default=None, help="litellm model string for LLM methods, e.g. openai/gpt-4o-mini.")
@click.option("--with-reference-answer", "with_reference", is_flag=True,
              help="Show the attributor the task's reference answer (the 'with ground truth' setting).")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(min=1), help="Traces attributed at once.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Only the first N traces of the dataset.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run folder for predictions.jsonl [default: .faultlens/bench/DATASET__METHOD[__MODEL]].")
@click.option("--resume", is_flag=True, help="Continue the run in --out, skipping traces already predicted (never pays twice).")
@click.option("--budget-usd", type=float, default=None, help="Stop starting new traces once this many USD are spent.")
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE",
              help="A method option, repeatable, e.g. -O base=learned -O k=5 for counterfactual.")
@click.option("--no-progress", is_flag=True, help="Do not draw the progress bar.")
@click.option("--media-root", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Also look up relative image/frame paths here (whowhenpro: datasets; after the trace's folder and its parents).")
@click.option("--labelled-only", is_flag=True,
              help="Score only the traces with a gold label and leave the others out (a store of your runs, some labelled: "
                   "store:PATH); without it an unlabelled trace is an error.")
def run(dataset, method, model, with_reference, concurrency, limit, out, resume, budget_usd, method_options, no_progress, media_root,
        labelled_only):
    """Attribute every trace of a dataset with one method, and score the baselines on the same traces.

    Each finished trace is appended to OUT/predictions.jsonl at once, so an
    interrupted run continues with --resume. The trivial baselines
    (baseline:*) are scored into OUT/baselines/. Then run
    `faultlens bench report OUT` for the table and plots.
    """
    from faultlens.attributors.registry import parse_options

    from .runner import run_benchmark

    summary = run_benchmark(dataset, method, model=model, with_reference=with_reference, concurrency=concurrency,
                            limit=limit, out=out, resume=resume, budget_usd=budget_usd, progress=not no_progress,
                            console=console, method_options=parse_options(method_options), media_root=media_root,
                            labelled_only=labelled_only)
    if summary.unlabelled:
        console.print(f"left out {summary.unlabelled} trace(s) without a gold label")
    console.print(f"{summary.method}: {summary.done}/{summary.total} trace(s) predicted "
                  f"({summary.new} now, {summary.skipped} already on file), ${summary.spent_usd:.4f} spent")
    if summary.baselines:
        console.print("baselines: " + ", ".join(f"{n} ({c})" for n, c in summary.baselines.items()))
    if summary.stopped:
        console.print(f"[yellow]stopped early: {summary.stopped} cap reached; continue with --resume and a higher --budget-usd[/]")
    console.print(f"predictions in {summary.out}; next: faultlens bench report {summary.out}")


@bench.command("report")
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write report.json, report.md and the plots [default: the first FOLDER].")
@click.option("--no-plots", is_flag=True, help="Skip the PNG plots.")
@click.option("--bootstrap", default=None, type=click.IntRange(min=0), help="Bootstrap resamples for the CIs [default: 1000].")
def report(folders, out, no_plots, bootstrap):
    """Compare runs: a table of every method and baseline in FOLDERS, with 95% CIs.

    Writes report.json, report.md and PNG plots (step accuracy by trace length,
    per-mode F1, mode confusion matrices). Give several run folders to compare
    methods or models side by side.
    """
    from .report import make_report

    make_report(list(folders), out=out, console=console, plots=not no_plots, samples=bootstrap)


@bench.command("build")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for dev.jsonl.gz, test.jsonl.gz, yield.json and the datasheet README.md [default: benchmark/data; "
                   "with --env: none, only the shards are built].")
@click.option("--seed", default=0, show_default=True, help="Seed of tasks, simulated agents and injections (the documented one rebuilds the shipped data).")
@click.option("--agent-model", default=None, metavar="MODEL", help="Run the agents on this litellm model instead of the simulated agents.")
@click.option("--generator", default="template", show_default=True, metavar="template|MODEL", help="Error generator: offline rules or a litellm model.")
@click.option("--seeds", default=None, type=click.IntRange(min=1), help="Tasks per environment in the first pass [default: 64].")
@click.option("--per-seed", default=None, type=click.IntRange(min=1), help="Injections tried per task [default: 8].")
@click.option("--min-per-mode", default=None, type=click.IntRange(min=0), help="Top up modes with fewer kept traces than this [default: 30].")
@click.option("--topup-rounds", default=None, type=click.IntRange(min=0), help="At most this many top-up rounds over the modes still short [default: 6].")
@click.option("--env", "env_names", multiple=True, metavar="NAME",
              help="Build only these environments' shards (repeatable); with --out, also assemble a dataset of only them "
                   "[default: every registered environment, assembled into --out].")
@click.option("--shards", "shard_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Shard cache: each environment's shard, reused while the digest of its code, pins and arguments is "
                   "unchanged [default: .faultlens/bench/shards].")
@click.option("--force", is_flag=True, help="Build the chosen environments' shards again even when the cache has them.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--no-calibration", is_flag=True, help="Skip scoring the heuristic and the baselines on test for the datasheet.")
def build(out, seed, agent_model, generator, seeds, per_seed, min_per_mode, topup_rounds, env_names, shard_dir, force, workers,
          no_calibration):
    """Build the bundled benchmark, shard by shard: each environment through the injection pipeline on its own, then the
    shards assembled and split by task into dev and test.

    \b
    Every environment (missing or stale shards built, the rest from the cache), assembled into benchmark/data:
      faultlens bench build --out benchmark/data --seed 0
    One environment's shard only (the other shards and benchmark/data untouched):
      faultlens bench build --env adk_team

    Writes OUT/dev.jsonl.gz, OUT/test.jsonl.gz, OUT/yield.json and the datasheet
    OUT/README.md (counts per environment, modality, mode, topology and length;
    how it was made; the command that rebuilds it; the heuristic's and the
    baselines' accuracy on test). The same arguments give byte-identical files,
    whichever shards came from the cache.
    """
    import time

    from .build import DEFAULT_PER_SEED, DEFAULT_SEEDS, MIN_PER_MODE, TOPUP_ROUNDS, build_bundled
    from .shards import DEFAULT_CACHE, ShardParams, build_shards, check_envs

    started = time.time()
    shard_dir = shard_dir or DEFAULT_CACHE
    params = ShardParams(seed=seed, agent_model=agent_model, generator=generator, seeds=seeds or DEFAULT_SEEDS,
                         per_seed=per_seed or DEFAULT_PER_SEED,
                         min_per_mode=MIN_PER_MODE if min_per_mode is None else min_per_mode,
                         topup_rounds=TOPUP_ROUNDS if topup_rounds is None else topup_rounds)
    bars = _ShardBars()
    try:
        if env_names and out is None:
            shards = build_shards(check_envs(env_names), params, shard_dir, workers=workers, force=force, progress=bars)
        else:
            out = out or Path("benchmark/data")
            result = build_bundled(out, seed=seed, agent_model=agent_model, generator=generator, seeds=params.seeds,
                                   per_seed=params.per_seed, min_per_mode=params.min_per_mode,
                                   topup_rounds=params.topup_rounds, envs=list(env_names) or None, workers=workers,
                                   calibrate=not no_calibration, progress=bars, shards=shard_dir, force=force)
            shards = result.shards
    finally:
        bars.close()
    made = [n for n, s in shards.items() if not s.cached]
    console.print(f"shards in {shard_dir / params.key()}: {len(made)} built ({', '.join(made) or 'none'}), "
                  f"{len(shards) - len(made)} from the cache")
    if out is not None:
        console.print(f"wrote {result.total} trace(s) ({len(result.traces['dev'])} dev, {len(result.traces['test'])} test) "
                      f"to {out} in {time.time() - started:.0f} s; datasheet: {out / 'README.md'}")


class _ShardBars:
    """One progress bar per shard being built (its pipeline runs, pass 1 and top-ups, add up to its total);
    a shard taken from the cache is one line."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.env = ""
        self.offsets: dict[str, int] = {}

    def __call__(self, env: str, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        if stage == "cached" or stage.startswith("stale"):
            self.close()
            console.print(f"{env}: {'from the cache' if stage == 'cached' else stage}", highlight=False)
            return
        if env != self.env or self.bar is None:
            self.close()
            self.env, self.offsets = env, {}
            self.bar = tqdm(total=0, desc=env, unit="task")
        bar = self.bar
        if stage not in self.offsets:
            self.offsets[stage] = bar.total or 0
            bar.total = self.offsets[stage] + total
            bar.set_postfix_str(stage, refresh=False)
        bar.update(self.offsets[stage] + done - bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar, self.env = None, ""


def _loso(realdev: Path, seed: int, json_out: Path | None) -> None:
    """`faultlens train --loso`: the leave-one-system-out tables, with a progress bar over systems."""
    import json

    from rich.progress import Progress

    from faultlens.attributors.registry import DEFAULT_METHOD

    from .loso import leave_one_system_out, loso_tables

    if not (realdev / "trail").is_dir() or not (realdev / "agentrx").is_dir():
        raise click.UsageError(f"--realdev {realdev}: expected the folders trail/ and agentrx/ of the real datasets there")
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("features, then one fit per system", total=None)

        def done(system: str) -> None:
            progress.update(task, description=f"held out {system}: done")
        report = leave_one_system_out(realdev, seed=seed, default=DEFAULT_METHOD, progress=done)
    wide = Console(width=max(console.width, 170))
    for table in loso_tables(report):
        wide.print(table)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.summary(), indent=2))
        console.print(f"wrote {json_out}")


@click.command("train")
@click.option("--dataset", "dataset", multiple=True, default=("bundled:dev",), show_default=True,
              help="Training dataset spec, repeatable (traces pooled); a test split or a real dataset's holdout half is refused.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the model (joblib), e.g. attributors/learned/model.joblib. Required unless --loeo.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the model fit.")
@click.option("--loeo", is_flag=True,
              help="Evaluate instead of writing a model: for each environment (or framework, --by), train on DATASET's "
                   "others and score the held-out one's traces of --test-dataset, beside heuristic and every baseline.")
@click.option("--by", type=click.Choice(["environment", "framework"]), default="environment", show_default=True,
              help="With --loeo: what one fold holds out (our own environments count as one framework, `faultlens`).")
@click.option("--test-dataset", default="bundled:test", show_default=True,
              help="With --loeo: the traces scored for each held-out environment (only ever scored, never trained on).")
@click.option("--cross-validate", "folds", type=click.IntRange(min=2), default=None, metavar="K",
              help="Evaluate instead of writing a model: cut the last --dataset's labelled runs (yours) into K folds and "
                   "score each with a model trained on the other datasets and folds, beside heuristic and every baseline.")
@click.option("--loso", is_flag=True,
              help="Evaluate instead of writing a model: the measure of record. For every system (each bundled framework, "
                   "our own environments, TRAIL, AgentRx), train as the shipped model is but without any run of it, and "
                   "score it beside heuristic, every label-free baseline, random choice and the frozen rows of docs/loso/frozen/.")
@click.option("--realdev", type=click.Path(file_okay=False, path_type=Path), default=Path("../shared/realdev"), show_default=True,
              help="With --loso: the folder holding the real datasets (trail/, agentrx/).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --loeo, --loso or --cross-validate: also write the numbers (per group, averages with 95% CIs) as JSON.")
def train(dataset, out, seed, loeo, by, test_dataset, folds, loso, realdev, json_out):
    """Train the `learned` attributor's model on DATASET (never on a test trace); see benchmark/train.py.

    \b
    Rebuild the shipped model:
      faultlens train --dataset bundled:dev --dataset trail:../shared/realdev/trail:train --dataset taubench:../shared/realdev/agentrx:train --out attributors/learned/model.joblib
    Leave-one-environment-out table (train on dev of the other environments, test on test of the held-out one):
      faultlens train --loeo --dataset bundled:dev --test-dataset bundled:test
    Leave-one-framework-out table (the forecast for a framework no training trace came from):
      faultlens train --loeo --by framework --dataset bundled:dev --test-dataset bundled:test
    How learned would do on your system, from your labelled runs (`faultlens traces label`):
      faultlens train --cross-validate 5 --dataset bundled:dev --dataset store:.faultlens/faultlens.db
    Leave-one-system-out, the measure every modelling choice is made on (about 10 minutes here):
      faultlens train --loso --realdev ../shared/realdev
    """
    if sum(map(bool, (loeo, folds, loso))) > 1:
        raise click.UsageError("choose one of --loeo, --loso and --cross-validate")
    if loso:
        _loso(realdev, seed, json_out)
        return
    if loeo or folds:
        import json

        from .datasets import load_dataset
        from .train import cross_validate, leave_one_out, loeo_tables

        def done(group: str) -> None:
            console.print(f"held out {group}: done")

        if folds:
            if len(dataset) < 2:
                raise click.UsageError("--cross-validate takes the training datasets and, last, yours: e.g. "
                                       "--dataset bundled:dev --dataset store:PATH")
            report = cross_validate(list(dataset), folds=folds, seed=seed, progress=done)
        else:
            if len(dataset) != 1:
                raise click.UsageError("--loeo takes one --dataset")
            report = leave_one_out(load_dataset(dataset[0]).traces(), load_dataset(test_dataset).traces(), seed=seed,
                                   dataset_spec=dataset[0], in_distribution=True, by=by, progress=done)
        wide = Console(width=max(console.width, 170))  # ten columns: do not squeeze them into 80
        for table in loeo_tables(report):
            wide.print(table)
        timing = ", ".join(f"{m.removeprefix('baseline:')} {1000 * sec:.2f}" for m, sec in report.seconds_per_trace.items())
        if timing:
            wide.print(f"milliseconds per trace: {timing}")
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report.summary(), indent=2))
            console.print(f"wrote {json_out}")
        return
    if out is None:
        raise click.UsageError("--out is required (or pass --loeo to evaluate without writing a model)")
    import time

    from .train import train_learned

    started = time.perf_counter()
    result = train_learned(list(dataset), out=out, seed=seed)
    console.print(f"trained on {result.traces} trace(s), {result.steps} step(s) of {', '.join(result.environments) or 'unnamed'}; "
                  f"training step accuracy {result.train_step_accuracy:.3f}; wrote {result.out} "
                  f"({result.out.stat().st_size / 1e6:.2f} MB) in {time.perf_counter() - started:.0f} s")
    if len(result.sources) > 1:
        for spec, (runs, weight) in result.sources.items():
            console.print(f"  {spec}: {runs} labelled run(s), weighing {weight:.1f} each on average")
    if result.repeated:
        console.print(f"  {result.repeated} run(s) already in an earlier dataset were trained on once")


if __name__ == "__main__":  # pragma: no cover
    try:
        bench()
    except FaultlensError as exc:
        raise SystemExit(str(exc)) from None
