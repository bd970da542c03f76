#!/usr/bin/env python
"""What one OTLP request costs in-process, stage by stage (a measurement, not a test).

Encodes `--requests` protobuf bodies exactly as `load_server.py` does (one run
of a workflow span and `--spans` step spans each), then, with no HTTP, times
each stage of the server's path on fresh SQLite stores with
`time.thread_time` (CPU of this thread: a loaded machine does not inflate it).
Best of `--repeats`. Prints ms of CPU per request per stage and the total.

    python scripts/bench_ingest_stages.py --requests 200 --spans 10 --repeats 3
    python scripts/bench_ingest_stages.py --profile     # cProfile of the whole path, top 30 by own time
    python scripts/bench_ingest_stages.py --sql         # CPU of each SQL statement of the write, per request
    python scripts/bench_ingest_stages.py --serialise   # per step: model_dump, redact, json.dumps
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_server import _encoded_runs  # noqa: E402

try:
    from faultlens.middleware.ingest.plan import plan_ingest
    from faultlens.middleware.ingest.write import write_ingest
except ImportError:  # code before middleware/ingest, which this script also measures: its planner took the store
    from faultlens.middleware.spans import mapping as _before_ingest

    write_ingest = _before_ingest.write_ingest

    def plan_ingest(records, *, source):
        return _before_ingest.plan_ingest(None, records, source=source)
from faultlens.middleware.store.sqlite import Store, open_store  # noqa: E402
from faultlens.server.ingest import SOURCE, Ingestor  # noqa: E402
from faultlens.server import otlp_body  # noqa: E402

try:  # the protobuf reader of issue #17's second attempt; absent on older code, which this script also measures
    from faultlens.middleware.otlp.protobuf import protobuf_to_records
except ImportError:
    protobuf_to_records = None


def _stages(bodies: list[bytes], store: Store) -> dict[str, float]:
    from faultlens.middleware.otlp.convert import otlp_json_to_records
    from faultlens.middleware.otlp.schema import validate_export

    fast = protobuf_to_records
    totals = dict.fromkeys(["decode+check+records", "plan_ingest", "write_ingest (SQL)", "whole Ingestor path"], 0.0)
    for body in bodies[: len(bodies) // 2]:
        t0 = time.thread_time()
        if fast is not None:
            records = fast(body)
        else:
            payload = otlp_body.decode_otlp(body, otlp_body.PROTOBUF)
            validate_export(payload)
            records = otlp_json_to_records(payload, source=SOURCE, checked=True)
        t1 = time.thread_time()
        plan = plan_ingest(records, source=SOURCE)
        t2 = time.thread_time()
        with store.batch(plan.trace_ids):
            write_ingest(store, plan)
        t3 = time.thread_time()
        totals["decode+check+records"] += t1 - t0
        totals["plan_ingest"] += t2 - t1
        totals["write_ingest (SQL)"] += t3 - t2
    ingest = Ingestor(store)
    rest = bodies[len(bodies) // 2:]
    t0 = time.thread_time()
    for body in rest:
        if fast is not None:
            ingest.records(fast(body))
        else:
            payload = otlp_body.decode_otlp(body, otlp_body.PROTOBUF)
            validate_export(payload)
            ingest(payload, checked=True)
    totals["whole Ingestor path"] = time.thread_time() - t0
    half = len(bodies) // 2
    return {k: v * 1000 / (half if k != "whole Ingestor path" else len(rest)) for k, v in totals.items()}


class _TimedConnection:
    """A sqlite3 connection that adds each statement's thread CPU to `cost` (keyed by its first words)."""

    def __init__(self, conn, cost: dict, count: dict):
        self._conn, self._cost, self._count = conn, cost, count

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def _timed(self, method, sql, *args):
        key = ("MANY " if method == "executemany" else "") + " ".join(sql.split()[:4])[:48]
        started = time.thread_time()
        result = getattr(self._conn, method)(sql, *args)
        self._cost[key] = self._cost.get(key, 0.0) + time.thread_time() - started
        self._count[key] = self._count.get(key, 0) + 1
        return result

    def execute(self, sql, *args):
        return self._timed("execute", sql, *args)

    def executemany(self, sql, *args):
        return self._timed("executemany", sql, *args)


