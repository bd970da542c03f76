"""scripts/detect_train.py: the features cache is reused only for the same feature names and the same bundled files."""

from __future__ import annotations

from types import ModuleType

import pytest

from faultlens.injectors import envs
from tests.scripts import load_script

@pytest.fixture()
def detect_train(tmp_path, monkeypatch) -> ModuleType:
    module = load_script("detect_train")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("dev.jsonl.gz", "test.jsonl.gz", "succeeded.jsonl.gz"):
        (data / name).write_bytes(b"v1")
    monkeypatch.setattr(module, "DATA_DIR", data)
    monkeypatch.setattr(module, "SUCCEEDED", data / "succeeded.jsonl.gz")
    return module


def test_a_rebuilt_benchmark_is_read_again_not_taken_from_the_cache(detect_train, tmp_path, monkeypatch):
    env = envs.get("math_react")
    runs = [env.run(task, sim={"seed": 1, "noise": 0.0}).trace for task in env.tasks(0, 3)]
    served = {"traces": runs[:2]}
    monkeypatch.setattr(detect_train, "_bundled", lambda: [("bundled", served["traces"])])
    cache = tmp_path / "cache.jsonl.gz"

    assert [r.trace_id for r in detect_train.load_runs(cache=cache)] == [t.id for t in runs[:2]]
    served["traces"] = runs  # what the files would now give; unchanged files: the cache answers
    assert len(detect_train.load_runs(cache=cache)) == 2
    (detect_train.DATA_DIR / "dev.jsonl.gz").write_bytes(b"v2")  # the benchmark was rebuilt
    assert [r.trace_id for r in detect_train.load_runs(cache=cache)] == [t.id for t in runs]
