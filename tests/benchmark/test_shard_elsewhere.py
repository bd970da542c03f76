"""A shard built by another virtualenv's interpreter (the frameworks2 extra's): same bytes, progress relayed, errors named.

The "other" interpreter here is this one (its child process imports the
environment afresh, with its framework installed), standing in for
.venv-frameworks2; the parent is made to see the framework as missing.
"""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.benchmark import shards as shards_module  # noqa: E402
from faultlens.benchmark.shards import ShardParams, build_shard, build_shards, check_envs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.base import extra_python  # noqa: E402
from faultlens.middleware.errors import ConfigError  # noqa: E402

ENV = "chart_qa"
PARAMS = ShardParams(seed=5, seeds=2, per_seed=3, min_per_mode=2, topup_rounds=1)


@pytest.fixture
def framework_elsewhere(monkeypatch):
    """`ENV` as if its framework were missing here and its extra's virtualenv were this interpreter."""
    env = envs.get(ENV)
    monkeypatch.setattr(type(env), "missing", lambda self: ["a_framework"])
    monkeypatch.setattr(type(env), "extra", "frameworks9")
    monkeypatch.setenv("FAULTLENS_FRAMEWORKS9_PYTHON", sys.executable)
    return env


def test_the_interpreter_of_an_extra_is_found_only_where_it_exists(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FAULTLENS_FRAMEWORKS2_PYTHON", raising=False)
    assert extra_python("frameworks2") is None
    (tmp_path / ".venv-frameworks2" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-frameworks2" / "bin" / "python").write_text("")
    assert extra_python("frameworks2") == tmp_path / ".venv-frameworks2" / "bin" / "python"
    monkeypatch.setenv("FAULTLENS_FRAMEWORKS2_PYTHON", str(tmp_path / "nowhere"))
    assert extra_python("frameworks2") is None


def test_a_missing_framework_without_its_virtualenv_names_the_extra(monkeypatch):
    env = envs.get(ENV)
    monkeypatch.setattr(type(env), "missing", lambda self: ["a_framework"])
    monkeypatch.setattr(type(env), "extra", "frameworks9")
    monkeypatch.delenv("FAULTLENS_FRAMEWORKS9_PYTHON", raising=False)
    with pytest.raises(ConfigError, match=r"chart_qa needs a_framework: pip install 'faultlens\[frameworks9\]'"):
        check_envs([ENV])


def test_the_other_interpreter_builds_the_same_shard_and_the_cache_serves_it_again(framework_elsewhere, tmp_path):
    assert check_envs([ENV]) == [ENV]  # buildable: its extra's interpreter exists
    events: list[tuple[str, str]] = []
    shard = build_shards([ENV], PARAMS, tmp_path, workers=1, progress=lambda e, stage, d, t: events.append((e, stage)))[ENV]
    here = build_shard(ENV, PARAMS, workers=1)
    assert shard.lines == here.lines and shard.phases == here.phases and shard.yield_rows == here.yield_rows
    assert not shard.cached and (ENV, "pass 1") in events  # the child's progress reached the parent
    again = build_shards([ENV], PARAMS, tmp_path, workers=1)[ENV]
    assert again.cached and again.lines == shard.lines


def test_a_failing_child_is_one_error_naming_the_environment_and_the_interpreter(framework_elsewhere, monkeypatch, tmp_path):
    fake = tmp_path / "python"
    # 200 KB of logging first: more than a pipe holds, so a parent that left stderr unread would wait for ever.
    fake.write_text("#!/bin/sh\nhead -c 200000 /dev/zero | tr '\\0' 'x' >&2\necho >&2\n"
                    "echo 'Traceback (most recent call last):' >&2\necho 'ModuleNotFoundError: No module named crewai' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("FAULTLENS_FRAMEWORKS9_PYTHON", str(fake))
    with pytest.raises(ConfigError, match=r"chart_qa: its shard is built by .*python .*failed: ModuleNotFoundError: No module named crewai"):
        build_shards([ENV], PARAMS, tmp_path / "cache", workers=1)
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing half-made is left to read as a shard


def test_without_a_cache_the_child_builds_into_a_throwaway_folder(framework_elsewhere):
    shard = build_shards([ENV], ShardParams(seed=5, seeds=2, per_seed=3, topup_rounds=0), None, workers=1)[ENV]
    assert shard.lines and len(shard.traces) == len(shard.lines)


def test_the_digest_never_reads_a_framework_it_cannot_import(framework_elsewhere, monkeypatch, tmp_path):
    monkeypatch.setattr(shards_module, "digest_parts", lambda *a, **k: pytest.fail("digest computed in the parent"))
    build_shards([ENV], ShardParams(seed=5, seeds=1, per_seed=2, topup_rounds=0), tmp_path, workers=1)
