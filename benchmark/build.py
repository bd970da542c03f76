"""Build the bundled benchmark: every registered environment through the injection pipeline, shard by shard.

`build_bundled(out_dir, seed)` (and `faultlens bench build`) runs the warm-start
injection pipeline (`injectors.pipeline`) over every environment that
`injectors.envs.names(include_frameworks=True)` lists (the environments on
real agent frameworks need the `frameworks` extra to build, not to load), with simulated agents unless an agent model is
given, and writes, in the layout `benchmark.datasets` reads:

    OUT/dev.jsonl.gz     kept failure traces of the dev tasks
    OUT/test.jsonl.gz    kept failure traces of the test tasks
    OUT/yield.json       the pipeline's yield per environment and mode
    OUT/README.md        the datasheet: counts, how it was made, how to rebuild it, calibration

Shards. Each environment is built on its own into a shard (`benchmark.shards`:
its kept traces, yield and seed rows), cached under a digest of the code, pins
and arguments that made it, so an unchanged environment is not built again;
`assemble` then writes the files above from the shards, in the order one
monolithic build over all environments wrote them.

Passes (per environment). The first pass injects `per_seed` errors into each of `seeds` tasks. Then up to
`topup_rounds` top-up rounds: each mode with fewer than `min_per_mode` kept traces is injected again over fresh
tasks (task seeds `seed + TOPUP_STRIDE * round`), on as many tasks as its measured yield says the deficit needs
(`topup_tasks`; modes with similar needs share one pipeline run, `topup_groups`). A mode stops at the target,
when two rounds in a row add nothing, or when its yield is under `MIN_YIELD` after `MIN_YIELD_EVIDENCE` attempts
(listed in the datasheet). Modes an environment declares not applicable (`Environment.not_applicable`) are
never injected there.

Splits are by task: a task's traces all go to the same split, chosen by a hash
of the build seed and the task id, so no task is in both.

Everything is a function of the arguments: the same seed gives byte-identical
files (gzip headers carry no time; traces carry no clock; renders are
deterministic), whether the shards were built together, one by one or taken
from the cache, which `tests/benchmark/test_build.py` and `test_shards.py` check on small builds.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultlens.middleware.model.trace import Trace

from .metrics import length_bucket
from .shards import (DEFAULT_PER_SEED, DEFAULT_SEEDS, MIN_PER_MODE, MIN_YIELD, MIN_YIELD_EVIDENCE, TOPUP_ATTEMPTS,
                     TOPUP_MAX_TASKS, TOPUP_MIN_TASKS, TOPUP_ROUNDS, TOPUP_STRIDE, Progress, Shard, ShardParams,
                     build_shards, check_envs, topup_groups, topup_tasks, trace_line, write_lines)

SPLIT_TEST_PERCENT = 50


@dataclass
class BuildResult:
    out_dir: Path
    traces: dict[str, list[Trace]]  # split -> traces
    yield_rows: list[dict[str, Any]]
    seeds: list[dict[str, Any]]
    seconds: float = 0.0
    calibration: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    shards: dict[str, Shard] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.traces.values())


def split_of(seed: int, trace: Trace) -> str:
    """`dev` or `test` for a trace, by its task (every trace of a task lands in the same split)."""
    from faultlens.injectors.envs.base import stable_seed

    return "test" if stable_seed("split", seed, trace.task.id) % 100 < SPLIT_TEST_PERCENT else "dev"


def build_bundled(
    out_dir: str | Path,
    seed: int = 0,
    agent_model: str | None = None,
    generator: str = "template",
    *,
    seeds: int = DEFAULT_SEEDS,
    per_seed: int = DEFAULT_PER_SEED,
    envs: list[str] | None = None,
    min_per_mode: int = MIN_PER_MODE,
    topup_rounds: int = TOPUP_ROUNDS,
    noise: float = 0.2,
    workers: int = 2,
    calibrate: bool = True,
    command: str | None = None,
    progress: Progress | None = None,
    shards: str | Path | None = None,
    force: bool = False,
) -> BuildResult:
    """Build each environment's shard (from the cache `shards` when unchanged; None: no cache) and assemble the
    dataset and its datasheet in `out_dir`."""
    started = time.time()
    names = check_envs(envs)
    params = ShardParams(seed=seed, agent_model=agent_model, generator=generator, seeds=seeds, per_seed=per_seed,
                         min_per_mode=min_per_mode, topup_rounds=topup_rounds, noise=noise)
    built = build_shards(names, params, None if shards is None else Path(shards), workers=workers, force=force,
                         progress=progress)
    result = assemble(built, names, out_dir, params, calibrate=calibrate, command=command)
    result.seconds = time.time() - started
    return result


def assembly_order(shards: dict[str, Shard], names: list[str]) -> list[tuple[str, Trace]]:
    """Every shard's (line, trace) in the order of one monolithic build over `names`.

    That build ran the first pass of all environments in one pipeline run (its traces in `names` order, each
    environment's in seed order), then each top-up round over the environments in sorted order. A shard keeps
    its traces per phase, so the same order is put back together here.
    """
    out = [item for env in names for item in shards[env].phase(0)]
    rounds = max((len(shards[env].phases) for env in names), default=1)
    for round_no in range(1, rounds):
        out += [item for env in sorted(names) for item in shards[env].phase(round_no)]
    return out


def assemble(shards: dict[str, Shard], names: list[str], out_dir: str | Path, params: ShardParams, *,
             calibrate: bool = True, command: str | None = None) -> BuildResult:
    """Write the splits, yield.json and the datasheet of the environments `names` from their shards.

    Everything computed across environments is computed here, from the assembled files: the split of each
    trace (by task), the order of the lines, the yield tables (rows per environment, sorted) and the
    calibration (the dataset-level baselines need the whole test split).
    """
    from faultlens.injectors import envs as registry

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[Trace]] = {"dev": [], "test": []}
    lines: dict[str, list[str]] = {"dev": [], "test": []}
    for line, trace in assembly_order(shards, names):
        split = split_of(params.seed, trace)
        splits[split].append(trace)
        lines[split].append(line)
    for split, items in lines.items():
        write_lines(items, out_dir / f"{split}.jsonl.gz")
    # InjectResult.summary and seed_summary sort their rows by environment: per-environment rows concatenate alike.
    yield_rows = [row for env in sorted(names) for row in shards[env].yield_rows]
    seed_rows = [row for env in sorted(names) for row in shards[env].seed_rows]
    (out_dir / "yield.json").write_text(json.dumps({"yield": yield_rows, "seeds": seed_rows}, indent=2, sort_keys=True) + "\n")
    build = BuildResult(out_dir, splits, yield_rows, seed_rows, shards=shards)
    if calibrate:
        build.calibration = calibrate_split(out_dir / "test.jsonl.gz")
    args = {"seed": params.seed, "agent_model": params.agent_model, "generator": params.generator, "seeds": params.seeds,
            "per_seed": params.per_seed, "min_per_mode": params.min_per_mode, "topup_rounds": params.topup_rounds,
            "noise": params.noise, "envs": names, "all_envs": registry.names(include_frameworks=True)}
    (out_dir / "README.md").write_text(datasheet(build, args, command or rebuild_command(out_dir, args)))
    return build


def write_sorted(traces: list[Trace], path: Path) -> int:
    """Write traces as gzipped JSONL (`trace_line`), with no time stamp in the gzip header."""
    return write_lines((trace_line(t) for t in traces), path)


def rebuild_command(out_dir: Path, args: dict[str, Any]) -> str:
    # The shipped data lives in benchmark/data; the command names that folder whatever folder this build wrote,
    # so that a rebuild elsewhere (a test, a check) writes the very same datasheet.
    parts = ["faultlens bench build", "--out benchmark/data", f"--seed {args['seed']}"]
    if args["agent_model"]:
        parts.append(f"--agent-model {args['agent_model']}")
    if args["generator"] != "template":
        parts.append(f"--generator {args['generator']}")
    if args["seeds"] != DEFAULT_SEEDS:
        parts.append(f"--seeds {args['seeds']}")
    if args["per_seed"] != DEFAULT_PER_SEED:
        parts.append(f"--per-seed {args['per_seed']}")
    if args["min_per_mode"] != MIN_PER_MODE:
        parts.append(f"--min-per-mode {args['min_per_mode']}")
    if args["topup_rounds"] != TOPUP_ROUNDS:
        parts.append(f"--topup-rounds {args['topup_rounds']}")
    if sorted(args["envs"]) != sorted(args.get("all_envs") or args["envs"]):
        parts += [f"--env {n}" for n in args["envs"]]
    return " ".join(parts)


# ---------------------------------------------------------------- calibration

def calibrate_split(path: Path, methods: list[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Step, agent and mode accuracy of `heuristic` and every `baseline:*` on one split, per environment.

    Runs the benchmark runner into a temporary folder and scores its predictions
    with `benchmark.metrics` (no bootstrap: the datasheet shows point values).
    """
    import tempfile

    from .metrics import breakdown, compute_metrics
    from .runner import baseline_dir, read_predictions, run_benchmark

    if not path.exists() or not path.stat().st_size:
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="faultlens-calibrate-") as tmp:
        run_dir = Path(tmp) / "run"
        # baselines=None: the runner's own list, i.e. every baseline:* including the dataset-level ones
        summary = run_benchmark(f"jsonl:{path}", (methods or ["heuristic"])[0], out=run_dir, progress=False,
                                concurrency=1, baselines=(methods[1:] if methods else None))
        names = [summary.method, *summary.baselines]
        for name in names:
            pred = run_dir / "predictions.jsonl" if name == names[0] else baseline_dir(run_dir, name) / "predictions.jsonl"
            records = read_predictions(pred)
            per_env = breakdown(records, "benchmark", samples=0)
            per_env["all"] = compute_metrics(records, samples=0)
            out[name] = {env: {"n": m["n"], "step": m["step_accuracy"]["value"], "agent": m["agent_accuracy"]["value"],
                               "mode": m["mode_macro_f1"]["value"]} for env, m in per_env.items()}
    return out


