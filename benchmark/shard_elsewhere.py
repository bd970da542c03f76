"""Build one environment's shard with another virtualenv's interpreter: the frameworks that cannot share this one's resolve.

CrewAI, Semantic Kernel and CAMEL (the `frameworks2` extra) pin pydantic and
OpenTelemetry versions the `frameworks` extra excludes, so they are installed
into a virtualenv of their own (`make test` makes `.venv-frameworks2`). When
an environment's framework cannot be imported here but that virtualenv exists,
`benchmark.shards.build_shards` hands the environment to its interpreter:

    PYTHON -m faultlens.benchmark.shard_elsewhere ENV --cache DIR --params JSON [--workers N] [--force]

The child builds (or finds cached) the shard in the same cache with the same
arguments, its digest made from its own installed versions, and prints its
progress as JSON lines; the parent reads the shard it wrote. The shard's lines
are written by the child and assembled as they are, so the bundled files do not
depend on which interpreter built what.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import click

from faultlens.middleware.errors import ConfigError, FaultlensError

from .shards import Progress, Shard, ShardParams, build_shards, read_shard, shard_paths


def interpreter(extra: str) -> Path | None:
    """The Python of the virtualenv that holds `extra`: $FAULTLENS_<EXTRA>_PYTHON, else `.venv-<extra>/bin/python`
    under the working folder (where `make test` puts it); None when neither exists."""
    named = os.environ.get(f"FAULTLENS_{extra.upper()}_PYTHON")
    path = Path(named) if named else Path(f".venv-{extra}") / "bin" / "python"
    return path.absolute() if path.is_file() else None  # not resolve(): a venv's python is a symlink out of it


def build_elsewhere(env: str, params: ShardParams, python: Path, cache: Path | None, *, workers: int = 2,
                    force: bool = False, progress: Progress | None = None) -> Shard:
    """`env`'s shard built (or found cached) by `python` in `cache` (a throwaway folder when None)."""
    if cache is None:
        with tempfile.TemporaryDirectory(prefix="faultlens-shard-") as folder:
            shard = build_elsewhere(env, params, python, Path(folder), workers=workers, force=force, progress=progress)
            return shard
    command = [str(python), "-m", "faultlens.benchmark.shard_elsewhere", env, "--cache", str(cache),
               "--params", json.dumps(asdict(params), sort_keys=True), "--workers", str(workers)] + (["--force"] if force else [])
    cached = False
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None and child.stderr is not None
        for line in child.stdout:
            try:
                event = json.loads(line)
            except ValueError:  # a framework printing to stdout: not ours
                continue
            if not isinstance(event, dict) or not {"env", "stage", "done", "total"} <= set(event):
                continue
            cached = cached or event["stage"] == "cached"
            if progress:
                progress(event["env"], event["stage"], event["done"], event["total"])
        errors = child.stderr.read()
    if child.returncode:
        last = errors.strip().splitlines()[-1] if errors.strip() else f"exit status {child.returncode}"
        raise ConfigError(f"{env}: its shard is built by {python} (its framework's virtualenv), which failed: {last}")
    meta = json.loads(shard_paths(cache, params, env)[1].read_text())
    made = read_shard(cache, params, env, meta["digest"])
    if made is None:
        raise ConfigError(f"{env}: {python} reported its shard built, but {shard_paths(cache, params, env)[0]} does not read")
    made.cached = cached
    return made


@click.command()
@click.argument("env")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--params", "params_json", required=True, help="ShardParams as JSON.")
@click.option("--workers", type=int, default=2)
@click.option("--force", is_flag=True)
def main(env: str, cache: Path, params_json: str, workers: int, force: bool) -> None:
    """The child's side: build ENV's shard into CACHE, progress as JSON lines on stdout."""
    def emit(name: str, stage: str, done: int, total: int) -> None:
        print(json.dumps({"env": name, "stage": stage, "done": done, "total": total}), flush=True)

    try:
        build_shards([env], ShardParams(**json.loads(params_json)), cache, workers=workers, force=force, progress=emit)
    except FaultlensError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
