"""Issue #20 item 7: `--resume` after a predictions.jsonl lost its final newline, or was cut inside a multi-byte character."""

from __future__ import annotations

import json

import pytest

from faultlens.benchmark.runner import read_predictions, run_benchmark
from faultlens.middleware.errors import InputError

from .conftest import CountingTestDouble

LIMIT = 5


def _run(spec, out, double, **kw):
    return run_benchmark(spec, "test-double:counting", out=out, attributor=double, progress=False, baselines={}, limit=LIMIT, **kw)


def test_a_last_line_without_its_newline_is_kept_and_resume_finishes_every_trace(synthetic_jsonl, tmp_path):
    spec, out = f"jsonl:{synthetic_jsonl}", tmp_path / "run"
    _run(spec, out, CountingTestDouble())
    path = out / "predictions.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]) + lines[3].rstrip(b"\n"))  # line 4 whole, no newline; line 5 never written
    assert len(read_predictions(path)) == 4
    double = CountingTestDouble()
    summary = _run(spec, out, double, resume=True)
    assert len(double.calls) == 1  # only the fifth trace
    assert summary.done == LIMIT
    records = read_predictions(path)
    assert len(records) == LIMIT and len({r["trace_id"] for r in records}) == LIMIT
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == LIMIT
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_a_last_line_cut_inside_a_multibyte_character_is_redone(synthetic_jsonl, tmp_path):
    spec, out = f"jsonl:{synthetic_jsonl}", tmp_path / "run"
    _run(spec, out, CountingTestDouble())
    path = out / "predictions.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[4])
    record["predicted"]["reason"] = "dépassé — 失敗"
    encoded = json.dumps(record, ensure_ascii=False).encode("utf-8")
    cut = encoded.index("失".encode()) + 1  # inside the three bytes of 失
    path.write_bytes(b"".join(lines[:4]) + encoded[:cut])
    assert len(read_predictions(path)) == 4  # no UnicodeDecodeError
    double = CountingTestDouble()
    summary = _run(spec, out, double, resume=True)
    assert len(double.calls) == 1 and summary.done == LIMIT
    assert len(read_predictions(path)) == LIMIT


def test_a_bad_line_that_is_not_the_last_is_an_error_naming_it(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(b'{"trace_id": "a", "predicted": {}, "gold": {}, "status": "ok"}\n\xff\xfe\n{"trace_id": "b", "predicted": {}, "gold": {}, "status": "ok"}\n')
    with pytest.raises(InputError, match="line 2"):
        read_predictions(path)
