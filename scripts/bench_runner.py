"""Runner overhead: traces per second with a zero-cost attributor.

Writes N synthetic failed traces (default 10,000, 10 steps each) to a
temporary JSONL file, then in the same process measures:

  plain loop      `await attributor.aattribute(trace)` over traces already in memory
  read dataset    `load_dataset("jsonl:...").traces()` alone (parsing + validation)
  runner          `run_benchmark(...)` end to end: read the dataset, hide gold labels,
                  asyncio workers, one predictions.jsonl line per trace, no baselines
  runner + bar    the same with the rich progress bar drawn (to a null console)

Usage:  python scripts/bench_runner.py [--traces 10000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rich.console import Console  # noqa: E402

from faultlens.benchmark import load_dataset, run_benchmark  # noqa: E402
from faultlens.middleware.jsonl import write_jsonl  # noqa: E402
from faultlens.middleware.model.trace import Attribution, GoldLabel, Outcome, Step, Task, Trace  # noqa: E402


class ZeroCostAttributor:
    """Blames the first step, instantly: whatever time is measured is the runner's own."""

    name = "zero-cost"

    def attribute(self, trace: Trace) -> Attribution:
        return Attribution(trace_id=trace.id, method=self.name, agent=trace.steps[0].agent, step=0)

    async def aattribute(self, trace: Trace) -> Attribution:
        return self.attribute(trace)


def make_traces(n: int, steps: int = 10) -> list[Trace]:
    agents = ["planner", "worker", "verifier"]
    return [
        Trace(id=f"t{i:06d}", task=Task(query=f"task {i}"), outcome=Outcome(success=False),
              steps=[Step(index=j, agent=agents[j % 3], content=f"step {j} of run {i}", native_id=str(j)) for j in range(steps)],
              gold=GoldLabel(step=i % steps, agent=agents[(i % steps) % 3], mode="R.2"))
        for i in range(n)
    ]


async def plain_loop(traces: list[Trace], attributor: ZeroCostAttributor) -> list[Attribution]:
    return [await attributor.aattribute(t) for t in traces]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    traces = make_traces(args.traces)
    attributor = ZeroCostAttributor()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "traces.jsonl"
        write_jsonl(traces, data)
        spec = f"jsonl:{data}"

        # CPU time of this process, not wall time: the machine is shared, and CPU
        # seconds are what the runner itself costs.
        timings: dict[str, float] = {}
        started = time.process_time()
        asyncio.run(plain_loop(traces, attributor))
        timings["plain loop"] = time.process_time() - started

        started = time.process_time()
        load_dataset(spec).traces()
        timings["read dataset"] = time.process_time() - started

        for label, progress in (("runner", False), ("runner + bar", True)):
            started = time.process_time()
            summary = run_benchmark(spec, attributor.name, attributor=attributor, baselines={}, out=Path(tmp) / label,
                                    concurrency=args.concurrency, progress=progress, console=Console(file=io.StringIO()))
            timings[label] = time.process_time() - started
            assert summary.done == args.traces

    n = args.traces
    loop_s = timings["plain loop"]
    print(f"{n} traces of 10 steps, concurrency {args.concurrency} (CPU seconds of this process)")
    for label, seconds in timings.items():
        extra = f"; {1000 * (seconds - loop_s) / n:.3f} ms/trace more than the plain loop" if label.startswith("runner") else ""
        print(f"{label:<14} {n / seconds:>9,.0f} traces/s  ({seconds:.2f} s{extra})")


if __name__ == "__main__":
    main()
