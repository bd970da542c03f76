"""Measure the CPU cost of one `ag2_experts` run (seed and injected), with the executor's interpreter isolated vs not.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_ag2_run.py [--tasks 10] [--repeats 3]

In one process, the same tasks are run two ways, interleaved per repeat so that
drifting machine load hits both alike:

- venv:     the executor finds the venv's own `python` first (what the
            environment did before: its start-up reads every .pth file of
            site-packages);
- isolated: the executor finds the environment's shim, `python -I -S` (the
            default now).

For each, per run: the seed run (live) and one injected run (an R.4 plan
replayed up to its call, then live), as CPU seconds of this process plus its
reaped children (the code the executor runs), best of the repeats. AG2 is
imported before timing starts (a worker pays that once). The 1-minute load
average is printed because the machine may be shared; read the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
from pathlib import Path
from typing import Any

import autogen  # noqa: F401  (imported before timing: a worker pays it once)

from faultlens.injectors import envs
from faultlens.injectors.envs.ag2_experts import env as ag2_experts
from faultlens.injectors.generators import TemplateGenerator, gen_input
from faultlens.injectors.pipeline import inject_one

SIM = {"seed": 3, "noise": 0.2, "tendencies": {}}


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(tasks: list[Any]) -> tuple[float, float]:
    """(CPU-s per seed run, CPU-s per injected run) over `tasks`."""
    env = envs.get("ag2_experts")
    start = cpu()
    runs = [env.run(task, sim=SIM) for task in tasks]
    seed = (cpu() - start) / len(tasks)
    start = cpu()
    for result in runs:
        generated = TemplateGenerator().generate(gen_input(result.trace, 0, "R.4", random.Random(1), env))
        assert generated is not None
        inject_one(env, result.trace, result.recording, 0, "R.4", generated, model=None, sim=SIM, trace_id="x",
                   step_calls=result.step_calls)
    return seed, (cpu() - start) / len(tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tasks = envs.get("ag2_experts").tasks(0, args.tasks)
    isolated = ag2_experts._interpreter_dir
    variants = {"venv": lambda: Path(os.path.dirname(sys.executable)), "isolated": isolated}
    measure(tasks[:1])  # warm: first-use imports inside AG2 and the proxy
    best: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for name, where in variants.items():
            ag2_experts._interpreter_dir = where
            seed, injected = measure(tasks)
            old = best.get(name, [float("inf")] * 2)
            best[name] = [min(old[0], seed), min(old[1], injected)]
    ag2_experts._interpreter_dir = isolated
    out = {"load_1min": round(os.getloadavg()[0], 2), "tasks": args.tasks, "repeats": args.repeats,
           **{f"{name}_cpu_s_per_{kind}_run": round(v, 4) for name, vals in best.items()
              for kind, v in zip(("seed", "injected"), vals)},
           "injected_ratio_isolated_to_venv": round(best["isolated"][1] / best["venv"][1], 3)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
