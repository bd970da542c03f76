"""What the schema check and redaction add to OTLP ingest, as a ratio to ingest without them in the same run.

Builds the same OTLP exports as scripts/load_server.py (each one run: a
workflow span and N step spans with ~250 characters of content), then stores
them with the server's ingestor three ways, each into a fresh SQLite store:
without schema check and redaction (the store's redaction swapped for the
identity), with the schema check only, and with both (what the server does).

    python scripts/bench_ingest_checks.py --requests 60 --spans 10
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests/: the protobuf → OTLP JSON oracle

import faultlens.middleware.store.ids as ids_module  # noqa: E402
import faultlens.middleware.store.sql as sql_module  # noqa: E402
from faultlens.middleware.otlp.schema import validate_export  # noqa: E402
from faultlens.middleware.store import SQLiteStore  # noqa: E402
from faultlens.server.ingest import Ingestor  # noqa: E402
from load_server import _encoded_runs  # noqa: E402
from tests.faultlens.server.otlp_oracle import protobuf_to_otlp_json  # noqa: E402

# The store's own redaction of ids (ids.stored_id) and of the columns it writes (sql.SQLStore).
REAL = (sql_module.redact, ids_module.redact_id)
redact_module = importlib.import_module("faultlens.middleware.store.redact")  # the package exports a function of the same name


def identity(value, key=None):
    return value


def once(payloads: list[dict], check: bool, redact: bool) -> float:
    sql_module.redact, ids_module.redact_id = REAL if redact else (identity, identity)
    redact_module.clear_cache()  # every run starts cold, as a server meeting new runs does
    with tempfile.TemporaryDirectory() as folder:
        ingest = Ingestor(SQLiteStore(Path(folder) / "bench.db"))
        start = time.perf_counter()
        for payload in payloads:
            if check:
                validate_export(payload)
            ingest(payload, checked=True)
        return (time.perf_counter() - start) / len(payloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--spans", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    payloads = [protobuf_to_otlp_json(body) for body in _encoded_runs(args.requests, args.spans)]
    times: dict[str, list[float]] = {"neither": [], "schema": [], "schema+redaction": []}
    for _ in range(args.repeat):  # interleaved, so that load on a shared machine hits all three alike
        times["neither"].append(once(payloads, check=False, redact=False))
        times["schema"].append(once(payloads, check=True, redact=False))
        times["schema+redaction"].append(once(payloads, check=True, redact=True))
    sql_module.redact, ids_module.redact_id = REAL
    # The fastest of the repeats: on a shared machine the others measure the neighbours too.
    base = min(times["neither"])
    for name, values in times.items():
        best = min(values)
        print(f"{name:18} {best * 1000:6.2f} ms per request of {args.spans + 1} spans  ({best / base:.2f}x)")


if __name__ == "__main__":
    main()
