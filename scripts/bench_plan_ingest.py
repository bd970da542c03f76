"""What planning ingest costs (`ingest.plan.plan_ingest`) against a git revision's, in one process: CPU per span, alternated run by run.

The baseline is the revision's file holding `plan_ingest` (default:
98c78c3's `middleware/spans/mapping.py`, the commit before `middleware/ingest/`
and the framework adapters), imported beside today's tree. Two loads: the
load_server runs (GenAI spans, 11 per request) and the smolagents-shaped run
of bench_span_links.py (OpenInference spans, in requests of 11). Prints the
best and the median of `--rounds` runs of each.

    .venv/bin/python scripts/bench_plan_ingest.py --rounds 80
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_span_links import baseline_module, run_spans  # noqa: E402
from load_server import _encoded_runs  # noqa: E402

from faultlens.middleware.ingest.plan import plan_ingest  # noqa: E402
from faultlens.middleware.otlp.protobuf import protobuf_to_records  # noqa: E402


def once(fn) -> float:
    started = time.thread_time()
    fn()
    return time.thread_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--baseline", default="98c78c3")
    parser.add_argument("--baseline-path", default="middleware/spans/mapping.py")
    args = parser.parse_args()
    old = baseline_module(args.baseline, args.baseline_path)
    spans = run_spans(300)
    loads = {"GenAI (load_server runs, 11 spans a request)": [protobuf_to_records(b) for b in _encoded_runs(200, 10)],
             "OpenInference (smolagents-shaped, 11 spans a request)": [spans[i:i + 11] for i in range(0, len(spans), 11)]}
    plan_ingest(loads["GenAI (load_server runs, 11 spans a request)"][0])  # (loads the adapters once, as a process does)
    for name, batches in loads.items():
        n = sum(map(len, batches))
        before, after = [], []
        for _ in range(args.rounds):  # alternated one by one: load on a shared machine hits both alike
            before.append(once(lambda: [old.plan_ingest(None, b, source="bench") for b in batches]))
            after.append(once(lambda: [plan_ingest(b, source="bench") for b in batches]))
        median = sorted(after)[len(after) // 2] / sorted(before)[len(before) // 2]
        print(f"{name}: best {min(before) * 1e6 / n:.2f} us/span before, {min(after) * 1e6 / n:.2f} after, "
              f"ratio {min(after) / min(before):.3f} (median ratio {median:.3f})")


if __name__ == "__main__":
    main()
