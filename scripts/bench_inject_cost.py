"""CPU seconds per run of `faultlens inject` on one environment, in process.

    python scripts/bench_inject_cost.py --env agents_desk --seeds 10 --per-seed 8

One warm-up run first (imports, the framework's first run), then the pipeline
with one worker, timed with `time.process_time()`. A run is a seed run, its
replay check, the noise-free run (recovered-mistake measurement) or an
injected run.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="agents_desk")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--per-seed", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from faultlens.injectors import envs
    from faultlens.injectors.pipeline import InjectConfig, inject

    env = envs.get(args.env)
    env.run(env.tasks(99, 1)[0], sim={"seed": 0, "noise": 0.0})
    start = time.process_time()
    result = inject(InjectConfig(envs=[args.env], seeds=args.seeds, per_seed=args.per_seed, seed=0, workers=1))
    cpu = time.process_time() - start
    attempts = sum(len(s.attempts) for s in result.seeds)
    runs = attempts + 3 * sum(s.seed_success for s in result.seeds) + sum(not s.seed_success for s in result.seeds)
    print(f"{args.env}: {len(result.seeds)} seeds, {attempts} injected runs, {len(result.traces)} kept; "
          f"{cpu:.1f} CPU-s, {cpu / runs:.3f} CPU-s per run, {cpu / len(result.seeds):.2f} CPU-s per seed")


if __name__ == "__main__":
    main()
