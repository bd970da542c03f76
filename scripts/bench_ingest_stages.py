#!/usr/bin/env python
"""What one OTLP request costs in-process, stage by stage (a measurement, not a test).

Encodes `--requests` protobuf bodies exactly as `load_server.py` does (one run
of a workflow span and `--spans` step spans each), then, with no HTTP, times
each stage of the server's path on fresh SQLite stores with
`time.thread_time` (CPU of this thread: a loaded machine does not inflate it).
Best of `--repeats`. Prints ms of CPU per request per stage and the total.

    python scripts/bench_ingest_stages.py --requests 200 --spans 10 --repeats 3
    python scripts/bench_ingest_stages.py --profile     # cProfile of the whole path, top 30 by own time
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

from faultlens.middleware.spans import plan_ingest, write_ingest  # noqa: E402
from faultlens.middleware.store import Store, open_store  # noqa: E402
from faultlens.server.ingest import SOURCE, Ingestor  # noqa: E402
from faultlens.server import otlp_body  # noqa: E402

try:  # the protobuf reader of issue #17's second attempt; absent on older code, which this script also measures
    from faultlens.server.otlp_records import protobuf_to_records
except ImportError:
    protobuf_to_records = None


def _stages(bodies: list[bytes], store: Store) -> dict[str, float]:
    from faultlens.middleware.otlp import otlp_json_to_records
    from faultlens.middleware.otlp_schema import validate_export

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
        plan = plan_ingest(store, records, source=SOURCE)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--spans", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    bodies = _encoded_runs(args.requests, args.spans)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.requests} requests of {args.spans + 1} spans; "
          f"protobuf fast path: {protobuf_to_records is not None}")
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
