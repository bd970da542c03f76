"""Build the successful runs the failure detector trains on: benchmark/data/succeeded.jsonl.gz.

The bundled benchmark holds only failed runs (the injection pipeline keeps a
run only if the task now fails). A detector needs the other side too, and the
hard part of it: the seed runs the pipeline starts from (tasks of seed 0, the
first pass of `faultlens bench build`) and injected runs that still succeeded
(a verifier caught the error, or it did no harm), which look like failures and
are not. Both are made here, offline, with the same simulated teams:

    python scripts/detect_data.py --tasks 48 --per-seed 3 --out benchmark/data/succeeded.jsonl.gz

The same arguments make the same runs (seeded simulated agents). Injection records stay
under `metadata["injection"]` (an answer key: hidden from every detector).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from faultlens.benchmark.build import write_sorted
from faultlens.injectors import envs
from faultlens.injectors.envs.base import stable_seed
from faultlens.injectors.generators import gen_input, get_generator
from faultlens.injectors.pipeline import candidates
from faultlens.injectors.sim import SimConfig, ensure_registered
from faultlens.middleware.model.trace import Trace
from faultlens.middleware.replay.session import Drift, Session

ENVS = ["adk_team", "ag2_experts", "agents_desk", "chart_desk", "chart_qa", "code_team", "magentic_team", "math_react",
        "research_desk", "research_team", "smol_analyst", "supervisor_team", "table_qa", "video_qa", "web_shop",
        "workflow_team"]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=48, help="tasks per environment (seed 0)")
    parser.add_argument("--per-seed", type=int, default=3, help="injections tried per successful seed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", nargs="*", default=ENVS)
    parser.add_argument("--out", default="benchmark/data/succeeded.jsonl.gz")
    args = parser.parse_args(argv)
    jobs = [(env, i, args.per_seed) for env in args.envs for i in range(args.tasks)]
    traces: list[Trace] = []
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=mp.get_context("forkserver")) as pool:
        for done, found in enumerate(pool.map(runs_of, jobs, chunksize=4), 1):
            traces.extend(found)
            if done % 50 == 0:
                print(f"{done}/{len(jobs)} tasks, {len(traces)} successful runs", file=sys.stderr, flush=True)
    n = write_sorted(traces, Path(args.out))
    seeds = sum(1 for t in traces if "injection" not in t.metadata)
    print(f"wrote {n} successful runs ({seeds} seed runs, {n - seeds} injected runs that still succeeded) to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
