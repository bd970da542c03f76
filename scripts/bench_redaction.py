"""How often redaction changes ordinary agent text, and what it costs per string.

Walks every string of the bundled benchmark traces (benchmark/data/*.jsonl.gz:
agent messages, tool calls and results, task texts, ids) through
`redact_text` and reports how many it changed (none of them holds a real
secret, so every change is a false positive) and the time per string, beside
the time of `json.dumps` on the same strings as a baseline from the same run.

    python scripts/bench_redaction.py
"""

from __future__ import annotations

import gzip
import importlib
import json
import time
from pathlib import Path

redact = importlib.import_module("faultlens.middleware.store.redact")  # the package exports a function of the same name
DATA = Path(__file__).resolve().parent.parent / "benchmark" / "data"


def strings(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            strings(item, out)
    elif isinstance(value, list):
        for item in value:
            strings(item, out)


def main() -> None:
    found: list[str] = []
    for path in sorted(DATA.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    strings(json.loads(line), found)
    unique = list(dict.fromkeys(found))  # redact_text caches short strings; time the uncached work
    start = time.perf_counter()
    for text in unique:
        json.dumps(text)
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    changed = [text for text in unique if redact.redact_text(text) != text]
    spent = time.perf_counter() - start
    print(f"strings: {len(found)} ({len(unique)} distinct, {sum(map(len, unique)) / len(unique):.0f} characters on average)")
    print(f"changed by redaction (false positives): {len(changed)}")
    for text in changed[:10]:
        print("   ", repr(text[:120]))
    print(f"redact_text: {spent / len(unique) * 1e6:.1f} µs per distinct string; json.dumps: {baseline / len(unique) * 1e6:.2f} µs; ratio {spent / baseline:.0f}x")


if __name__ == "__main__":
    main()
