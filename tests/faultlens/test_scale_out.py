"""Scale-out on one PostgreSQL store: 2 `faultlens serve`, 2 `faultlens worker`, 8 clients, one worker SIGKILLed mid-way.

Checks: no span lost, no step duplicated, every failed run attributed
exactly once (and no succeeded run attributed), and the killed worker's job
claimed again by the other worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from faultlens.middleware.store import open_store
from tests.faultlens.server.conftest import run_team

ROOT = Path(__file__).resolve().parents[2]
CLIENTS, RUNS_PER_CLIENT = 8, 6  # half of each client's runs fail


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RoundRobin(SpanExporter):
    """Each export (one span: SimpleSpanProcessor) goes to the next server, so one run's spans land on both."""

    def __init__(self, endpoints: Sequence[str]):
        self.exporters = [OTLPSpanExporter(endpoint=e, timeout=30) for e in endpoints]
        self.n = 0
        self.results: list[SpanExportResult] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        exporter = self.exporters[self.n % len(self.exporters)]
        self.n += 1
        result = exporter.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        for e in self.exporters:
            e.shutdown()


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_two_servers_two_workers_one_killed(postgres_server, tmp_path):
    url = postgres_server.fresh_database_url()
    store = open_store(url)  # creates the tables before the servers race to
    ports = [_free_port(), _free_port()]
    procs: list[subprocess.Popen] = []
    try:
        for n, port in enumerate(ports):
            procs.append(_spawn([sys.executable, "-m", "faultlens.cli", "serve", "--db", url, "--port", str(port), "--workers", "0"], tmp_path / f"serve{n}.log"))
        workers = [
            _spawn([sys.executable, str(ROOT / "tests/faultlens/slow_worker.py"), "--db", url, "--method", "slow-heuristic",
                    "-O", "delay=0.4", "--lease", "2", "--poll", "0.1"], tmp_path / f"worker{n}.log")
            for n in range(2)
        ]
        procs += workers
        for port in ports:
            _wait(lambda: _healthy(port), 60, f"faultlens serve on port {port}")

        endpoints = [f"http://127.0.0.1:{p}/v1/traces" for p in ports]
        sent: list[dict] = []
        exporters: list[RoundRobin] = []
        lock = threading.Lock()

        def client(c: int) -> None:
            exporter = RoundRobin(endpoints[c % 2:] + endpoints[: c % 2])
            provider = TracerProvider(resource=Resource.create({"service.name": f"client-{c}"}))
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            for r in range(RUNS_PER_CLIENT):
                fail = r % 2 == 0
                ids = run_team(provider, query=f"client {c} run {r}: what is 17 * 23?", fail=fail)
                with lock:
                    sent.append({**ids, "fail": fail})
            with lock:
                exporters.append(exporter)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
        for t in threads:
            t.start()

        # Mid-way: once the first worker holds a job, kill it where it stands.
        victim = workers[0]
        held = _wait(lambda: _job_held_by(url, victim.pid), 90, "the first worker to claim a job")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        for t in threads:
            t.join(120)

        failed = [s["trace_id"] for s in sent if s["fail"]]
        succeeded = [s["trace_id"] for s in sent if not s["fail"]]
        assert len(sent) == CLIENTS * RUNS_PER_CLIENT and len(failed) == len(sent) // 2
        assert all(r == SpanExportResult.SUCCESS for e in exporters for r in e.results)

        def all_done():
            jobs = [store.get_job(t) for t in failed]
            return all(j is not None and j.state == "done" for j in jobs)

        _wait(all_done, 120, "every failed run's job to be done")

        # 0 spans lost, no step duplicated: each run has exactly its 3 step spans, each once.
        for s in sent:
            trace = store.get_trace(s["trace_id"])
            assert sorted(step.span_id for step in trace.steps) == sorted(s["steps"].values()), s["trace_id"]
            assert trace.task.query.startswith("client "), "the header was overwritten by a placeholder"
            assert trace.failed == s["fail"]
        assert sum(x.n_steps for x in store.list_traces(limit=None)) == 3 * len(sent)
        # Every failed run attributed exactly once; no succeeded run attributed.
        for trace_id in failed:
            attributions = store.attributions(trace_id)
            assert len(attributions) == 1, (trace_id, attributions)
            assert attributions[0].method == "slow-heuristic" and attributions[0].step is not None
        assert all(store.attributions(t) == [] and store.get_job(t) is None for t in succeeded)
        # The job the killed worker held was claimed again by the other one, after its lease ran out.
        again = store.get_job(held.trace_id)
        assert again.state == "done" and again.attempts >= 2 and str(workers[1].pid) in again.worker
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        store.close()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _job_held_by(url: str, pid: int):
    import psycopg

    from faultlens.middleware.store.jobs import JOB_COLUMNS, Job

    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE state = 'running' AND worker LIKE %s LIMIT 1", [f"%:{pid}:%"]).fetchone()
    return None if row is None else Job.from_row(row)
