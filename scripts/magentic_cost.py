"""CPU and wall time per run of `magentic_team` (seed runs and injected runs), in one process.

Usage: python scripts/magentic_cost.py [SEEDS] [PER_SEED] [SEED]

SEED (default 0) picks the tasks; use another one than a `faultlens inject` running at the same time, whose
executor folders would otherwise be shared (they are per task).

CPU time counts this process and the code executor's subprocesses (RUSAGE_CHILDREN).
"""

from __future__ import annotations

import os
import resource
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors.pipeline import InjectConfig, inject  # noqa: E402


def cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    per_seed = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    inject(InjectConfig(envs=["magentic_team"], seeds=1, per_seed=1, seed=seed + 999, workers=1))  # imports, instrumentation
    c0, w0 = cpu(), time.perf_counter()
    result = inject(InjectConfig(envs=["magentic_team"], seeds=seeds, per_seed=per_seed, seed=seed, workers=1))
    c1, w1 = cpu(), time.perf_counter()
    attempts = sum(len(s.attempts) for s in result.seeds)
    # Each seed is run three times (live, replayed check, noise-free) before its injected runs.
    runs = attempts + 3 * seeds
    print(f"seeds={seeds} per_seed={per_seed} seed={seed} runs={runs} attempts={attempts} kept={len(result.traces)}")
    print(f"cpu={c1 - c0:.1f}s wall={w1 - w0:.1f}s cpu/run={(c1 - c0) / runs:.3f}s cpu/attempt(incl. seed runs)="
          f"{(c1 - c0) / attempts:.3f}s")


if __name__ == "__main__":
    main()
