"""Where traces come from: a spec string names a source and its argument.

    jsonl:runs.jsonl        our native JSONL (also: a bare path ending in .jsonl or .jsonl.gz)
    otlp:spans.json         OTLP JSON as an OpenTelemetry Collector file exporter writes it
    store:PATH_OR_URL       the traces in a faultlens store (a SQLite file or a postgresql:// URL)
    whowhen:DIR, bundled... contributed by other packages through the
                            `faultlens.sources` entry-point group

A source is a callable taking the text after the colon and returning an
iterable of `Trace`s. Third-party packages add their own with an entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path

from .errors import InputError, extra_needed
from .model.trace import Trace
from .store.sqlite import open_store

SourceLoader = Callable[[str], Iterable[Trace]]

_registry: dict[str, SourceLoader] = {}


def register_source(name: str, loader: SourceLoader) -> None:
    _registry[name] = loader


def available_sources() -> dict[str, SourceLoader]:
    found = dict(_registry)
    for ep in entry_points(group="faultlens.sources"):
        if ep.name not in found:
            found[ep.name] = _lazy(ep)
    return found


def _lazy(ep) -> SourceLoader:
    def load(arg: str) -> Iterable[Trace]:
        with extra_needed(f"the {ep.name}: source"):
            return ep.load()(arg)

    return load


def _guess(spec: str) -> tuple[str, str]:
    path = Path(spec)
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        return "jsonl", spec
    if name.endswith(".json"):
        return "otlp", spec
    raise InputError(spec, None, None, "cannot tell the format; write it as FORMAT:PATH, e.g. jsonl:runs.jsonl or otlp:spans.json")


def split_spec(spec: str) -> tuple[str, str]:
    name, sep, arg = spec.partition(":")
    if sep and name in available_sources() | {"jsonl": None, "otlp": None, "store": None}:
        return name, arg
    return _guess(spec)


def load_traces(spec: str) -> Iterable[Trace]:
    """Traces from a spec string (see the module docstring)."""
    name, arg = split_spec(spec)
    sources = available_sources()
    sources.setdefault("jsonl", load_jsonl_spec)
    sources.setdefault("otlp", load_otlp_spec)
    sources.setdefault("store", load_store_spec)
    if name not in sources:
        raise InputError(spec, None, None, f"unknown source {name!r}; known: {', '.join(sorted(sources))}")
    return sources[name](arg)


def _existing(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise InputError(path, None, None, "no such file")
    if not p.is_file():
        raise InputError(path, None, None, "is a directory, not a file; give one file (FORMAT:FILE)")
    return p


def load_jsonl_spec(arg: str) -> Iterable[Trace]:
    from .jsonl import read_jsonl

    return read_jsonl(_existing(arg), unique_ids=True)


def load_otlp_spec(arg: str) -> Iterable[Trace]:
    from .otlp.convert import read_otlp_file

    return read_otlp_file(_existing(arg))


def load_store_spec(arg: str) -> Iterable[Trace]:
    """Every trace in the store at `arg` (a SQLite file or a postgresql:// URL), newest first."""
    if not arg:
        raise InputError("store:", None, None, "name the store: store:PATH or store:postgresql://USER@HOST/DB")
    return open_store(arg).iter_traces()
