"""One environment's shard of the bundled benchmark: built on its own, cached under a digest of what made it.

A shard is what the injection pipeline keeps for one environment: its first
pass over `seeds` tasks, then its top-up rounds for the modes still short (see
`benchmark.build`). Nothing in it depends on another environment (task,
simulated-agent and injection seeds are all derived from the build seed and the
environment's name), so `benchmark.build.assemble` can put the bundled splits
together from shards built at different times and get the bytes of one
monolithic build.

A shard is cached as two files in `CACHE/<params>/`, `<params>` a short hash of
the build arguments:

    ENV.jsonl.gz   its kept traces, one `trace_line` each, in the order they were made
    ENV.json       the digest, the traces per phase (first pass, top-up round 1, ...), its yield and seed rows

The digest covers the build arguments, the source of the environment's package
and of every faultlens module it or the shard builder imports (transitively,
function-level imports included), the installed versions of the third-party
distributions those modules import (with what they require) and the Python
version: an environment whose digest is unchanged is not built again.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import importlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from faultlens.middleware.errors import ConfigError, UnknownName
from faultlens.middleware.model.trace import Trace

DEFAULT_SEEDS = 64
DEFAULT_PER_SEED = 8
MIN_PER_MODE = 30
TOPUP_ROUNDS = 6
# Injections per fresh task in a top-up run (all of one mode, at different steps).
TOPUP_ATTEMPTS = 3
TOPUP_MAX_TASKS = 96
# A small deficit at a high yield asks for few tasks, and a few tasks may offer no step the mode fits.
TOPUP_MIN_TASKS = 16
# A mode whose kept/attempted ratio in an environment is under this is not topped up (its errors are almost always
# caught or harmless there); the datasheet lists it.
MIN_YIELD = 0.04
# ... once it has had this many attempts (a first pass's few attempts of a mode say little about its yield).
MIN_YIELD_EVIDENCE = 100
# Task seeds of top-up round r are `seed + TOPUP_STRIDE * r`, far from the first pass's seed.
TOPUP_STRIDE = 1000
# Bump when the shard files' layout changes: every cached shard is then stale.
SHARD_FORMAT = 1
# The cache the CLI uses: a build cache, not shipped data (benchmark/data/** is package data), hence not under it.
DEFAULT_CACHE = Path(".faultlens/bench/shards")

# (environment, stage, done, total); stage "cached" (0, 0): the shard was found in the cache; "stale: ..." (0, 0):
# the cached one was made by other code, pins or arguments (what changed follows), and it is built again.
Progress = Callable[[str, str, int, int], None]


@dataclass(frozen=True)
class ShardParams:
    """The build arguments a shard's content depends on (the worker count is not one of them)."""

    seed: int = 0
    agent_model: str | None = None
    generator: str = "template"
    seeds: int = DEFAULT_SEEDS
    per_seed: int = DEFAULT_PER_SEED
    min_per_mode: int = MIN_PER_MODE
    topup_rounds: int = TOPUP_ROUNDS
    noise: float = 0.2

    def key(self) -> str:
        """A short name for the cache folder of shards built with these arguments."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class Shard:
    env: str
    digest: str
    lines: list[str]  # `trace_line` of each kept trace, in the order the build made them
    phases: list[int]  # kept traces per phase: first pass, then each top-up round that ran
    yield_rows: list[dict[str, Any]]
    seed_rows: list[dict[str, Any]]
    cached: bool = False
    seconds: float = 0.0
    _traces: list[Trace] | None = field(default=None, repr=False)

    @property
    def traces(self) -> list[Trace]:
        if self._traces is None:
            self._traces = [Trace.model_validate_json(line) for line in self.lines]
        return self._traces

    def phase(self, index: int) -> list[tuple[str, Trace]]:
        """(line, trace) of the traces made in phase `index` (0: the first pass)."""
        start = sum(self.phases[:index])
        end = start + (self.phases[index] if index < len(self.phases) else 0)
        return list(zip(self.lines[start:end], self.traces[start:end]))


# ---------------------------------------------------------------- which environments

def check_envs(envs: Iterable[str] | None) -> list[str]:
    """The environments to build (all registered when None), after checking each is known and can run here."""
    from faultlens.injectors import envs as registry
    from faultlens.injectors.envs.base import extra_python

    known = registry.names(include_frameworks=True)
    names = list(envs) if envs else known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownName(f"unknown environment(s) {unknown}; known: {', '.join(known)}")
    missing = [f"{n} needs {' and '.join(absent)}: pip install 'faultlens[{env.extra}]'"
               for n in names if (absent := (env := registry.get(n)).missing()) and extra_python(env.extra) is None]
    if missing:
        raise ConfigError("environments on real agent frameworks need their optional extra, not installed here "
                          f"({'; '.join(missing)}), or choose environments with --env")
    return names


# ---------------------------------------------------------------- the digest

# "package.module:Object", the form in which code names what it imports at run time (importlib, entry points).
_OBJECT_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


def _imports(path: Path, module: str) -> tuple[set[str], set[str]]:
    """The faultlens modules (candidates: a `from X import Y` may name a module Y) and third-party modules one
    file imports, anywhere in it (function-level imports run too, and "module:Object" strings name run-time ones)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    ours: set[str] = set()
    theirs: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _OBJECT_REF.fullmatch(node.value):
            names = [node.value.partition(":")[0]]  # imported by name at run time (an instrumentor per framework)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)] if base.startswith("faultlens") else [base]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            if top == "faultlens":
                ours.add(name)
            elif top and top not in sys.stdlib_module_names:
                theirs.add(name)
    return ours, theirs


