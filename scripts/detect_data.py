"""Build the successful runs the failure detector trains on: benchmark/data/succeeded.jsonl.gz.

The bundled benchmark holds only failed runs (the injection pipeline keeps a
run only if the task now fails). A detector needs the other side too, and the
hard part of it: the seed runs the pipeline starts from (tasks of seed 0, the
first pass of `faultlens bench build`) and injected runs that still succeeded
(a verifier caught the error, or it did no harm), which look like failures and
are not. Both are made here, offline, with the same simulated teams, for every
environment of the bundled benchmark by default:

    python scripts/detect_data.py --tasks 48 --per-seed 3 --out benchmark/data/succeeded.jsonl.gz

An environment whose framework is not installed here but in its extra's
virtualenv (CrewAI, Semantic Kernel, CAMEL: `make frameworks2` makes
.venv-frameworks2) is run by this script under that virtualenv's python, and
its runs are merged in place, as `faultlens bench build` does with its shards.
The same arguments make the same bytes (seeded simulated agents). Injection
records stay under `metadata["injection"]` (an answer key: hidden from every detector).
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from faultlens.benchmark.shards import trace_line, write_lines
from faultlens.injectors import envs
from faultlens.injectors.envs.base import stable_seed
from faultlens.injectors.generators import gen_input, get_generator
from faultlens.injectors.pipeline import candidates
from faultlens.injectors.sim import SimConfig, ensure_registered
from faultlens.middleware.errors import ConfigError
from faultlens.middleware.model.trace import Trace
from faultlens.middleware.replay.session import Drift, Session

def _still_succeeded(env, seed, task, t: int, mode: str, text: str, sim: dict, trace_id: str) -> Trace | None:
    """The injected run at (t, mode), when the task still succeeds (else None)."""
    call = t if seed.step_calls is None else seed.step_calls[t]
    if call is None:
        return None
    session = Session(seed.recording, replay_until=call, overrides={call: lambda record: env.injected_response(record, text)})
    try:
        result = env.run(task, session=session, sim=sim, trace_id=trace_id)
    except (Drift, Exception):  # a drifted or crashed replay is no run of the team's
        return None
    trace = result.trace
    if trace.outcome is None or not trace.outcome.success:
        return None
    trace.metadata["injection"] = {"seed_trace_id": seed.trace.id, "step": t, "mode": mode, "still_succeeded": True}
    return trace


def runs_of(args: tuple[str, int, int]) -> list[Trace]:
    """One task's successful seed run and its injected runs that still succeeded."""
    env_name, index, per_seed = args
    ensure_registered()
    env = envs.get(env_name)
    task = env.tasks(0, index + 1)[index]
    sim = SimConfig(seed=stable_seed(0, env_name, index), noise=0.2).to_dict()
    seed = env.run(task, sim=sim, trace_id=f"{task.id}-seed")
    if seed.trace.outcome is None or not seed.trace.outcome.success:
        return []
    out = [seed.trace]
    generator = get_generator("template")
    rng = random.Random(stable_seed(7, env_name, index, "detect"))
    injectable = None if seed.step_calls is None else {t for t, c in enumerate(seed.step_calls) if c is not None}
    queues = candidates(seed.trace, rng, rotate=index, injectable=injectable)
    tried = 0
    for mode, steps in queues.items():
        if tried >= per_seed:
            break
        for t in steps[:1]:
            generated = generator.generate(gen_input(seed.trace, t, mode, random.Random(stable_seed(7, task.id, t, mode)), env))
            if generated is None:
                continue
            tried += 1
            kept = _still_succeeded(env, seed, task, t, mode, generated.text, sim, f"{task.id}-t{t}-{mode}-ok")
            if kept is not None:
                out.append(kept)
    return out


def interpreter(name: str) -> Path | None:
    """The python that runs environment `name`: None for this one, else its extra's virtualenv's
    (`Environment.elsewhere`; when there is none, its message and how to leave the environment out)."""
    try:
        return envs.get(name).elsewhere()
    except ConfigError as exc:
        raise SystemExit(f"{exc}; or leave {name} out (--envs)") from None


def lines_elsewhere(name: str, python: Path, args: argparse.Namespace) -> list[str]:
    """Environment `name`'s lines, made by this script under `python` (its progress and errors go to our stderr)."""
    print(f"{name}: run by {python}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="faultlens-detect-") as folder:
        out = Path(folder) / f"{name}.jsonl.gz"
        command = [str(python), str(Path(__file__).resolve()), "--here", "--envs", name, "--tasks", str(args.tasks),
                   "--per-seed", str(args.per_seed), "--workers", str(args.workers), "--out", str(out)]
        if subprocess.run(command, stdout=subprocess.DEVNULL).returncode:
            raise SystemExit(f"{name}: {python} failed to make its runs (its error is above)")
        with gzip.open(out, "rt", encoding="utf-8") as fh:
            return fh.read().splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=48, help="tasks per environment (seed 0)")
    parser.add_argument("--per-seed", type=int, default=3, help="injections tried per successful seed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", nargs="*", default=envs.names(include_frameworks=True))
    parser.add_argument("--out", default="benchmark/data/succeeded.jsonl.gz")
    parser.add_argument("--here", action="store_true", help="run every environment in this interpreter (the child's side)")
    args = parser.parse_args(argv)
    where = {name: None if args.here else interpreter(name) for name in args.envs}
    lines: dict[str, list[str]] = {name: [] for name in args.envs}
    jobs = [(name, i, args.per_seed) for name in args.envs if where[name] is None for i in range(args.tasks)]
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=mp.get_context("forkserver")) as pool:
        for done, (job, found) in enumerate(zip(jobs, pool.map(runs_of, jobs, chunksize=4)), 1):
            lines[job[0]].extend(trace_line(t) for t in found)
            if done % 50 == 0:
                print(f"{done}/{len(jobs)} tasks, {sum(map(len, lines.values()))} successful runs", file=sys.stderr, flush=True)
    for name, python in where.items():
        if python is not None:
            lines[name] = lines_elsewhere(name, python, args)
    # In the order of --envs, whichever interpreter made them: the same arguments give the same bytes.
    ordered = [line for name in args.envs for line in lines[name]]
    n = write_lines(ordered, Path(args.out))
    seeds = sum(1 for line in ordered if "injection" not in json.loads(line)["metadata"])
    print(f"wrote {n} successful runs ({seeds} seed runs, {n - seeds} injected runs that still succeeded) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
