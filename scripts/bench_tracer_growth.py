#!/usr/bin/env python
"""Does the tracer's cost per step grow with the run? (a measurement, not a test)

Runs one agent calling a trivial tool N times inside one run, for each N
given, with every step committed as its span ends (`Tracer(durability="step")`;
on code without that option, the tracer as it is, which then committed each
step). Prints CPU µs per step of the process, best of --repeats, and the load
average. Flat figures across N mean a step costs the same however long the run.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_tracer_growth.py --steps 250 2000 4000
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def per_step_cpu_us(steps: int, repeats: int) -> float:
    from faultlens.middleware import Tracer

    best = float("inf")
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            options = {"durability": "step"} if "durability" in inspect.signature(Tracer).parameters else {}
            tracer = Tracer(db=os.path.join(tmp, "growth.db"), **options)

            @tracer.tool(name="lookup")
            def tool(i: int) -> dict:
                return {"i": i}

            @tracer.agent(name="worker")
            def agent(n: int) -> None:
                for i in range(n):
                    tool(i)

            cpu = time.process_time()
            with tracer.run(task="growth"):
                agent(steps)
            best = min(best, (time.process_time() - cpu) / steps * 1e6)
            tracer.shutdown()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[250, 2000, 4000], help="run lengths to measure")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    for steps in args.steps:
        print(f"{steps:>6} steps: {per_step_cpu_us(steps, args.repeats):8.1f} µs CPU per step (best of {args.repeats})")
    print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
