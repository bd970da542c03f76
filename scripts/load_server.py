#!/usr/bin/env python
"""Load test for `faultlens serve` ingest (a measurement, not a test).

Starts `faultlens serve` on loopback over a fresh store (by default SQLite in
this process; with --backend/--servers, `faultlens serve` processes over a
fresh SQLite file or a throwaway PostgreSQL server, see tests/postgres.py),
then a *second process* sends OTLP/HTTP protobuf exports to it (each
request is one whole agent run: a workflow span and N step spans, made with
the OpenTelemetry SDK and encoded with its own OTLP encoder) from several
threads with keep-alive connections, spread round-robin over the servers.
Bounded by a request count and a time limit. Reports:

- acknowledged spans/s: spans in requests answered 200, per second of the
  sending wall time;
- stored spans/s: steps (and run headers) read back from the store
  afterwards, per the same second (faultlens answers 200 only after the spans
  are committed, so the two agree unless spans were lost; the script fails if
  any were);
- latency of POST /v1/traces: p50, p99 and max;
- the servers' CPU per request;
- the 1-minute load average before and after, since the machine may be shared.

`--target URL` sends the same load to any OTLP/HTTP receiver started by hand
(for example `phoenix serve`, at http://127.0.0.1:6006/v1/traces); then only
acknowledged figures are reported, since the script cannot read that
receiver's store.

    python scripts/load_server.py --requests 2000 --spans 10 --clients 4
    python scripts/load_server.py --requests 2000 --spans 10 --clients 4 --target http://127.0.0.1:6006/v1/traces
    python scripts/load_server.py --backend postgres --servers 2     # two server processes, one PostgreSQL store
    python scripts/load_server.py --compare                          # SQLite x1, PostgreSQL x1, PostgreSQL x2: one table
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
from typing import Any

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


def client(urls: list[str], requests: int, spans: int, clients: int, seconds: float) -> dict:
    """The sending side (runs in the second process). Returns latencies, counts and this process's CPU while sending.

    Bodies are encoded before the clock starts; each thread keeps one
    keep-alive connection (`http.client`: httpx cost this process about
    three times the CPU per request, enough to make the client a bottleneck).
    """
    import http.client
    from urllib.parse import urlsplit

    bodies = _encoded_runs(requests, spans)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    next_body = iter(range(len(bodies)))
    deadline = time.monotonic() + seconds
    targets = [urlsplit(url) for url in urls]

    def connect(index: int) -> http.client.HTTPConnection:
        target = targets[index % len(targets)]
        return http.client.HTTPConnection(target.hostname, target.port or 80, timeout=60)

    def worker() -> None:
        connections: dict[int, http.client.HTTPConnection] = {}
        headers = {"Content-Type": "application/x-protobuf"}
        try:
            while time.monotonic() < deadline:
                with lock:
                    index = next(next_body, None)
                if index is None:
                    return
                slot = index % len(targets)
                started = time.perf_counter()
                for attempt in (0, 1):
                    conn = connections.get(slot) or connections.setdefault(slot, connect(slot))
                    try:
                        conn.request("POST", targets[slot].path, body=bodies[index], headers=headers)
                        response = conn.getresponse()
                        response.read()
                        break
                    except (http.client.HTTPException, ConnectionError):
                        # The server closed a kept-alive connection: open a new one and send once more.
                        conn.close()
                        connections.pop(slot, None)
                        if attempt:
                            raise
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    statuses[response.status] = statuses.get(response.status, 0) + 1
        finally:
            for conn in connections.values():
                conn.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    cpu = time.process_time()
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"latencies": latencies, "statuses": statuses, "wall_seconds": wall, "spans_per_request": spans + 1,
            "client_cpu_seconds": time.process_time() - cpu}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _send(urls: list[str], args: argparse.Namespace) -> dict:
    load_before = round(os.getloadavg()[0], 2)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run(
        [sys.executable, __file__, "--client", ",".join(urls), "--requests", str(args.requests),
         "--spans", str(args.spans), "--clients", str(args.clients), "--seconds", str(args.seconds)],
        capture_output=True, text=True, env=env, check=True,
    )
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "load_before": load_before}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _serve_processes(target: str, servers: int, args: argparse.Namespace) -> dict:
    """`servers` x `faultlens serve --workers 0` over `target`; send; read the store back."""
    import httpx

    from faultlens.middleware.store import open_store

    open_store(target).close()  # tables first, so the servers do not race to create them
    ports = [_free_port() for _ in range(servers)]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [
        subprocess.Popen([sys.executable, "-m", "faultlens.cli", "serve", "--db", target, "--port", str(port), "--workers", "0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for port in ports
    ]
    try:
        for port in ports:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"faultlens serve did not start on port {port}")
                time.sleep(0.2)
        before = sum(_cpu_seconds(proc.pid) for proc in procs)
        result = _send([f"http://127.0.0.1:{port}/v1/traces" for port in ports], args)
        # What the faultlens servers used while the client sent (not their start-up).
        result["server_cpu_seconds"] = sum(_cpu_seconds(proc.pid) for proc in procs) - before
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    store = open_store(target)
    result["stored_runs"] = store.count_traces()
    result["stored_steps"] = sum(s.n_steps for s in store.list_traces(limit=None))
    store.close()
    return result


def measure(args: argparse.Namespace, backend: str | None, servers: int) -> dict:
    """One configuration: backend None is the original in-process server over SQLite."""
    with tempfile.TemporaryDirectory() as tmp:
        if backend is None:
            from faultlens.middleware.store import open_store
            from faultlens.server import ServerThread, create_app

            store = open_store(Path(tmp) / "load.db")
            with ServerThread(create_app(store), log_level="error") as server:
                cpu = time.process_time()
                result = _send([server.url + "/v1/traces"], args)
                # CPU of this process (the server: HTTP, decoding, mapping, SQLite); the sending process's is not in it.
                result["server_cpu_seconds"] = time.process_time() - cpu
                result["stored_runs"] = store.count_traces()
                result["stored_steps"] = sum(s.n_steps for s in store.list_traces(limit=None))
            store.close()
        elif backend == "sqlite":
            result = _serve_processes(str(Path(tmp) / "load.db"), servers, args)
        elif args.pg_url:
            result = _serve_processes(args.pg_url, servers, args)
        else:
            from tests.postgres import ThrowawayPostgres

            # PostgreSQL's durable defaults (fsync and synchronous commit on), like SQLite's WAL with synchronous=NORMAL
            # is durable across a process crash.
            with ThrowawayPostgres(fast=False) as pg:
                result = _serve_processes(pg.fresh_database_url(), servers, args)
    return _report(args, result, backend or "sqlite (in-process server)", servers)


async def _bare_asgi(scope: dict, receive: Any, send: Any) -> None:
    """An ASGI app that reads each request's body and answers 200 with nothing done: the ceiling of this HTTP stack."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/x-protobuf")]})
    await send({"type": "http.response.body", "body": b""})