# ---------------------------------------------------------------- the datasheet

def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def datasheet(build: BuildResult, args: dict[str, Any], command: str) -> str:
    """The dataset's README: what is in it, how it was made, how to rebuild it, how hard it is."""
    from faultlens.injectors import envs as registry
    from faultlens.injectors.applicability import CODES

    every = [t for split in ("dev", "test") for t in build.traces[split]]
    env_names = sorted({t.source.benchmark or "" for t in every} | set(args["envs"]))
    info = {n: registry.get(n) for n in env_names if n in registry.names(include_frameworks=True)}
    out = ["# The bundled benchmark", ""]
    out.append(f"{len(every)} failure traces with exact gold labels (agent, step, failure mode), made by warm-start error "
               f"injection into {len(env_names)} environments: {len(build.traces['dev'])} in `dev.jsonl.gz`, "
               f"{len(build.traces['test'])} in `test.jsonl.gz` (native faultlens JSONL, gzipped). Load them with "
               "`faultlens bench run --dataset bundled:test ...` or `benchmark.datasets.load_dataset('bundled:dev')`.")
    out += ["", "## How it was made", ""]
    out.append("Each environment generates tasks from the seed; its team (simulated agents: `faultlens-sim/<env>`, "
               "whose policies read their conversation and carry wrong inputs forward) solves each task; the run is "
               "recorded, replayed exactly up to a step t, step t is replaced by an error of one failure mode (the "
               f"`{args['generator']}` generator), the agents continue live, and the run is kept only if the task now "
               "fails. The gold label is the injected step, its agent and the mode. Seeds contain recovered, "
               f"non-decisive mistakes at rate {args['noise']} per opportunity, and verifiers catch some injected errors "
               "(those runs still succeed and are dropped), so the first step that looks wrong is often not the decisive one.")
    out.append("")
    out.append(f"First pass: {args['seeds']} tasks per environment, up to {args['per_seed']} injections per task. Then up to "
               f"{args['topup_rounds']} top-up rounds: every (environment, mode) with fewer than {args['min_per_mode']} kept "
               f"traces is injected again over fresh tasks (task seeds {args['seed']} + {TOPUP_STRIDE}·round), "
               f"{TOPUP_ATTEMPTS} injections of it per task, on as many tasks as its measured yield per task says the deficit "
               f"needs (at most {TOPUP_MAX_TASKS}; modes with similar needs share a run); it stops at the target, when "
               f"two rounds in a row add nothing, or when its yield "
               f"(kept / attempted) is under {MIN_YIELD:.0%} after {MIN_YIELD_EVIDENCE} attempts. Splits are by task (hash of the seed and "
               f"the task id, {SPLIT_TEST_PERCENT}% test): no task has traces in both splits. Images and frames are stored "
               "inline in the traces (base64 PNG step media), so the files are self-contained.")
    out += ["", "Rebuild it, byte for byte (same files, same bytes):", "", "```", command, "```", ""]
    out.append("`yield.json` holds the pipeline's yield: per environment and mode, the injections attempted, drifted, "
               "still succeeding (caught or harmless, dropped) and kept.")

    out += ["", "## Environments", ""]
    rows = []
    for n in env_names:
        env = info.get(n)
        mine = [t for t in every if t.source.benchmark == n]
        lengths = [len(t.steps) for t in mine]
        rows.append([f"`{n}`", (env.stands_in_for or "-") if env else "?", env.modality if env else "?", env.topology if env else "?",
                     len([t for t in build.traces["dev"] if t.source.benchmark == n]),
                     len([t for t in build.traces["test"] if t.source.benchmark == n]),
                     len({t.task.id for t in mine}),
                     f"{min(lengths)}–{max(lengths)}" if lengths else "-",
                     f"{sum(lengths) / len(lengths):.1f}" if lengths else "-"])
    out.append(_table(["environment", "stands in for", "modality", "topology", "dev", "test", "tasks", "steps (min–max)",
                       "steps (mean)"], rows))

    for title, key in (("Modality", lambda t: t.source.modality or "?"),
                       ("Topology", lambda t: "multi-agent" if t.multi_agent else "single-agent"),
                       ("Framework", lambda t: t.source.framework or "?"),
                       ("Trace length (steps)", lambda t: length_bucket(len(t.steps)))):
        out += ["", f"## {title}", ""]
        counts: defaultdict[Any, Counter[str]] = defaultdict(Counter)
        for split in ("dev", "test"):
            for t in build.traces[split]:
                counts[key(t)][split] += 1
        out.append(_table([title.lower(), "dev", "test", "total"],
                          [[k, c["dev"], c["test"], c["dev"] + c["test"]] for k, c in sorted(counts.items())]))

    out += ["", "## Failure modes per environment", ""]
    out.append(f"Kept traces per gold mode (both splits). A blank is a mode the environment never kept: it does not fit "
               f"its steps, or its errors were always caught; `yield.json` says which. Target: every mode an environment "
               f"yields has at least {args['min_per_mode']} traces.")
    out.append("")
    per = Counter((t.source.benchmark, t.gold.mode) for t in every if t.gold)
    modes = [c for c in CODES if any(per[(n, c)] for n in env_names)]
    rows = [[f"`{n}`", *[per[(n, c)] or "" for c in modes], sum(per[(n, c)] for c in modes)] for n in env_names]
    rows.append(["all", *[sum(per[(n, c)] for n in env_names) for c in modes], len(every)])
    out.append(_table(["environment", *modes, "total"], rows))
    short = [f"`{n}` {c} ({per[(n, c)]})" for n in env_names for c in modes if 0 < per[(n, c)] < args["min_per_mode"]]
    out += ["", "Modes under the target after top-up: " + (", ".join(short) if short else "none") + "."]
    low = [f"`{r['env']}` {r['mode']} ({r['kept']}/{r['attempted']})" for r in build.yield_rows
           if r["attempted"] >= MIN_YIELD_EVIDENCE and r["kept"] / r["attempted"] < MIN_YIELD]
    out += ["", f"Modes with a yield under {MIN_YIELD:.0%} (kept/attempted, after at least {MIN_YIELD_EVIDENCE} attempts), "
            "not topped up further: " + (", ".join(low) if low else "none") + "."]
    declared = [(n, code, reason) for n in env_names if n in info for code, reason in sorted(info[n].not_applicable.items())]
    if declared:
        out += ["", "Modes declared not applicable (never injected there; their errors essentially never made the task "
                "fail, yield under 5% of attempts in earlier builds):", ""]
        out.append(_table(["environment", "mode", "why"], [[f"`{n}`", code, reason] for n, code, reason in declared]))

    if build.calibration:
        out += ["", "## Calibration (test split)", ""]
        out.append("Step accuracy (%) of the offline heuristic and the trivial baselines on `test`, per environment, "
                   "computed with the benchmark runner and metrics (`benchmark.build.calibrate_split`). An environment "
                   "where one of them gets most steps right would be too easy.")
        out.append("")
        methods = list(build.calibration)
        envs_seen = [e for e in env_names if any(e in build.calibration[m] for m in methods)] + ["all"]
        rows = [[f"`{e}`" if e != "all" else "all", build.calibration[methods[0]].get(e, {}).get("n", 0),
                 *[_pct(build.calibration[m].get(e, {}).get("step")) for m in methods]] for e in envs_seen]
        out.append(_table(["environment", "traces", *methods], rows))
        out += ["", "Agent accuracy (%) of the same methods:", ""]
        rows = [[f"`{e}`" if e != "all" else "all", *[_pct(build.calibration[m].get(e, {}).get("agent")) for m in methods]]
                for e in envs_seen]
        out.append(_table(["environment", *methods], rows))
    out.append("")
    return "\n".join(out)


__all__ = ["BuildResult", "TOPUP_ATTEMPTS", "TOPUP_MAX_TASKS", "TOPUP_MIN_TASKS", "assemble", "assembly_order", "build_bundled",
           "calibrate_split", "datasheet", "split_of", "topup_groups", "topup_tasks", "trace_line", "write_sorted"]
