"""Measure the faultlens tracer's cost per instrumented step against the bare OpenTelemetry SDK.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_tracer.py [--steps 2000] [--repeats 5]

In one process, the same trivial tool function is called N times inside one
agent inside one run, three ways:

- bare:          the OpenTelemetry SDK alone (`start_as_current_span` with the
                 same GenAI attributes), spans to an `InMemorySpanExporter`
                 through a `SimpleSpanProcessor`;
- faultlens batch (the default): `@tracer.tool` inside `@tracer.agent` inside
                 `tracer.run`, steps written to a SQLite file by the
                 `BatchSpanProcessor`'s thread, flushed when the run ends;
- faultlens step: the same with `Tracer(durability="step")`, each step
                 committed on the agent's thread as its span ends.

Two figures per variant, each the best of the repeats (variants interleaved,
so drifting machine load hits all alike):

- hot path: time per step of the agent's loop on the agent's thread (from
  the first tool call to the last one's return; the run's final flush is not
  in it), as wall time (what the agent waits for, including any wait for the
  GIL while the batch thread writes) and as the agent thread's own CPU time
  (`time.thread_time`, which a busy machine does not inflate);
- total CPU: CPU time of the whole process per step from before the run starts
  to after it has ended and every step is in the store — the background
  thread's mapping and SQLite writes included.

A benchmark, not a test: numbers depend on the machine, so read the ratios.
The 1-minute load average is printed because the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from rich.table import Table

from faultlens.middleware import Tracer, open_store


def bare(steps: int) -> tuple[float, float, float]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = provider.get_tracer("bench")

    def tool(i: int) -> dict:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.call.arguments": json.dumps({"i": i})}
        with otel.start_as_current_span("execute_tool echo", attributes=attributes) as span:
            result = {"i": i}
            span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            return result

    cpu = time.process_time()
    with otel.start_as_current_span("invoke_workflow bench"), otel.start_as_current_span("invoke_agent worker"):
        wall, thread = time.perf_counter(), time.thread_time()
        for i in range(steps):
            tool(i)
        wall, thread = time.perf_counter() - wall, time.thread_time() - thread
    cpu = time.process_time() - cpu
    assert len(exporter.get_finished_spans()) == steps + 2
    provider.shutdown()
    return wall, thread, cpu


def traced(steps: int, db: str, durability: str) -> tuple[float, float, float]:
    tracer = Tracer(store=open_store(db), env_exporters=False, durability=durability)

    @tracer.tool(name="echo")
    def tool(i: int) -> dict:
        return {"i": i}

    loop = [0.0, 0.0]

    @tracer.agent(name="worker")
    def worker() -> None:
        wall, thread = time.perf_counter(), time.thread_time()
        for i in range(steps):
            tool(i)
        loop[:] = [time.perf_counter() - wall, time.thread_time() - thread]

    cpu = time.process_time()
    with tracer.run(task="bench") as run:
        worker()
    cpu = time.process_time() - cpu
    assert len(tracer.store.get_trace(run.id).steps) == steps, "a step is missing from the store"
    tracer.shutdown()
    return loop[0], loop[1], cpu


VARIANTS = {
    "bare OTel SDK + InMemorySpanExporter": lambda steps, db: bare(steps),
    "faultlens, durability=batch (default)": lambda steps, db: traced(steps, db, "batch"),
    "faultlens, durability=step": lambda steps, db: traced(steps, db, "step"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000, help="tool calls per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per variant; the best is kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for k, (name, variant) in enumerate(VARIANTS.items()):
                results[name].append(variant(args.steps, str(Path(tmp) / f"bench{r}-{k}.db")))
    best = {name: tuple(min(r[k] for r in runs) / args.steps for k in range(3)) for name, runs in results.items()}
    base_wall, base_thread, base_cpu = best["bare OTel SDK + InMemorySpanExporter"]
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({
            "steps": args.steps, "repeats": args.repeats, "cpus": os.cpu_count(),
            "load_average_1min_before": round(load_before, 2), "load_average_1min_after": round(load_after, 2),
            "variants": {name: {"hot_path_wall_us_per_step": round(w * 1e6, 1), "hot_path_wall_x_bare": round(w / base_wall, 2),
                                "hot_path_thread_cpu_us_per_step": round(t * 1e6, 1), "hot_path_thread_cpu_x_bare": round(t / base_thread, 2),
                                "cpu_us_per_step": round(c * 1e6, 1), "cpu_x_bare": round(c / base_cpu, 2)} for name, (w, t, c) in best.items()},
        }))
        return
    table = Table(title=f"tracer cost, {args.steps} tool steps, best of {args.repeats}; load average {load_before:.2f} → {load_after:.2f} on {os.cpu_count()} CPUs")
    for column in ("variant", "hot path wall µs/step", "× bare", "hot path thread CPU µs/step", "× bare", "total process CPU µs/step", "× bare"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for name, (wall, thread, cpu) in best.items():
        table.add_row(name, f"{wall * 1e6:.1f}", f"{wall / base_wall:.2f}", f"{thread * 1e6:.1f}", f"{thread / base_thread:.2f}", f"{cpu * 1e6:.1f}", f"{cpu / base_cpu:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