def _sql(bodies: list[bytes], store: Store) -> None:
    records = [protobuf_to_records(body) for body in bodies]
    db = store._db()  # noqa: SLF001 (a measurement of the SQLite store's own connection)
    cost: dict[str, float] = {}
    count: dict[str, int] = {}
    db.conn = _TimedConnection(db.conn, cost, count)
    total = 0.0
    for batch in records:
        plan = plan_ingest(batch, source=SOURCE)
        started = time.thread_time()
        with store.batch(plan.trace_ids):
            write_ingest(store, plan)
        total += time.thread_time() - started
    n = len(records)
    print(f"write_ingest {total * 1e3 / n:.3f} ms of CPU per request, of which:")
    for key, seconds in sorted(cost.items(), key=lambda item: -item[1]):
        print(f"  {seconds * 1e6 / n:7.1f} us  x{count[key] / n:.1f}  {key}")


def _serialise(bodies: list[bytes], store: Store, repeats: int) -> None:
    import json

    from faultlens.middleware.model.trace import Step
    from faultlens.middleware.store.redact import redact
    from faultlens.middleware.store.rows import prepare_steps

    plans = [plan_ingest(protobuf_to_records(body), source=SOURCE) for body in bodies]
    # (plan_ingest keeps a step as its field values since issue #17's fourth round; older code kept the Step)
    steps = [step if isinstance(step, Step) else Step(**step) for plan in plans for run in plan.runs for _, step, _, _ in run.steps]
    dumped = [step.model_dump(mode="json") for step in steps]
    redacted = [redact(d) for d in dumped]

    def best(fn) -> float:
        times = []
        for _ in range(repeats):
            started = time.thread_time()
            fn()
            times.append(time.thread_time() - started)
        return min(times) * 1e6 / len(steps)

    print(f"{len(steps)} steps; us of CPU per step, best of {repeats}")
    print(f"  model_dump(mode='json') {best(lambda: [s.model_dump(mode='json') for s in steps]):6.2f}")
    print(f"  redact                  {best(lambda: [redact(d) for d in dumped]):6.2f}")
    print(f"  json.dumps              {best(lambda: [json.dumps(d, ensure_ascii=False, sort_keys=True) for d in redacted]):6.2f}")
    print(f"  prepare_steps (all)     {best(lambda: prepare_steps(steps)):6.2f} (the three above before issue #17's fourth round)")
    per_span = best(lambda: [plan_ingest(protobuf_to_records(b), source=SOURCE) for b in bodies]) * len(steps) / (len(steps) + len(bodies))
    print(f"  plan_ingest per span    {per_span:6.2f} (protobuf reading included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--spans", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sql", action="store_true", help="CPU of each SQL statement of the write (needs the protobuf reader)")
    parser.add_argument("--serialise", action="store_true", help="per-step serialisation costs (needs the protobuf reader)")
    args = parser.parse_args()
    bodies = _encoded_runs(args.requests, args.spans)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.requests} requests of {args.spans + 1} spans; "
          f"protobuf fast path: {protobuf_to_records is not None}")
    if args.sql or args.serialise:
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(os.path.join(tmp, "q.db"))
            _sql(bodies, store) if args.sql else _serialise(bodies, store, args.repeats)
        print(f"load average {os.getloadavg()[0]:.2f}")
        return
    if args.profile:
        import cProfile
        import pstats

        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(os.path.join(tmp, "p.db"))
            profiler = cProfile.Profile()
            profiler.enable()
            _stages(bodies, store)
            profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        return
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            result = _stages(bodies, open_store(os.path.join(tmp, "s.db")))
        for k, v in result.items():
            best[k] = min(best.get(k, v), v)
    for k, v in best.items():
        print(f"{k:28s} {v:6.3f} ms/request")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
