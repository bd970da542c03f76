"""Shards of the bundled benchmark: built one environment at a time, cached by digest, assembled to the same bytes."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.benchmark import shards as shards_module  # noqa: E402
from faultlens.benchmark.build import build_bundled  # noqa: E402
from faultlens.benchmark.shards import ShardParams, build_shards, digest_parts, read_shard, shard_paths  # noqa: E402

ENVS = ["chart_qa", "video_qa"]
KW = {"seed": 5, "seeds": 2, "per_seed": 3, "min_per_mode": 2, "topup_rounds": 1}
PARAMS = ShardParams(**KW)
FILES = ["dev.jsonl.gz", "test.jsonl.gz", "yield.json", "README.md"]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """One build of both environments in one call (no cache), and the same made shard by shard into a cache."""
    root = tmp_path_factory.mktemp("shards")
    whole = build_bundled(root / "whole", envs=ENVS, workers=1, **KW)
    cache = root / "cache"
    for env in ENVS:  # each environment on its own, as `faultlens bench build --env NAME` does
        build_shards([env], PARAMS, cache, workers=1)
    return root, whole, cache


def _no_build(*args, **kwargs):
    raise AssertionError("a shard was built although the cache had it")


def test_shard_by_shard_assembles_the_bytes_of_one_build(builds, monkeypatch):
    root, whole, cache = builds
    monkeypatch.setattr(shards_module, "build_shard", _no_build)  # every shard comes from the cache
    assembled = build_bundled(root / "assembled", envs=ENVS, workers=1, shards=cache, **KW)
    assert all(s.cached for s in assembled.shards.values())
    for name in FILES:
        assert (root / "assembled" / name).read_bytes() == (root / "whole" / name).read_bytes(), name
    # both environments were topped up: the order of the lines interleaves their phases, not just their shards
    assert all(len(s.phases) > 1 and s.phases[1] for s in assembled.shards.values())
    assert [s.lines for s in assembled.shards.values()] == [s.lines for s in whole.shards.values()]


def test_rebuilding_one_shard_leaves_the_others_untouched(builds):
    _, _, cache = builds
    other = [(p, p.stat().st_mtime_ns, p.read_bytes()) for p in shard_paths(cache, PARAMS, "video_qa")]
    mine = [p.stat().st_mtime_ns for p in shard_paths(cache, PARAMS, "chart_qa")]
    before = read_shard(cache, PARAMS, "chart_qa", shards_module.shard_digest("chart_qa", PARAMS))
    again = build_shards(["chart_qa"], PARAMS, cache, workers=1, force=True)["chart_qa"]
    assert not again.cached and before is not None and again.lines == before.lines
    assert [p.stat().st_mtime_ns for p in shard_paths(cache, PARAMS, "chart_qa")] != mine
    for path, mtime, data in other:
        assert path.stat().st_mtime_ns == mtime and path.read_bytes() == data


def test_a_changed_digest_rebuilds_only_that_environment(builds, monkeypatch, tmp_path):
    import shutil

    cache = tmp_path / "cache"  # a copy: the fake shard written here must not reach the other tests
    shutil.copytree(builds[2], cache)
    real = shards_module.digest_parts

    def edited(env, params):  # as if a module chart_qa imports had been edited
        parts = real(env, params)
        if env == "chart_qa":
            parts["code"]["faultlens.injectors.pipeline"] = "0" * 64
        return parts

    built: list[str] = []
    events: list[tuple[str, str]] = []

    def fake_build(env, params, **kwargs):
        built.append(env)
        return shards_module.Shard(env, kwargs["digest"], [], [0], [], [])

    monkeypatch.setattr(shards_module, "digest_parts", edited)
    monkeypatch.setattr(shards_module, "build_shard", fake_build)
    out = build_shards(ENVS, PARAMS, cache, workers=1, progress=lambda env, stage, done, total: events.append((env, stage)))
    assert built == ["chart_qa"] and out["video_qa"].cached
    assert ("chart_qa", "stale: code faultlens.injectors.pipeline changed") in events
    assert ("video_qa", "cached") in events


def test_other_arguments_are_another_cache_entry(builds):
    _, _, cache = builds
    other = ShardParams(**{**KW, "seed": 6})
    assert other.key() != PARAMS.key()
    assert read_shard(cache, other, "chart_qa", shards_module.shard_digest("chart_qa", other)) is None


def test_the_digest_covers_the_package_the_shared_code_and_the_pins():
    parts = digest_parts("chart_qa", PARAMS)
    assert "faultlens.injectors.envs.chart_qa/env.py" in parts["package"]
    for module in ("faultlens.injectors.pipeline", "faultlens.injectors.envs.base", "faultlens.middleware.model.trace",
                   "faultlens.benchmark.shards"):
        assert module in parts["code"], module
    assert "faultlens.benchmark.runner" not in parts["code"]  # calibration runs at assembly, not in a shard
    assert {"pydantic", "pillow"} <= set(parts["dists"])
    assert parts["params"]["seed"] == 5
    assert digest_parts("chart_qa", PARAMS) == parts  # a function of the tree: the same twice


def test_a_framework_environment_digest_holds_its_framework_version():
    from importlib import metadata

    from faultlens.injectors import envs as registry

    framework_envs = [n for n in registry.names(include_frameworks=True) if n not in registry.names()]
    env = next((n for n in framework_envs if not registry.get(n).missing()), None)
    if env is None:
        pytest.skip("no framework extra installed")
    dists = digest_parts(env, PARAMS)["dists"]
    top = registry.get(env).requires[0].partition(".")[0]
    provider = metadata.packages_distributions()[top][0]
    assert dists[provider.lower().replace("_", "-")] == metadata.version(provider)


def test_a_damaged_shard_is_built_again(builds, tmp_path):
    _, _, cache = builds
    digest = shards_module.shard_digest("video_qa", PARAMS)
    data, meta = shard_paths(cache, PARAMS, "video_qa")
    copy = tmp_path / "cache"
    copy_data, copy_meta = shard_paths(copy, PARAMS, "video_qa")
    copy_data.parent.mkdir(parents=True)
    copy_meta.write_bytes(meta.read_bytes())
    copy_data.write_bytes(data.read_bytes()[:40])  # truncated
    assert read_shard(copy, PARAMS, "video_qa", digest) is None
    assert read_shard(cache, PARAMS, "video_qa", digest) is not None


def test_the_cli_builds_one_shard_and_writes_no_dataset(builds, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from faultlens.benchmark.cli import bench

    _, _, cache = builds
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shards_module, "build_shard", _no_build)
    args = ["build", "--env", "video_qa", "--shards", str(cache), "--seed", "5", "--seeds", "2", "--per-seed", "3",
            "--min-per-mode", "2", "--topup-rounds", "1", "--workers", "1"]
    result = CliRunner().invoke(bench, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "video_qa: from the cache" in result.output and "0 built" in result.output
    assert not (tmp_path / "benchmark").exists()


def test_a_namespace_package_counts_only_the_distribution_that_holds_the_module():
    from importlib import metadata

    providers = metadata.packages_distributions().get("openinference", [])
    if len(set(providers)) < 2:
        pytest.skip("fewer than two openinference distributions installed")
    owners = shards_module._dists_of("openinference.instrumentation.openai")
    assert len(owners) == 1 and owners[0].lower() in ("openinference-instrumentation-openai", "openinference_instrumentation_openai")
