"""`faultlens bench build`: the bundled benchmark is reproducible byte for byte, split by task, and loadable."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.benchmark.build import build_bundled, split_of  # noqa: E402
from faultlens.benchmark.datasets import available_environments, load_bundled_spec  # noqa: E402
from faultlens.middleware.jsonl import read_jsonl  # noqa: E402

ENVS = ["chart_qa", "video_qa"]
ARGS = ["--env", "chart_qa", "--env", "video_qa", "--seeds", "2", "--per-seed", "3", "--seed", "5", "--min-per-mode", "2",
        "--topup-rounds", "1", "--workers", "1"]
FILES = ["dev.jsonl.gz", "test.jsonl.gz", "yield.json", "README.md"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundled") / "data"
    result = build_bundled(out, seed=5, seeds=2, per_seed=3, envs=ENVS, min_per_mode=2, topup_rounds=1, workers=1)
    return out, result


@pytest.mark.slow
def test_the_cli_rebuilds_the_same_bytes(built, tmp_path):
    from click.testing import CliRunner

    from faultlens.benchmark.cli import bench

    out, _ = built
    again = tmp_path / "again"
    result = CliRunner().invoke(bench, ["build", "--out", str(again), "--shards", str(tmp_path / "shards"), *ARGS],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for name in FILES:
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_files_are_where_the_loader_expects_them(built):
    out, result = built
    assert result.total > 0
    dev = list(load_bundled_spec("dev", data_dir=out))
    test = list(load_bundled_spec("test", data_dir=out))
    assert len(dev) + len(test) == result.total
    assert set(available_environments("test", data_dir=out)) | set(available_environments("dev", data_dir=out)) == set(ENVS)
    chart = list(load_bundled_spec("test:chart_qa", data_dir=out))
    assert chart and all(t.source.benchmark == "chart_qa" for t in chart)
    # gzip header without a time stamp: rebuilding never changes the bytes by itself
    assert (out / "dev.jsonl.gz").read_bytes()[4:8] == b"\x00\x00\x00\x00"


def test_every_trace_is_a_labelled_failure_with_its_media(built):
    out, _ = built
    for split in ("dev", "test"):
        for trace in read_jsonl(out / f"{split}.jsonl.gz"):
            assert trace.gold is not None and not trace.outcome.success
            assert trace.steps[trace.gold.step].agent == trace.gold.agent
            assert trace.source.modality in ("image", "video")
            assert any(s.media for s in trace.steps)
            assert trace.metadata["injection"]["seed_replayed_without_drift"] is True


def test_splits_are_by_task_never_by_trace(built):
    out, _ = built
    dev = {t.task.id for t in read_jsonl(out / "dev.jsonl.gz")}
    test = {t.task.id for t in read_jsonl(out / "test.jsonl.gz")}
    assert dev and test and not dev & test
    for trace in read_jsonl(out / "test.jsonl.gz"):
        assert split_of(5, trace) == "test"


def test_top_up_passes_add_traces_of_short_modes_only(built):
    out, result = built
    rows = json.loads((out / "yield.json").read_text())["yield"]
    assert {r["env"] for r in rows} == set(ENVS)
    ids = [t.id for split in result.traces.values() for t in split]
    assert len(ids) == len(set(ids))
    every = [t for split in result.traces.values() for t in split]
    topped = [t for t in every if "-1005-" in t.task.id]
    first = Counter((t.source.benchmark, t.gold.mode) for t in every if t not in topped)
    later = Counter((t.source.benchmark, t.gold.mode) for t in topped)
    assert topped
    for key, n in later.items():
        # only modes short after the first pass are topped up, and only up to the target (min_per_mode=2)
        assert first[key] < 2 and first[key] + n <= 2, (key, first[key], n)
    # the top-up run spends its injections on the short modes only
    attempted = {(a["env"], a["mode"]) for a in rows if a["attempted"]}
    assert set(later) <= attempted


def test_the_datasheet_has_counts_the_rebuild_command_and_calibration(built):
    out, result = built
    sheet = (out / "README.md").read_text()
    assert ("faultlens bench build --out benchmark/data --seed 5 --seeds 2 --per-seed 3 --min-per-mode 2 "
            "--topup-rounds 1 --env chart_qa --env video_qa") in sheet
    for heading in ("## Environments", "## Modality", "## Topology", "## Trace length", "## Failure modes per environment",
                    "## Calibration (test split)"):
        assert heading in sheet
    assert "| environment | traces | heuristic |" in sheet
    assert "| `chart_qa` | chart QA (ChartQA) | image |" in sheet  # the family each environment stands in for
    assert "baseline:first-step" in sheet and "baseline:majority-agent" in sheet
    assert f"{result.total} failure traces" in sheet
    assert set(result.calibration) >= {"heuristic", "baseline:first-step", "baseline:random-step"}
    for method, per_env in result.calibration.items():
        assert set(per_env) >= {"all"}
        assert 0.0 <= per_env["all"]["step"] <= 1.0


def test_unknown_environment_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown environment"):
        build_bundled(tmp_path, envs=["no_such_env"])
    assert not any(tmp_path.iterdir())


def test_a_framework_environment_without_its_extra_is_a_clear_error(tmp_path, monkeypatch):
    from faultlens.injectors import envs as registry
    from faultlens.middleware.errors import ConfigError

    framework_envs = [n for n in registry.names(include_frameworks=True) if n not in registry.names()]
    assert framework_envs, "the framework environments are built by default"
    env = registry.get(framework_envs[0])
    monkeypatch.setattr(type(env), "requires", ("faultlens_no_such_framework",))
    with pytest.raises(ConfigError, match=rf"{framework_envs[0]} needs faultlens_no_such_framework.*faultlens\[frameworks\]"):
        build_bundled(tmp_path)
    assert not any(tmp_path.iterdir())


def test_gzip_members_hold_one_trace_per_line(built):
    out, _ = built
    with gzip.open(out / "test.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = [l for l in fh if l.strip()]
    assert all(json.loads(l)["gold"] for l in lines)


@pytest.mark.parametrize("env_name", ["chart_qa", "video_qa"])
def test_the_shipped_data_matches_the_code(env_name):
    """The first task of an environment, injected again with the shipped build's settings, gives the shipped lines."""
    from faultlens.benchmark.build import DEFAULT_PER_SEED, trace_line
    from faultlens.benchmark.datasets import DATA_DIR
    from faultlens.injectors import envs
    from faultlens.injectors.pipeline import InjectConfig, run_seed

    if not (DATA_DIR / "test.jsonl.gz").exists():
        pytest.skip("the bundled data is not built")
    shipped = {}
    for split in ("dev", "test"):
        with gzip.open(DATA_DIR / f"{split}.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                if f'"id":"{env_name}-0-0-t' in line:
                    shipped[json.loads(line)["id"]] = line.rstrip("\n")
    assert shipped, f"no shipped traces of {env_name}-0-0"
    task = envs.get(env_name).tasks(0, 1)[0]
    config = InjectConfig(envs=[env_name], seeds=1, per_seed=DEFAULT_PER_SEED, seed=0, workers=1)
    result = run_seed(env_name, 0, task, config)
    again = {a.trace.id: trace_line(a.trace) for a in result.attempts if a.status == "kept"}
    assert set(shipped) <= set(again)
    for trace_id, line in shipped.items():
        assert again[trace_id] == line, trace_id
