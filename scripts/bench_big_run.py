#!/usr/bin/env python
"""Ingest cost of big runs: linear in the request, independent of how big the run already is.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_big_run.py [--spans 8000] [--repeats 3]

Starts `faultlens serve`'s app in this process on loopback over a fresh SQLite
file and sends OTLP/HTTP protobuf bodies (made with the OpenTelemetry SDK and
its own OTLP encoder) from this process:

1. one request holding `--spans` spans of ONE run, against one request holding
   the same number of spans spread over `--spans / 10` runs (fresh run ids each
   time); the ratio of the two times is the figure (at most 1.5 is the goal);
2. then another one-run request of the same size, and while it is being
   ingested another client sends small exports (one run of 3 spans) in a
   loop: their worst latency;
3. `--grow` batches of 500 spans into one run that keeps growing: the median
   time of the first three batches and of the last three (equal if cost does
   not grow with the run).

Prints the best of the repeats, and the 1-minute load average (the machine may
be shared). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from faultlens.middleware.store import open_store
from faultlens.server import ServerThread, create_app

HEADERS = {"Content-Type": "application/x-protobuf"}


class Bodies:
    def __init__(self) -> None:
        self.memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "big-run-agent"}))
        provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = provider.get_tracer("faultlens.bench")

    def _step(self, conversation: str, i: int) -> None:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": f"agent-{i % 3}",
            "gen_ai.conversation.id": conversation,
            "gen_ai.request.model": "mock-model",
            "faultlens.content": f"step {i}: " + "lorem ipsum " * 20,
        }
        with self.tracer.start_as_current_span("chat", attributes=attrs):
            pass

    def runs(self, runs: int, spans_per_run: int) -> bytes:
        """`runs` runs, each a workflow span and `spans_per_run - 1` steps, in one body."""
        self.memory.clear()
        for _ in range(runs):
            conversation = uuid.uuid4().hex
            attributes = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.conversation.id": conversation, "faultlens.task": json.dumps({"query": "big run"})}
            with self.tracer.start_as_current_span("invoke_workflow big", attributes=attributes):
                for i in range(spans_per_run - 1):
                    self._step(conversation, i)
        return encode_spans(self.memory.get_finished_spans()).SerializeToString()

    def steps_of(self, conversation: str, start: int, count: int) -> bytes:
        """`count` more steps of the run `conversation` (no workflow span: it is still running)."""
        self.memory.clear()
        for i in range(start, start + count):
            self._step(conversation, i)
        return encode_spans(self.memory.get_finished_spans()).SerializeToString()


def post(http: httpx.Client, url: str, body: bytes) -> float:
    started = time.perf_counter()
    response = http.post(url, content=body, headers=HEADERS)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=8000, help="spans per big request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grow", type=int, default=24, help="500-span batches sent into one growing run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    bodies = Bodies()
    one_run = [bodies.runs(1, args.spans) for _ in range(args.repeats)]
    one_run_again = [bodies.runs(1, args.spans) for _ in range(args.repeats)]
    many_runs = [bodies.runs(args.spans // 10, 10) for _ in range(args.repeats)]
    small = [bodies.runs(1, 3) for _ in range(200)]
    grow_id = uuid.uuid4().hex
    grow = [bodies.steps_of(grow_id, k * 500, 500) for k in range(args.grow)]

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "big.db")
        with ServerThread(create_app(store), log_level="error") as server, httpx.Client(timeout=120) as http:
            url = server.url + "/v1/traces"
            post(http, url, small[-1])  # warm up the app and its connection
            t_one, t_many, small_latencies = [], [], []
            for r in range(args.repeats):
                # Timed alone, so the side client below does not weigh on either figure.
                t_many.append(post(http, url, many_runs[r]))
                t_one.append(post(http, url, one_run[r]))
                done = threading.Event()

                def small_client() -> None:
                    with httpx.Client(timeout=120) as other:
                        k = 0
                        while not done.is_set() and k < len(small):
                            small_latencies.append(post(other, url, small[k]))
                            k += 1

                side = threading.Thread(target=small_client)
                side.start()
                post(http, url, one_run_again[r])
                done.set()
                side.join()
            grow_times = [post(http, url, body) for body in grow]
            stored_grow = len(store.get_trace(grow_id).steps)
        store.close()

    report = {
        "spans_per_request": args.spans,
        "one_run_seconds_best": round(min(t_one), 3),
        "many_runs_seconds_best": round(min(t_many), 3),
        "one_over_many": round(min(t_one) / min(t_many), 2),
        "small_exports_during_big_ones": len(small_latencies),
        "small_export_ms_max": round(1000 * max(small_latencies), 1) if small_latencies else None,
        "grow_batches": args.grow,
        # medians of three, so one batch slowed by a neighbour's load does not decide
        "grow_first_3_batches_median_ms": round(1000 * statistics.median(grow_times[:3]), 1),
        "grow_last_3_batches_median_ms": round(1000 * statistics.median(grow_times[-3:]), 1),
        "grow_run_steps_stored": stored_grow,
        "cpus": os.cpu_count(),
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }
    if stored_grow != args.grow * 500:
        raise SystemExit(f"lost steps: {args.grow * 500} sent into the growing run, {stored_grow} stored")
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        print(f"{key:>32}  {value}")


if __name__ == "__main__":
    main()
