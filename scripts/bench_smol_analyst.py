"""CPU per run of `smol_analyst` (a real smolagents team on simulated agents), beside a bundled environment.

In one process, for the first N tasks of each environment: CPU seconds (`time.process_time`) per seed run
(live, recorded), per replay of a seed, and per injected run (warm start: replay up to the step, the error,
then live), over every mode the template rules write an error for, at the first step each fits. The baseline is
`research_team` (a bundled environment written against `Runtime`, no framework), measured the same way.

Usage:  python scripts/bench_smol_analyst.py [--tasks 10] [--baseline research_team]
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.generators import TemplateGenerator, gen_input  # noqa: E402
from faultlens.injectors.pipeline import inject_one  # noqa: E402
from faultlens.injectors.applicability import applicable_modes  # noqa: E402
from faultlens.middleware.replay.session import Session  # noqa: E402


def measure(name: str, tasks: int) -> dict[str, float]:
    env = envs.get(name)
    sim = {"seed": 1, "noise": 0.2}
    env.run(env.tasks(99, 1)[0], sim=sim)  # warm-up: imports, smolagents' prompt templates
    started = time.process_time()
    runs = [(task, env.run(task, sim=sim, trace_id=f"{task.id}-seed")) for task in env.tasks(0, tasks)]
    seed_cpu = (time.process_time() - started) / tasks
    started = time.process_time()
    for task, run in runs:
        env.run(task, session=Session(run.recording, replay_until=None), sim=sim, trace_id=run.trace.id)
    replay_cpu = (time.process_time() - started) / tasks
    generator, injected, started = TemplateGenerator(), 0, time.process_time()
    for task, run in runs:
        done: set[str] = set()
        for step in run.trace.steps:
            if run.call_of(step.index) is None:
                continue
            for mode in applicable_modes(step, run.trace):
                if mode in done:
                    continue
                generated = generator.generate(gen_input(run.trace, step.index, mode, random.Random(step.index), env))
                if generated is None:
                    continue
                done.add(mode)
                inject_one(env, run.trace, run.recording, step.index, mode, generated, model=None, sim=sim,
                           trace_id=f"{task.id}-t{step.index}-{mode}", step_calls=run.step_calls)
                injected += 1
    inject_cpu = (time.process_time() - started) / max(1, injected)
    return {"seed": seed_cpu, "replay": replay_cpu, "injected": inject_cpu, "injections": injected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--baseline", default="research_team")
    args = parser.parse_args()
    rows = {name: measure(name, args.tasks) for name in ("smol_analyst", args.baseline)}
    print(f"{'environment':<16}{'seed run':>12}{'replay':>12}{'injected run':>14}{'injections':>12}   (CPU s per run)")
    for name, row in rows.items():
        print(f"{name:<16}{row['seed']:>12.3f}{row['replay']:>12.3f}{row['injected']:>14.3f}{row['injections']:>12.0f}")
    base, smol = rows[args.baseline], rows["smol_analyst"]
    print(f"ratio smol_analyst / {args.baseline}: seed {smol['seed'] / base['seed']:.1f}x, "
          f"injected {smol['injected'] / base['injected']:.1f}x")


if __name__ == "__main__":
    main()
