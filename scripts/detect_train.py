"""Train the failure detector (attributors/detect/model.joblib) on runs with known outcomes.

    python scripts/detect_train.py [--extra SPEC ...] [--out attributors/detect/model.joblib]

Failed runs: the bundled benchmark (benchmark/data/{dev,test}.jsonl.gz). Runs
that succeeded: benchmark/data/succeeded.jsonl.gz (`scripts/detect_data.py`:
the seed runs the injection pipeline starts from and injected runs that still
succeeded). `--extra SPEC` adds any dataset whose traces carry an outcome (a
user's own runs, `jsonl:PATH`, `taubench:FILE.json`). A run's system (its
environment) is read only to group runs for `scripts/detect_eval.py`; the
features never see it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from faultlens.attributors.detect import DEFAULT_MODEL_PATH, FEATURE_NAMES, features, fit, save
from faultlens.attributors.detect.features import group_key, with_relative
from faultlens.benchmark.datasets import DATA_DIR, load_dataset
from faultlens.middleware.jsonl import read_jsonl
from faultlens.middleware.model.trace import Trace

SUCCEEDED = DATA_DIR / "succeeded.jsonl.gz"
CACHE = Path(".faultlens/cache/detect_features.jsonl.gz")  # git-ignored


@dataclass
class Run:
    system: str
    trace_id: str
    failed: bool
    row: dict[str, float]
    group: str = ""


def _system(trace: Trace, spec: str) -> str:
    return trace.source.benchmark or trace.source.framework or spec


def runs_of(traces: Iterable[Trace], spec: str) -> list[Run]:
    out = []
    for trace in traces:
        if trace.outcome is None or not trace.steps:
            continue  # no outcome: nothing to learn; no steps: nothing to read
        out.append(Run(_system(trace, spec), trace.id, not trace.outcome.success, features(trace), group_key(trace)))
    return out


def relative(runs: list[Run]) -> list[Run]:
    """The runs with their `rel_*` features, each compared with the runs of its own group (label-free)."""
    rows = with_relative([r.row for r in runs], [r.group for r in runs])
    return [Run(r.system, r.trace_id, r.failed, row, r.group) for r, row in zip(runs, rows)]


def _bundled() -> list[tuple[str, Iterable[Trace]]]:
    if not SUCCEEDED.exists():
        raise SystemExit(f"{SUCCEEDED} is missing: build it with `python scripts/detect_data.py`")
    return [("bundled", load_dataset("bundled")), ("succeeded", read_jsonl(SUCCEEDED))]


def data_digest() -> str:
    """A digest of the bundled files the runs come from: a rebuilt benchmark is new data, not the cache's."""
    digest = hashlib.sha256()
    for path in (DATA_DIR / "dev.jsonl.gz", DATA_DIR / "test.jsonl.gz", SUCCEEDED):
        digest.update(path.read_bytes() if path.exists() else b"")
    return digest.hexdigest()


def load_runs(extra: list[str] | None = None, cache: Path | None = CACHE) -> list[Run]:
    """Every training run's features and outcome (cached by feature names and `data_digest`: recomputed when either
    changes)."""
    key = {"features": FEATURE_NAMES, "data": data_digest()}
    if cache is not None and cache.exists() and not extra:
        with gzip.open(cache, "rt", encoding="utf-8") as fh:
            if json.loads(fh.readline()) == key:
                return [Run(**json.loads(line)) for line in fh]
    runs: list[Run] = []
    for spec, traces in _bundled() + [(s, load_dataset(s)) for s in extra or []]:
        runs.extend(runs_of(traces, spec))
    runs = relative(runs)
    if cache is not None and not extra:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(cache, "wt", encoding="utf-8") as fh:
            fh.write(json.dumps(key) + "\n")
            for run in runs:
                fh.write(json.dumps(run.__dict__) + "\n")
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", action="append", default=[], help="another dataset with outcomes (repeatable)")
    parser.add_argument("--out", default=str(DEFAULT_MODEL_PATH))
    args = parser.parse_args(argv)
    runs = load_runs(args.extra)
    payload = fit([r.row for r in runs], [r.failed for r in runs])
    path = save(payload, args.out)
    print(f"trained on {len(runs)} runs ({payload['n_failed']} failed) -> {path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
