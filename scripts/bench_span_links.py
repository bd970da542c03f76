"""What resolving agents from the span tree costs at ingest: spans sent one by one, as exporters send them.

Builds a smolagents-shaped run (a manager agent span over N `Step` chains, each
with a model call and a tool call, every second step calling a managed agent
with its own step) and ingests it span by span, children first, into a fresh
SQLite store: once with this tree's `ingest.write.ingest` and once with the
`ingest` of a git revision's module (default: `middleware/spans/mapping.py` at
98c78c3, the commit before `middleware/ingest/`; `--baseline-path` names the
file for older layouts), in the same run. Prints spans per second of each and the ratio.

    .venv/bin/python scripts/bench_span_links.py --steps 300 --baseline 98c78c3 [--batch 512]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from faultlens.middleware import open_store
from faultlens.middleware.ingest import write as current
from faultlens.middleware.spans.record import SpanRecord

TRACE = "0af7651916cd43dd8448eb211c80319c"


def run_spans(steps: int) -> list[SpanRecord]:
    """Spans of one run, in end order."""
    out: list[SpanRecord] = []
    counter = iter(range(1, 10**9))
    clock = iter(range(1, 10**9))

    def span(name, kind, parent, start, **attrs):
        sid = f"{next(counter):016x}"
        return SpanRecord(TRACE, sid, parent, name, start, 0, {"openinference.span.kind": kind, **attrs})

    def finish(record):
        record.end_ns = next(clock)
        out.append(record)

    root = span("CodeAgent.run", "AGENT", None, next(clock), **{"input.value": '{"task": "q"}', "smolagents.managed_agents.0.name": "helper"})
    for n in range(steps):
        step = span(f"Step {n + 1}", "CHAIN", root.span_id, next(clock), **{"output.value": f"Execution logs:\n{n}"})
        finish(span("OpenAIModel.generate", "LLM", step.span_id, next(clock), **{"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": f"code {n}"}))
        if n % 2:
            helper = span("helper.run", "AGENT", step.span_id, next(clock), **{"output.value": f"report {n}"})
            inner = span("Step 1", "CHAIN", helper.span_id, next(clock), **{"output.value": f"found {n}"})
            finish(span("SimpleTool", "TOOL", inner.span_id, next(clock), **{"tool.name": "lookup", "input.value": "{}", "output.value": f"found {n}"}))
            finish(inner)
            finish(helper)
        finish(span("SimpleTool", "TOOL", step.span_id, next(clock), **{"tool.name": "calc", "input.value": "{}", "output.value": str(n)}))
        finish(step)
    finish(root)
    return out


def baseline_module(revision: str, file: str):
    """`file` of `revision`, imported beside where it was (so its relative imports resolve as they did)."""
    source = subprocess.run(["git", "show", f"{revision}:{file}"], capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("faultlens." + file.removesuffix(".py").replace("/", ".") + "_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed(module, records: list[SpanRecord], batch: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.db")
        began = time.perf_counter()
        for start in range(0, len(records), batch):
            module.ingest(store, records[start : start + batch])
        seconds = time.perf_counter() - began
        store.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--baseline", default="98c78c3")
    parser.add_argument("--baseline-path", default="middleware/spans/mapping.py", help="the file of the baseline revision that holds `ingest`")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1, help="spans per ingest call (1: SimpleSpanProcessor; BatchSpanProcessor sends up to 512)")
    args = parser.parse_args()
    records = run_spans(args.steps)
    base = baseline_module(args.baseline, args.baseline_path)
    best = {"baseline": float("inf"), "this tree": float("inf")}
    for _ in range(args.repeats):
        best["baseline"] = min(best["baseline"], timed(base, records, args.batch))
        best["this tree"] = min(best["this tree"], timed(current, records, args.batch))
    for name, seconds in best.items():
        print(f"{name:10}: {len(records)} spans, {args.batch} per request, in {seconds:.2f} s = {len(records) / seconds:,.0f} spans/s (best of {args.repeats})")
    print(f"ratio this tree / baseline time: {best['this tree'] / best['baseline']:.2f}")


if __name__ == "__main__":
    main()