def measure_bare(args: argparse.Namespace) -> dict:
    """The same load against `_bare_asgi` under the same uvicorn set-up as the in-process server: the ceiling."""
    from faultlens.server import ServerThread

    with ServerThread(_bare_asgi, log_level="error") as server:  # type: ignore[arg-type]
        cpu = time.process_time()
        result = _send([server.url + "/v1/traces"], args)
        result["server_cpu_seconds"] = time.process_time() - cpu
    return _report(args, {**result, "stored_runs": None, "stored_steps": None}, "bare ASGI app (no work)", 1)


def measure_target(args: argparse.Namespace) -> dict:
    """Only send, to a receiver started by hand (its store cannot be read back)."""
    return _report(args, {**_send([args.target], args), "stored_runs": None, "stored_steps": None}, f"--target {args.target}", 1)


def _report(args: argparse.Namespace, result: dict, backend: str, servers: int) -> dict:
    latencies = result["latencies"]
    ok = result["statuses"].get("200", 0)
    spans_sent = ok * result["spans_per_request"]
    return {
        "backend": backend,
        "servers": servers,
        "requests": len(latencies),
        "ok": ok,
        "statuses": result["statuses"],
        "spans_per_request": result["spans_per_request"],
        "clients": args.clients,
        "wall_seconds": round(result["wall_seconds"], 3),
        "acknowledged_spans_per_second": round(spans_sent / result["wall_seconds"], 1),
        # A stored run is its step spans plus its workflow span (the run's header row).
        "stored_spans_per_second": None if result["stored_steps"] is None else round((result["stored_steps"] + result["stored_runs"]) / result["wall_seconds"], 1),
        "requests_per_second": round(ok / result["wall_seconds"], 1),
        "latency_ms_p50": round(1000 * _percentile(latencies, 50), 2),
        "latency_ms_p99": round(1000 * _percentile(latencies, 99), 2),
        "latency_ms_max": round(1000 * max(latencies), 2),
        "latency_ms_mean": round(1000 * statistics.fmean(latencies), 2),
        "server_cpu_ms_per_request": round(1000 * result["server_cpu_seconds"] / max(ok, 1), 2) if "server_cpu_seconds" in result else None,
        # The sending process's CPU while it sent (bodies were encoded before): the load generator's own cost.
        "client_cpu_ms_per_request": round(1000 * result["client_cpu_seconds"] / max(len(latencies), 1), 2),
        "stored_runs": result["stored_runs"],
        "stored_steps": result["stored_steps"],
        "expected_steps": ok * args.spans,
        "cpus": os.cpu_count(),
        "load_average_1min_before": result.get("load_before"),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="exports to send (one run each)")
    parser.add_argument("--spans", type=int, default=10, help="step spans per run (plus one workflow span)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent sending threads in the client process")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop sending after this long")
    parser.add_argument("--json", action="store_true", help="print one JSON object (per configuration) instead of a table")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default=None,
                        help="run `faultlens serve` processes over this store (default: one in-process server over SQLite)")
    parser.add_argument("--servers", type=int, default=1, help="`faultlens serve` processes sharing the store (with --backend)")
    parser.add_argument("--pg-url", default=None, help="use this PostgreSQL database instead of a throwaway server (its tables must be empty)")
    parser.add_argument("--compare", action="store_true", help="SQLite x1, PostgreSQL x1 and PostgreSQL x2 servers, one after another")
    parser.add_argument("--target", metavar="URL", help="send to this OTLP/HTTP /v1/traces endpoint instead of a faultlens server started here")
    parser.add_argument("--bare", action="store_true", help="send to an ASGI app that does no work (the HTTP stack's ceiling on this machine)")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # internal: run as the sending process
    args = parser.parse_args()

    if args.client:
        print(json.dumps(client(args.client.split(","), args.requests, args.spans, args.clients, args.seconds)))
        return

    if args.target:
        reports = [measure_target(args)]
    elif args.bare:
        reports = [measure_bare(args)]
    elif args.compare:
        reports = [measure(args, "sqlite", 1), measure(args, "postgres", 1), measure(args, "postgres", 2)]
    else:
        reports = [measure(args, args.backend, args.servers)]
    if args.json:
        for report in reports:
            print(json.dumps(report))
    elif len(reports) == 1:
        for key, value in reports[0].items():
            print(f"{key:>20}  {value}")
    else:
        print(f"{'backend':>10} {'servers':>7} {'stored spans/s':>14} {'requests/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
              f"{'server CPU ms/request':>21} {'stored/expected steps':>22}")
        for r in reports:
            print(f"{r['backend']:>10} {r['servers']:>7} {r['stored_spans_per_second']:>14} {r['requests_per_second']:>10} "
                  f"{r['latency_ms_p50']:>8} {r['latency_ms_p99']:>8} {r['server_cpu_ms_per_request']!s:>21} "
                  f"{str(r['stored_steps']) + '/' + str(r['expected_steps']):>22}")
    lost = [r for r in reports if r["stored_steps"] is not None and r["stored_steps"] != r["expected_steps"]]
    if lost:
        sys.exit("lost spans: " + "; ".join(f"{r['backend']} x{r['servers']}: {r['expected_steps']} acknowledged, {r['stored_steps']} stored" for r in lost))


if __name__ == "__main__":
    main()