@lru_cache(maxsize=None)
def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # a top-level subpackage of faultlens: cheap, already imported
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _source(module: str) -> Path | None:
    """The file of a faultlens module, found on disk (not imported: importing would run the frameworks)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    base = _package_dir(".".join(parts[:2]))
    if base is None:  # a module of the application layer's own folder, e.g. faultlens.cli
        root = _package_dir("faultlens")
        base = root / parts[1] if root else None
        parts = parts[1:]
        if base is None:
            return None
    else:
        parts = parts[1:]
    folder = base.parent.joinpath(base.name, *parts[1:]) if len(parts) > 1 else base
    for path in (folder / "__init__.py", folder.with_suffix(".py")):
        if path.is_file():
            return path
    return None


# The packages a shard build merely lives in: their __init__ re-export the evaluation side, which does not run.
_HOSTS = {"faultlens", "faultlens.benchmark"}


@lru_cache(maxsize=None)
def _closure(roots: tuple[str, ...]) -> tuple[dict[str, Path], frozenset[str]]:
    """The faultlens modules `roots` import transitively (with the packages they sit in), and the third-party
    modules any of them imports."""
    files: dict[str, Path] = {}
    theirs: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in files or module in _HOSTS:
            continue
        path = _source(module)
        if path is None:
            continue
        files[module] = path
        ours, more = _imports(path, module)
        theirs |= more
        parents = [module.rsplit(".", i)[0] for i in range(1, module.count("."))]
        todo += [m for m in (*ours, *parents) if m not in files]
    return files, frozenset(theirs)


@lru_cache(maxsize=1)
def _providers() -> dict[str, list[str]]:
    from importlib import metadata

    return dict(metadata.packages_distributions())


@lru_cache(maxsize=None)
def _files(dist: str) -> tuple[str, ...]:
    from importlib import metadata

    return tuple(str(f) for f in metadata.distribution(dist).files or ())


def _dists_of(module: str) -> list[str]:
    """The distributions that provide `module`. A namespace shared by several (`openinference.instrumentation.*`)
    is narrowed to the ones holding the module's own files, so installing a sibling changes no digest."""
    providers = sorted(set(_providers().get(module.partition(".")[0], [])))
    if len(providers) <= 1 or "." not in module:
        return providers
    prefix = module.replace(".", "/")
    owners = [d for d in providers if any(f.startswith(prefix + "/") or f == prefix + ".py" for f in _files(d))]
    return owners or providers


