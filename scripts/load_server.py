#!/usr/bin/env python
"""Load test for `faultlens serve` ingest (a measurement, not a test).

Starts the faultlens server in this process on loopback over a fresh SQLite
store, then a *second process* sends OTLP/HTTP protobuf exports to it (each
request is one whole agent run: a workflow span and N step spans, made with
the OpenTelemetry SDK and encoded with its own OTLP encoder) from several
threads with keep-alive connections. Bounded by a request count and a time
limit. Reports:

- acknowledged spans/s: spans in requests answered 200, per second of the
  sending wall time;
- stored spans/s: steps read back from the store afterwards, per the same
  second (faultlens answers 200 only after the spans are committed, so the
  two agree unless spans were lost; the script fails if any were);
- latency of POST /v1/traces: p50, p99 and max;
- the 1-minute load average before and after, since the machine may be shared.

`--target URL` sends the same load to any OTLP/HTTP receiver started by hand
(for example `phoenix serve`, at http://127.0.0.1:6006/v1/traces); then only
acknowledged figures are reported, since the script cannot read that
receiver's store.

    python scripts/load_server.py --requests 2000 --spans 10 --clients 4
    python scripts/load_server.py --requests 2000 --spans 10 --clients 4 --target http://127.0.0.1:6006/v1/traces
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _encoded_runs(count: int, spans: int) -> list[bytes]:
    """`count` OTLP protobuf bodies, each one run of `spans` step spans under a workflow span."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "load-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("faultlens.load")
    bodies = []
    for run in range(count):
        memory.clear()
        with tracer.start_as_current_span("invoke_workflow load", attributes={"gen_ai.operation.name": "invoke_workflow", "faultlens.task": json.dumps({"query": f"load run {run}"})}):
            for i in range(spans):
                tool = i % 3 == 2
                attrs = {
                    "gen_ai.operation.name": "execute_tool" if tool else "chat",
                    "gen_ai.agent.name": f"agent-{i % 2}",
                    "faultlens.content": f"step {i} of run {run}: " + "lorem ipsum " * 20,
                }
                if tool:
                    attrs.update({"gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": json.dumps({"q": f"query {i}"}), "gen_ai.tool.call.result": "result " * 10})
                else:
                    attrs.update({"gen_ai.request.model": "mock-model", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30})
                with tracer.start_as_current_span(f"{'execute_tool search' if tool else 'chat'}", attributes=attrs):
                    pass
        bodies.append(encode_spans(memory.get_finished_spans()).SerializeToString())
    return bodies


def client(url: str, requests: int, spans: int, clients: int, seconds: float) -> dict:
    """The sending side (runs in the second process). Returns latencies and counts."""
    import httpx

    bodies = _encoded_runs(requests, spans)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    next_body = iter(range(len(bodies)))
    deadline = time.monotonic() + seconds

    def worker() -> None:
        with httpx.Client(timeout=60, headers={"Content-Type": "application/x-protobuf"}) as http:
            while time.monotonic() < deadline:
                with lock:
                    index = next(next_body, None)
                if index is None:
                    return
                started = time.perf_counter()
                response = http.post(url, content=bodies[index])
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"latencies": latencies, "statuses": statuses, "wall_seconds": wall, "spans_per_request": spans + 1}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="exports to send (one run each)")
    parser.add_argument("--spans", type=int, default=10, help="step spans per run (plus one workflow span)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent sending threads in the client process")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop sending after this long")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--target", metavar="URL", help="send to this OTLP/HTTP /v1/traces endpoint instead of a faultlens server started here")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # internal: run as the sending process
    args = parser.parse_args()

    if args.client:
        print(json.dumps(client(args.client, args.requests, args.spans, args.clients, args.seconds)))
        return

    load_before = os.getloadavg()[0]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def send(url: str) -> dict:
        proc = subprocess.run(
            [sys.executable, __file__, "--client", url, "--requests", str(args.requests),
             "--spans", str(args.spans), "--clients", str(args.clients), "--seconds", str(args.seconds)],
            capture_output=True, text=True, env=env, check=True,
        )
        return json.loads(proc.stdout.strip().splitlines()[-1])

    stored_runs = stored_steps = server_cpu = None
    if args.target:
        result = send(args.target)
    else:
        from faultlens.middleware.store import open_store
        from faultlens.server import ServerThread, create_app

        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Path(tmp) / "load.db")
            with ServerThread(create_app(store), log_level="error") as server:
                cpu = time.process_time()
                result = send(server.url + "/v1/traces")
                server_cpu = time.process_time() - cpu
                stored_runs = store.count_traces()
                stored_steps = sum(s.n_steps for s in store.list_traces(limit=None))
            store.close()

    latencies = result["latencies"]
    ok = result["statuses"].get("200", 0)
    spans_sent = ok * result["spans_per_request"]
    wall = result["wall_seconds"]
    report = {
        "target": args.target or "faultlens serve (in this process, SQLite file)",
        "requests": len(latencies),
        "ok": ok,
        "statuses": result["statuses"],
        "spans_per_request": result["spans_per_request"],
        "clients": args.clients,
        "wall_seconds": round(wall, 3),
        "acknowledged_spans_per_second": round(spans_sent / wall, 1),
        # A stored run is its step spans plus its workflow span (the run's header row).
        "stored_spans_per_second": None if stored_steps is None else round((stored_steps + stored_runs) / wall, 1),
        "requests_per_second": round(ok / wall, 1),
        "latency_ms_p50": round(1000 * _percentile(latencies, 50), 2),
        "latency_ms_p99": round(1000 * _percentile(latencies, 99), 2),
        "latency_ms_max": round(1000 * max(latencies), 2),
        "latency_ms_mean": round(1000 * statistics.fmean(latencies), 2),
        # CPU of this process (the server: HTTP, decoding, mapping, SQLite) per request; the
        # sending process's CPU is not in it. 1000 / this is what one core could serve.
        "server_cpu_ms_per_request": None if server_cpu is None else round(1000 * server_cpu / max(1, len(latencies)), 3),
        "stored_runs": stored_runs,
        "stored_steps": stored_steps,
        "expected_steps": ok * args.spans,
        "cpus": os.cpu_count(),
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(report))
        return
    for key, value in report.items():
        print(f"{key:>20}  {value}")
    if stored_steps is not None and stored_steps != ok * args.spans:
        sys.exit(f"lost spans: {ok * args.spans} step spans acknowledged, {stored_steps} in the store")


if __name__ == "__main__":
    main()
