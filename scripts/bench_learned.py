"""Time of the `learned` attributor per trace, on the bundled dev traces closest to `--steps` steps.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_learned.py [--steps 20] [--traces 20] [--repeats 3]

The model is loaded once (as `LearnedAttributor()` does), a few traces are
attributed to warm up, then each repeat attributes the same traces; prints the
best repeat's wall and CPU milliseconds per trace (features, step scores,
mode, explanation: the whole `attribute` call) and the 1-minute load average,
since the machine may be shared. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import time

from faultlens.attributors.learned.attributor import LearnedAttributor
from faultlens.benchmark import load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="pick traces with about this many steps")
    parser.add_argument("--traces", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    traces = sorted(load_dataset("bundled:dev"), key=lambda t: (abs(len(t.steps) - args.steps), t.id))[: args.traces]
    attributor = LearnedAttributor()
    for trace in traces[:3]:
        attributor.attribute(trace)
    walls, cpus = [], []
    for _ in range(args.repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        for trace in traces:
            attributor.attribute(trace)
        walls.append((time.perf_counter() - wall) / len(traces))
        cpus.append((time.process_time() - cpu) / len(traces))
    steps = sorted({len(t.steps) for t in traces})
    print(f"learned: {len(traces)} traces of {steps[0]}-{steps[-1]} steps, best of {args.repeats}: "
          f"{min(walls) * 1e3:.1f} ms wall, {min(cpus) * 1e3:.1f} ms CPU per trace "
          f"(load average {load_before:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