def _dist_versions(modules: Iterable[str], requirements: bool = False) -> dict[str, str]:
    """Installed versions of the distributions that provide `modules` (with `requirements`: and of everything
    they require, transitively)."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    todo = [canonicalize_name(d) for m in sorted(modules) for d in _dists_of(m)]
    out: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name in out or name == "faultlens":
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out[name] = dist.version
        for text in (dist.requires or []) if requirements else []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return dict(sorted(out.items()))


def digest_parts(env_name: str, params: ShardParams) -> dict[str, Any]:
    """What a shard's digest covers: arguments, source files (sha256 each) and distribution versions."""
    from faultlens.injectors import envs as registry

    env = registry.get(env_name)
    package = sys.modules[type(env).__module__].__package__ or type(env).__module__
    folder = Path(importlib.import_module(package).__file__ or "").parent
    own = {f"{package}/{p.relative_to(folder).as_posix()}": hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
    modules = sorted(f"{package}.{p.relative_to(folder).with_suffix('').as_posix().replace('/', '.')}".removesuffix(".__init__")
                     for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    files, theirs = _closure((__name__, *modules))
    code = {m: hashlib.sha256(p.read_bytes()).hexdigest() for m, p in sorted(files.items()) if not m.startswith(package + ".")
            and m != package}
    # The framework an environment runs (its pins) and what it pulls in shape its traces: all their versions count.
    # Of the other libraries the code imports, the directly imported ones' versions (pydantic, litellm, Pillow...).
    pins = _dist_versions(env.requires, requirements=True)
    return {"format": SHARD_FORMAT, "env": env_name, "params": asdict(params),
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}", "package": own, "code": code,
            "dists": {**_dist_versions(theirs), **pins}}


def shard_digest(env_name: str, params: ShardParams) -> str:
    return hashlib.sha256(json.dumps(digest_parts(env_name, params), sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------- building one shard

def trace_line(trace: Trace) -> str:
    """One JSONL line with every object's keys sorted.

    Some environments fill dicts (task metadata) by iterating over sets, whose
    order changes with each process's hash seed; sorting the keys makes the
    bytes a function of the content alone. The line is ordinary native JSONL.
    """
    return json.dumps(trace.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def write_lines(lines: Iterable[str], path: Path) -> int:
    """Write JSONL lines gzipped, with no time stamp in the gzip header (the same lines give the same bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.GzipFile(filename=path, mode="wb", mtime=0) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as fh:
        for line in lines:
            fh.write(line + "\n")
            n += 1
    return n


def _count(traces: list[Trace]) -> dict[tuple[str, str], int]:
    out: Counter = Counter()
    for t in traces:
        if t.gold is not None:
            out[(t.source.benchmark or "", t.gold.mode or "")] += 1
    return dict(out)


def _tally(results: list[Any], modes: list[str] | None = None) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """Per (environment, mode): injections attempted, runs kept (before any cap), and tasks it was offered
    (the successful seeds of a top-up run that asked for it; in a first pass, the seeds where it was tried)."""
    attempts: Counter = Counter()
    kept: Counter = Counter()
    offered: Counter = Counter()
    for seed_result in results:
        for attempt in seed_result.attempts:
            attempts[(attempt.env, attempt.mode)] += 1
            kept[(attempt.env, attempt.mode)] += attempt.status == "kept"
    if modes is None:
        # a first pass rotates modes over tasks: a mode was offered where it was tried
        for seed_result in results:
            for key in {(a.env, a.mode) for a in seed_result.attempts}:
                offered[key] += 1
    else:
        for env in {r.env for r in results}:
            tasks = sum(1 for r in results if r.env == env and r.seed_success)
            for mode in modes:
                offered[(env, mode)] += tasks
    return dict(attempts), dict(kept), dict(offered)


def _add(total: dict, more: dict) -> None:
    for key, n in more.items():
        total[key] = total.get(key, 0) + n


def topup_tasks(deficit: int, per_task: float) -> int:
    """Fresh tasks a top-up run needs for `deficit` more traces at a measured `per_task` yield (25% margin)."""
    needed = math.ceil(1.25 * deficit / max(per_task, 1e-9))
    return max(TOPUP_MIN_TASKS, min(TOPUP_MAX_TASKS, needed))


def topup_groups(needs: dict[tuple[str, str], int]) -> list[tuple[str, list[str], int]]:
    """(environment, modes, tasks) runs for the short modes: per environment, modes sorted by the tasks they need,
    grouped while the largest need is at most twice the group's smallest; a group runs its largest need."""
    from faultlens.injectors.applicability import CODES

    out: list[tuple[str, list[str], int]] = []
    for env in sorted({env for env, _ in needs}):
        ordered = sorted(((n, mode) for (e, mode), n in needs.items() if e == env), key=lambda nm: (nm[0], CODES.index(nm[1])))
        group: list[tuple[int, str]] = []
        for n, mode in ordered:
            if group and n > 2 * group[0][0]:
                out.append((env, sorted((m for _, m in group), key=CODES.index), group[-1][0]))
                group = []
            group.append((n, mode))
        if group:
            out.append((env, sorted((m for _, m in group), key=CODES.index), group[-1][0]))
    return out


def build_shard(env: str, params: ShardParams, *, workers: int = 2, digest: str = "",
                progress: Progress | None = None) -> Shard:
    """Run one environment through the pipeline: the first pass, then its top-up rounds (see `benchmark.build`)."""
    from faultlens.injectors.pipeline import worker_pool

    # One pool for the first pass and every top-up run: its workers import the framework once, not once per run.
    with nullcontext(None) if workers <= 1 else worker_pool(workers) as pool:
        return _build_shard(env, params, workers, digest, progress, pool)


def _build_shard(env: str, params: ShardParams, workers: int, digest: str, progress: Progress | None,
                 pool: Executor | None) -> Shard:
    from faultlens.injectors.pipeline import InjectConfig, InjectResult, inject

    started = time.time()

    def report(stage: str) -> Callable[[int, int], None]:
        return lambda done, total: progress(env, stage, done, total) if progress else None

    p = params
    config = InjectConfig(envs=[env], seeds=p.seeds, per_seed=p.per_seed, seed=p.seed, agent_model=p.agent_model,
                          generator=p.generator, noise=p.noise, workers=workers)
    result = inject(config, progress=report("pass 1"), pool=pool)
    traces = list(result.traces)
    phases = [len(traces)]
    seed_results = list(result.seeds)
    counts = _count(traces)
    attempts, kept, offered = _tally(seed_results)
    # Top-up rounds over fresh tasks, all injections spent on the modes still short. Each mode gets as many tasks
    # as its measured yield per task says its deficit needs (a mode that fits few steps needs many tasks); modes
    # with similar needs share one pipeline run, so a task's seed run serves several. A mode stops being topped up
    # when it reaches the target, when two rounds in a row add nothing to it (one empty round is often just a small
    # run whose tasks offered no step the mode fits), or when its yield per attempt is under MIN_YIELD after
    # MIN_YIELD_EVIDENCE attempts (listed in the datasheet).
    stalled: set[tuple[str, str]] = set()
    idle: Counter = Counter()  # consecutive rounds that added nothing, per mode
    for round_no in range(1, p.topup_rounds + 1):
        short = [key for key in sorted(attempts) if counts.get(key, 0) < p.min_per_mode and key not in stalled
                 and not (attempts[key] >= MIN_YIELD_EVIDENCE and kept.get(key, 0) / attempts[key] < MIN_YIELD)]
        if not short:
            break
        phases.append(0)
        # A round that added nothing to a mode doubles its tasks next round: the measured yield was too hopeful.
        needs = {key: min(TOPUP_MAX_TASKS, topup_tasks(p.min_per_mode - counts.get(key, 0),
                                                       kept.get(key, 0) / max(1, offered.get(key, 0))) * 2 ** idle[key])
                 for key in short}
        for _, modes, tasks in topup_groups(needs):
            top = InjectConfig(envs=[env], seeds=tasks, per_seed=TOPUP_ATTEMPTS * len(modes),
                               seed=p.seed + TOPUP_STRIDE * round_no, agent_model=p.agent_model, generator=p.generator,
                               noise=p.noise, workers=workers, modes=modes, measure_recovered=False)
            extra = inject(top, progress=report(f"top-up {round_no} {'/'.join(modes)}"), pool=pool)
            added: Counter = Counter()
            for trace in extra.traces:
                key = (env, (trace.gold.mode if trace.gold else "") or "")
                if counts.get(key, 0) < p.min_per_mode:
                    traces.append(trace)
                    counts[key] = counts.get(key, 0) + 1
                    added[key] += 1
                    phases[-1] += 1
            seed_results.extend(extra.seeds)
            for total, more in zip((attempts, kept, offered), _tally(extra.seeds, modes)):
                _add(total, more)
            for mode in modes:
                idle[(env, mode)] = 0 if added[(env, mode)] else idle[(env, mode)] + 1
                if idle[(env, mode)] >= 2:
                    stalled.add((env, mode))
    summary = InjectResult(traces, seed_results)
    return Shard(env, digest, [trace_line(t) for t in traces], phases, summary.summary(), summary.seed_summary(),
                 seconds=time.time() - started, _traces=traces)


# ---------------------------------------------------------------- the cache

def shard_paths(cache: Path, params: ShardParams, env: str) -> tuple[Path, Path]:
    """(traces, meta) files of `env`'s shard built with `params` in `cache`."""
    folder = Path(cache) / params.key()
    return folder / f"{env}.jsonl.gz", folder / f"{env}.json"


def read_shard(cache: Path, params: ShardParams, env: str, digest: str) -> Shard | None:
    """The cached shard of `env`, or None when there is none or it was made by other code, pins or arguments."""
    data, meta_path = shard_paths(cache, params, env)
    if not meta_path.exists() or not data.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("digest") != digest:
            return None
        with gzip.open(data, "rt", encoding="utf-8", newline="\n") as fh:
            lines = [line.rstrip("\n") for line in fh]
    except (OSError, ValueError, EOFError):  # a truncated or foreign file: rebuild it
        return None
    if len(lines) != sum(meta["phases"]):
        return None
    return Shard(env, digest, lines, meta["phases"], meta["yield"], meta["seeds"], cached=True,
                 seconds=meta.get("seconds", 0.0))


def write_shard(cache: Path, params: ShardParams, shard: Shard, parts: dict[str, Any] | None = None) -> None:
    """Store a shard: its traces first, then its meta file (written last, so a half-written shard never reads)."""
    data, meta_path = shard_paths(cache, params, shard.env)
    meta_path.unlink(missing_ok=True)
    write_lines(shard.lines, data)
    meta = {"env": shard.env, "digest": shard.digest, "phases": shard.phases, "traces": len(shard.lines),
            "yield": shard.yield_rows, "seeds": shard.seed_rows, "seconds": round(shard.seconds, 1),
            "made_from": parts or {}}
    tmp = meta_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, meta_path)


def stale_reason(cache: Path, params: ShardParams, env: str, parts: dict[str, Any]) -> str | None:
    """Why the cached shard of `env` no longer fits `parts` (what changed, in a few words); None when there is none."""
    meta_path = shard_paths(cache, params, env)[1]
    try:
        made_from = json.loads(meta_path.read_text()).get("made_from") or {}
    except (OSError, ValueError):
        return None
    changed = []
    for key, value in parts.items():
        old = made_from.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            changed += [f"{key} {name}" for name in sorted(set(value) | set(old)) if value.get(name) != old.get(name)]
        elif value != old:
            changed.append(key)
    return ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "") if changed else None


def build_shards(envs: list[str], params: ShardParams, cache: Path | None = None, *, workers: int = 2,
                 force: bool = False, progress: Progress | None = None) -> dict[str, Shard]:
    """Each environment's shard: from `cache` when its digest is unchanged (unless `force`), else built (and stored
    in `cache`, when given). Environments are built one after another, each stored as soon as it is done, so an
    interrupted build keeps the shards it finished. An environment whose framework lives in another virtualenv is
    built by that virtualenv's interpreter (`Environment.elsewhere`), in the same cache."""
    from faultlens.injectors import envs as registry

    out: dict[str, Shard] = {}
    for env in envs:
        if (python := registry.get(env).elsewhere()) is not None:
            out[env] = build_elsewhere(env, params, python, cache, workers=workers, force=force, progress=progress)
            continue
        parts = digest_parts(env, params)
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        shard = None if cache is None or force else read_shard(cache, params, env, digest)
        if shard is not None:
            if progress:
                progress(env, "cached", 0, 0)
        else:
            reason = None if cache is None or force else stale_reason(cache, params, env, parts)
            if reason and progress:
                progress(env, f"stale: {reason} changed", 0, 0)
            shard = build_shard(env, params, workers=workers, digest=digest, progress=progress)
            if cache is not None:
                write_shard(cache, params, shard, parts)
        out[env] = shard
    return out


# ---------------------------------------------------------------- a shard built by another interpreter

def build_elsewhere(env: str, params: ShardParams, python: Path, cache: Path | None, *, workers: int = 2,
                    force: bool = False, progress: Progress | None = None) -> Shard:
    """`env`'s shard built (or found cached) by `python`, another virtualenv's interpreter, in `cache` (a throwaway folder
    when None): it runs `benchmark.shard_elsewhere` (its progress relayed to `progress`) and the shard it wrote is read."""
    if cache is None:
        with tempfile.TemporaryDirectory(prefix="faultlens-shard-") as folder:
            shard = build_elsewhere(env, params, python, Path(folder), workers=workers, force=force, progress=progress)
            return shard
    command = [str(python), "-m", "faultlens.benchmark.shard_elsewhere", env, "--cache", str(cache),
               "--params", json.dumps(asdict(params), sort_keys=True), "--workers", str(workers)] + (["--force"] if force else [])
    cached = False
    # stderr to a file, not a pipe: the framework and the workers log there, and a full pipe nobody reads would
    # stall the child.
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as log, \
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True) as child:
        assert child.stdout is not None
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
        child.wait()
        log.seek(0)
        errors = log.read()
    if child.returncode:
        last = errors.strip().splitlines()[-1] if errors.strip() else f"exit status {child.returncode}"
        raise ConfigError(f"{env}: its shard is built by {python} (its framework's virtualenv), which failed: {last}")
    meta = json.loads(shard_paths(cache, params, env)[1].read_text())
    made = read_shard(cache, params, env, meta["digest"])
    if made is None:
        raise ConfigError(f"{env}: {python} reported its shard built, but {shard_paths(cache, params, env)[0]} does not read")
    made.cached = cached
    return made


__all__ = ["DEFAULT_CACHE", "Shard", "ShardParams", "build_elsewhere", "build_shard", "build_shards", "check_envs", "digest_parts",
           "read_shard", "shard_digest", "shard_paths", "stale_reason", "topup_groups", "topup_tasks", "trace_line", "write_lines",
           "write_shard"]
