"""The child's side of a shard built by another virtualenv's interpreter: the frameworks that cannot share this one's resolve.

CrewAI, Semantic Kernel and CAMEL (the `frameworks2` extra) pin pydantic and
OpenTelemetry versions the `frameworks` extra excludes, so they are installed
into a virtualenv of their own (`make test` makes `.venv-frameworks2`). When
an environment's framework cannot be imported here but that virtualenv exists
(`Environment.elsewhere`),
`benchmark.shards.build_shards` hands the environment to its interpreter
(`shards.build_elsewhere`), which runs this module:

    PYTHON -m faultlens.benchmark.shard_elsewhere ENV --cache DIR --params JSON [--workers N] [--force]

The child builds (or finds cached) the shard in the same cache with the same
arguments, its digest made from its own installed versions, and prints its
progress as JSON lines; the parent reads the shard it wrote. The shard's lines
are written by the child and assembled as they are, so the bundled files do not
depend on which interpreter built what.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from faultlens.middleware.errors import FaultlensError

from .shards import ShardParams, build_shards


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
