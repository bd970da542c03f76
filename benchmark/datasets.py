"""Benchmark datasets: a spec string in, `Trace`s with gold labels out.

    bundled                 the bundled benchmark, every split (benchmark/data/*.jsonl.gz)
    bundled:dev             one split
    bundled:test:ENV        one environment (``source.benchmark``) of one split; ENV,ENV,... several
    jsonl:PATH              our native JSONL (optionally gzipped)
    whowhen:DIR             Who&When (ICML 2025): a folder of JSON files
    whowhenpro:DIR          Who&When Pro (2026): one JSON file per trace (docs/datasets.md)
    trail:DIR[:SPLIT]       TRAIL (2025): smolagents span trees with error annotations
    taubench:DIR[:SPLIT]    tau-bench retail runs with AgentRx labels
    taubench:FILE.json      tau-bench's published runs, every run with its outcome (no gold label)
                            (SPLIT: train or holdout, a fixed half of the runs)

Any other spec goes to `middleware.sources.load_traces`, so third-party sources
registered under the `faultlens.sources` entry-point group work here too.

A `Dataset` is lazy: iterating it reads the files again, and nothing is read
until then. Importers never write anything and never modify their input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from faultlens.middleware.errors import InputError
from faultlens.middleware.jsonl import read_jsonl
from faultlens.middleware.model.trace import Trace

DATA_DIR = Path(__file__).parent / "data"
SPLITS = ("dev", "test")
BUILD_HINT = "build it with `faultlens bench build`"


@dataclass
class Dataset:
    """A named, re-iterable collection of benchmark traces."""

    spec: str
    loader: Callable[[], Iterable[Trace]]

    def __iter__(self) -> Iterator[Trace]:
        yield from self.loader()

    def traces(self, limit: int | None = None) -> list[Trace]:
        """Read the traces into a list (the first `limit` of them)."""
        out: list[Trace] = []
        for trace in self:
            if limit is not None and len(out) >= limit:
                break
            out.append(trace)
        return out


def load_dataset(spec: str, media_root: str | Path | None = None) -> Dataset:
    """The dataset a spec string names (see the module docstring).

    `media_root`: a folder relative media paths are also looked up in (after the
    trace's own folders); only Who&When Pro specs have media paths to resolve."""
    name, sep, arg = spec.partition(":")
    if media_root is not None:
        if not (sep and name == "whowhenpro"):
            raise InputError(spec, None, "media_root", "only whowhenpro: datasets have media paths to resolve")
        if not Path(media_root).is_dir():
            raise InputError(str(media_root), None, "media_root", "no such directory")
        return Dataset(spec, lambda: load_whowhenpro_spec(arg, media_root))
    if name == "bundled":
        return Dataset(spec, lambda: load_bundled_spec(arg))
    if sep and name == "whowhen":
        return Dataset(spec, lambda: load_whowhen_spec(arg))
    if sep and name == "whowhenpro":
        return Dataset(spec, lambda: load_whowhenpro_spec(arg))
    if sep and name == "trail":
        return Dataset(spec, lambda: load_trail_spec(arg))
    if sep and name == "taubench":
        return Dataset(spec, lambda: load_taubench_spec(arg))

    def other() -> Iterable[Trace]:
        from faultlens.middleware.sources import load_traces

        return load_traces(spec)

    return Dataset(spec, other)


# -- bundled -----------------------------------------------------------------


def bundled_path(split: str, data_dir: Path | None = None) -> Path:
    return (data_dir or DATA_DIR) / f"{split}.jsonl.gz"


def load_bundled_spec(arg: str, data_dir: Path | None = None) -> Iterator[Trace]:
    """Traces of the bundled benchmark. `arg` is "", "SPLIT" or "SPLIT:ENV[,ENV...]"."""
    split, _, env = arg.partition(":")
    spec = "bundled" + (f":{arg}" if arg else "")
    if split and split not in SPLITS:
        raise InputError(spec, None, None, f"unknown split {split!r}; the bundled benchmark has {', '.join(SPLITS)}")
    splits = [split] if split else list(SPLITS)
    paths = [bundled_path(s, data_dir) for s in splits]
    missing = [p for p in paths if not p.exists()]
    if missing:
        names = ", ".join(str(p) for p in missing)
        raise InputError(spec, None, None, f"the bundled benchmark data is not built ({names} missing); {BUILD_HINT}")
    return _bundled(spec, paths, env)


def _bundled(spec: str, paths: list[Path], env: str) -> Iterator[Trace]:
    wanted = {e for e in env.split(",") if e}
    seen: set[str] = set()
    found: set[str] = set()
    for path in paths:
        for trace in read_jsonl(path):
            if trace.source.benchmark:
                seen.add(trace.source.benchmark)
            if wanted and trace.source.benchmark not in wanted:
                continue
            found.add(trace.source.benchmark or "")
            yield trace
    if wanted - found:
        absent = ", ".join(sorted(wanted - found))
        raise InputError(spec, None, None, f"no traces of environment {absent}; environments present: {', '.join(sorted(seen)) or 'none'}")


def available_environments(split: str = "test", data_dir: Path | None = None) -> list[str]:
    """Environment names present in one bundled split (empty if not built)."""
    path = bundled_path(split, data_dir)
    if not path.exists():
        return []
    return sorted({t.source.benchmark for t in read_jsonl(path) if t.source.benchmark})


# -- entry points for `faultlens.sources` -------------------------------------


def load_whowhen_spec(arg: str) -> Iterator[Trace]:
    from .whowhen import read_whowhen

    return read_whowhen(arg)


def load_whowhenpro_spec(arg: str, media_root: str | Path | None = None) -> Iterator[Trace]:
    from .whowhenpro import read_whowhenpro

    return read_whowhenpro(arg, media_root=media_root)


def load_trail_spec(arg: str) -> Iterator[Trace]:
    from .trail import load_trail_spec as load

    return load(arg)


def load_taubench_spec(arg: str) -> Iterator[Trace]:
    from .taubench import load_taubench_spec as load

    return load(arg)
