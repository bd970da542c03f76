"""Measure the faultlens tracer's overhead per instrumented step against the bare OpenTelemetry SDK.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_tracer.py [--steps 2000] [--repeats 3]

In one process, the same trivial tool function is called N times inside one
agent, three ways:

- bare:      the OpenTelemetry SDK alone (`start_as_current_span` with the
             same GenAI attributes), spans to an `InMemorySpanExporter`;
- faultlens: `@tracer.tool` inside `@tracer.agent` inside `tracer.run`,
             each span written to the SQLite store as a step (a file, WAL);
- faultlens (:memory:): the same with an in-memory SQLite store.

Prints CPU microseconds per step of this process (best of the repeats; CPU
time, not wall time, because the machine may be shared), the ratio to bare,
and steps per CPU second into the store. SQLite runs in-process, so its work
is counted. A benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from rich.table import Table

from faultlens.middleware import Tracer, open_store


def bare(steps: int) -> float:
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

    start = time.process_time()
    with otel.start_as_current_span("invoke_workflow bench"), otel.start_as_current_span("invoke_agent worker"):
        for i in range(steps):
            tool(i)
    elapsed = time.process_time() - start
    assert len(exporter.get_finished_spans()) == steps + 2
    return elapsed


def traced(steps: int, db: str) -> float:
    tracer = Tracer(store=open_store(db), env_exporters=False)

    @tracer.tool(name="echo")
    def tool(i: int) -> dict:
        return {"i": i}

    @tracer.agent(name="worker")
    def worker() -> None:
        for i in range(steps):
            tool(i)

    start = time.process_time()
    with tracer.run(task="bench") as run:
        worker()
    elapsed = time.process_time() - start
    assert len(tracer.store.get_trace(run.id).steps) == steps
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000, help="tool calls per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per variant; the best is kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {"bare OTel SDK + InMemorySpanExporter": [], "faultlens tracer, SQLite file": [], "faultlens tracer, SQLite :memory:": []}
        for r in range(args.repeats):
            # Interleaved, so drifting machine load hits every variant alike.
            results["bare OTel SDK + InMemorySpanExporter"].append(bare(args.steps))
            results["faultlens tracer, SQLite file"].append(traced(args.steps, str(Path(tmp) / f"bench{r}.db")))
            results["faultlens tracer, SQLite :memory:"].append(traced(args.steps, ":memory:"))
    base = min(results["bare OTel SDK + InMemorySpanExporter"]) / args.steps
    table = Table(title=f"tracer overhead, {args.steps} tool steps, best of {args.repeats} (CPU time of this process)")
    for column in ("variant", "CPU µs / step", "× bare", "steps / CPU s"):
        table.add_column(column, justify="right" if column != "variant" else "left")
    for name, times in results.items():
        per_step = min(times) / args.steps
        table.add_row(name, f"{per_step * 1e6:.1f}", f"{per_step / base:.1f}", f"{1 / per_step:,.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
