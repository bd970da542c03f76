"""Warm-start error injection: seeds → (t, mode) → generate → replay + live → keep failures.

For each task (a *seed*):

1. run the team live, recording every call (`middleware.replay.session.Session`); a
   seed that fails is skipped (counted);
2. replay the whole recording and check it reproduces the seed with zero drift
   (the verification, stored on every kept trace, that the seed run with the
   original action at t succeeded);
3. choose up to `per_seed` pairs (t, mode) among the applicable ones, rotating
   through modes so every mode gets its share;
4. generate the erroneous action for step t (template rules or an LLM);
5. warm-start: replay calls 0..t-1 from the recording (drift → dropped and
   counted), put the generated action at call t, let the agents continue live;
6. evaluate; a run that now fails is kept with the gold label (agent of step t,
   t, mode, reason). A run that still succeeds (the error was caught or did
   not matter) is counted and dropped.

Steps and calls: in the bundled environments step t is recorded call t. An
environment on a real agent framework says which call made each step
(`RunResult.step_calls`): its control calls (an AG2 speaker selection) are no
step, and its steps with no call (a code executor's output) are no
candidates; "call t" above is then the call of step t, and its response is
built by `Environment.injected_response`.

Seeds run in parallel worker processes; results are put back in seed order, so
the output is the same for the same arguments whatever the scheduling.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import multiprocessing as mp

from faultlens.middleware.model.trace import GoldLabel, Task, Trace
from faultlens.middleware.replay.session import Drift, Recording, Session

from . import envs
from .capture import capture_for
from .envs.base import Environment, stable_seed
from .generators import Generated, Generator, gen_input, get_generator
from .sim import SimConfig, ensure_registered
from .applicability import applicable_modes

STATUSES = ("kept", "succeeded", "drifted", "unparsed", "crashed")


@dataclass
class InjectConfig:
    """Arguments of one injection run (what the CLI passes)."""

    envs: list[str]
    seeds: int = 20
    per_seed: int = 4
    seed: int = 0
    agent_model: str | None = None
    generator: str = "template"
    noise: float = 0.2
    workers: int = 2
    modes: list[str] | None = None
    db: str | None = None  # when set, seed and injected runs also go through a Tracer storing into this store
    measure_recovered: bool = True  # also run each seed without noise to measure recovered mistakes (one more run)
    # When set, every seed and injected run of a framework environment is also written here as the framework's
    # OpenInference spans (OTLP JSON, `<trace id>.json`; see `injectors.capture`).
    otlp_dir: str | None = None
    # When set, the framework's own log of every seed and injected run (`RunResult.native_log`, e.g. smolagents'
    # memory steps) is written here, `<trace id>.jsonl`, for environments that keep one.
    native_log_dir: str | None = None


_TRACERS: dict[str, Any] = {}


def _tracer_for(db: str | None) -> Any:
    """One Tracer per process and store (made after the fork: SQLite connections must not cross it)."""
    if db is None:
        return None
    if db not in _TRACERS:
        from faultlens.middleware.store import open_store
        from faultlens.middleware.capture.tracer import Tracer

        _TRACERS[db] = Tracer(store=open_store(db), env_exporters=False)
    return _TRACERS[db]


@dataclass
class Attempt:
    env: str
    task_id: str
    t: int
    mode: str
    status: str
    trace: Trace | None = None
    reason: str = ""


@dataclass
class SeedResult:
    env: str
    index: int
    task_id: str
    seed_success: bool
    attempts: list[Attempt] = field(default_factory=list)
    recovered_mistake: bool | None = None  # the seed differs from a noise-free run of the same agents
    error: str | None = None


@dataclass
class InjectResult:
    traces: list[Trace]
    seeds: list[SeedResult]

    def summary(self) -> list[dict[str, Any]]:
        """One row per (environment, mode): attempted, drifted, still succeeded, kept."""
        rows: dict[tuple[str, str], Counter] = {}
        for seed in self.seeds:
            for a in seed.attempts:
                c = rows.setdefault((a.env, a.mode), Counter())
                c["attempted"] += 1
                c[a.status] += 1
        from .applicability import CODES

        out = []
        for (env, mode), c in sorted(rows.items(), key=lambda kv: (kv[0][0], CODES.index(kv[0][1]))):
            out.append({"env": env, "mode": mode, "attempted": c["attempted"], "unparsed": c["unparsed"],
                        "crashed": c["crashed"], "drifted": c["drifted"], "still_succeeded": c["succeeded"],
                        "kept": c["kept"]})
        return out

    def seed_summary(self) -> list[dict[str, Any]]:
        out = []
        for env in sorted({s.env for s in self.seeds}):
            mine = [s for s in self.seeds if s.env == env]
            measured = [s for s in mine if s.recovered_mistake is not None]
            errors = [s.error for s in mine if s.error]
            out.append({"env": env, "seeds": len(mine), "seeds_succeeded": sum(s.seed_success for s in mine),
                        "seed_errors": len(errors), "first_seed_error": errors[0] if errors else None,
                        "seeds_with_recovered_mistake": sum(bool(s.recovered_mistake) for s in measured) if measured else None,
                        "mean_steps": round(sum(len(a.trace.steps) for s in mine for a in s.attempts if a.trace) /
                                            max(1, sum(1 for s in mine for a in s.attempts if a.trace)), 1),
                        "kept": sum(a.status == "kept" for s in mine for a in s.attempts)})
        return out


# ---------------------------------------------------------------- one seed

def candidates(trace: Trace, rng: random.Random, rotate: int, modes: list[str] | None = None,
               injectable: set[int] | None = None) -> dict[str, list[int]]:
    """Per applicable mode, the steps it applies to (shuffled); modes in taxonomy order rotated by `rotate`.

    `injectable`: the steps that can be replaced (those made by a recorded call); None: every step.
    """
    from .applicability import CODES

    by_mode: dict[str, list[int]] = {}
    for step in trace.steps:
        if injectable is not None and step.index not in injectable:
            continue
        for mode in applicable_modes(step, trace):
            if modes is None or mode in modes:
                by_mode.setdefault(mode, []).append(step.index)
    order = [c for c in CODES if c in by_mode]
    if not order:
        return {}
    order = order[rotate % len(order):] + order[: rotate % len(order)]
    for mode in order:
        rng.shuffle(by_mode[mode])
    return {mode: by_mode[mode] for mode in order}


def choose_pairs(trace: Trace, rng: random.Random, rotate: int, modes: list[str] | None = None) -> list[tuple[int, str]]:
    """All applicable (t, mode) pairs, ordered so that modes alternate (rotated by `rotate`)."""
    by_mode: dict[str, list[int]] = {}
    for step in trace.steps:
        for mode in applicable_modes(step, trace):
            if modes is None or mode in modes:
                by_mode.setdefault(mode, []).append(step.index)
    order = sorted(by_mode)
    if not order:
        return []
    order = order[rotate % len(order):] + order[: rotate % len(order)]
    for mode in order:
        rng.shuffle(by_mode[mode])
    pairs: list[tuple[int, str]] = []
    depth = 0
    while any(depth < len(by_mode[m]) for m in order):
        for mode in order:
            if depth < len(by_mode[mode]):
                pairs.append((by_mode[mode][depth], mode))
        depth += 1
    return pairs


def inject_one(env: Environment, seed_run: Trace, recording: Recording, t: int, mode: str, generated: Generated,
               *, model: str | None, sim: dict[str, Any], trace_id: str, tracer: Any = None,
               step_calls: list[int | None] | None = None, native_log_dir: str | None = None) -> Attempt:
    """Warm-start from the recording with `generated` at step t's call; evaluate; label.

    `step_calls`: the recorded call of each step (see `RunResult.step_calls`); None: step t is call t.
    `native_log_dir`: where to write the run's native log (`<trace_id>.jsonl`), when the environment keeps one.
    """
    call = t if step_calls is None else step_calls[t]
    if call is None:
        raise ValueError(f"step {t} has no recorded call to replace")
    session = Session(recording, replay_until=call, overrides={call: lambda record: env.injected_response(record, generated.text)})
    try:
        result = env.run(seed_run.task, model=model, session=session, sim=sim, trace_id=trace_id, tracer=tracer)
    except Drift as drift:
        return Attempt(env.name, seed_run.task.id or "", t, mode, "drifted", reason=str(drift))
    except Exception as exc:  # the team's program (not the task) broke: not a label we can trust
        return Attempt(env.name, seed_run.task.id or "", t, mode, "crashed", reason=f"{type(exc).__name__}: {exc}")
    write_native_log(native_log_dir, trace_id, result.native_log)
    trace = result.trace
    if trace.outcome is not None and trace.outcome.success:
        return Attempt(env.name, seed_run.task.id or "", t, mode, "succeeded", reason=generated.reason)
    step = trace.steps[t]
    trace.gold = GoldLabel(step=t, agent=step.agent, mode=mode, reason=generated.reason)
    trace.metadata["injection"] = {
        "seed_trace_id": seed_run.id,
        "seed_outcome": seed_run.outcome.model_dump() if seed_run.outcome else None,
        "seed_replayed_without_drift": True,
        "seed_action": seed_run.steps[t].content,
        "injected_action": step.content,
        "step_kind": step.kind.value,
        "replayed_calls": session.replayed,
        "live_calls": session.live,
    }
    return Attempt(env.name, seed_run.task.id or "", t, mode, "kept", trace=trace, reason=generated.reason)


def write_native_log(directory: str | None, trace_id: str, text: str | None) -> Path | None:
    """Write a run's native log as `<directory>/<trace_id>.jsonl` (nothing when no directory or no log)."""
    if directory is None or text is None:
        return None
    path = Path(directory) / f"{trace_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@contextmanager
def _captured(env: Environment, config: InjectConfig, trace_id: str) -> Iterator[None]:
    """Write the run inside the block as the framework's OpenInference spans, when asked to."""
    if config.otlp_dir is None or env.framework is None:
        yield
        return
    capture = capture_for(env.framework)
    with capture.run() as spans:
        yield
    capture.write(spans, Path(config.otlp_dir) / f"{trace_id}.json")


def run_seed(env_name: str, index: int, task: Task, config: InjectConfig) -> SeedResult:
    env = envs.get(env_name)
    generator: Generator = get_generator(config.generator)
    sim = SimConfig(seed=stable_seed(config.seed, env_name, index), noise=config.noise).to_dict()
    model = config.agent_model
    tracer = _tracer_for(config.db)
    with _captured(env, config, f"{task.id}-seed"):
        seed_run = env.run(task, model=model, sim=sim, trace_id=f"{task.id}-seed", tracer=tracer)
    write_native_log(config.native_log_dir, f"{task.id}-seed", seed_run.native_log)
    out = SeedResult(env_name, index, task.id or "", bool(seed_run.trace.outcome and seed_run.trace.outcome.success))
    if not out.seed_success:
        return out
    # The verification stored with every kept trace: the recording replays to the same successful run.
    check = env.run(task, model=model, session=Session(seed_run.recording, replay_until=None), sim=sim,
                    trace_id=seed_run.trace.id)
    if check.trace.model_dump() != seed_run.trace.model_dump():
        out.seed_success = False
        out.error = "the seed did not replay to the same run"
        return out
    if model is None and config.noise > 0 and config.measure_recovered:
        # Measured, not assumed: a seed has a recovered mistake when the same simulated agents without noise act
        # differently on the same task (and both runs succeed).
        clean = env.run(task, sim=dict(sim, noise=0.0), trace_id=seed_run.trace.id)
        out.recovered_mistake = [s.content for s in clean.trace.steps] != [s.content for s in seed_run.trace.steps]
    rng = random.Random(stable_seed(config.seed, env_name, index, "pairs"))
    # Modes take turns (rotated per seed); within a mode, the steps it applies to are tried in random order until
    # one yields an error, so rare modes get their share instead of the modes that apply to every step.
    injectable = None if seed_run.step_calls is None else {t for t, c in enumerate(seed_run.step_calls) if c is not None}
    queues = candidates(seed_run.trace, rng, rotate=index, modes=config.modes, injectable=injectable)
    made = 0
    while made < config.per_seed and any(queues.values()):
        for mode, steps in queues.items():
            if made >= config.per_seed:
                break
            while steps:
                t = steps.pop(0)
                inp = gen_input(seed_run.trace, t, mode, random.Random(stable_seed(config.seed, task.id, t, mode)), env)
                raw_before = len(getattr(generator, "unparsed", []))
                generated = generator.generate(inp)
                if generated is None:
                    unparsed = getattr(generator, "unparsed", [])
                    if len(unparsed) > raw_before:
                        # A model's answer we could not use: counted and kept for audit, never replaced silently.
                        made += 1
                        out.attempts.append(Attempt(env_name, task.id or "", t, mode, "unparsed", reason=unparsed[-1]))
                        break
                    continue
                made += 1
                with _captured(env, config, f"{task.id}-t{t}-{mode}"):
                    out.attempts.append(inject_one(env, seed_run.trace, seed_run.recording, t, mode, generated,
                                                   model=model, sim=sim, trace_id=f"{task.id}-t{t}-{mode}",
                                                   tracer=tracer, step_calls=seed_run.step_calls,
                                                   native_log_dir=config.native_log_dir))
                break
    if tracer is not None:
        tracer.force_flush()
    return out


def _run_seed_job(args: tuple[str, int, Task, InjectConfig]) -> SeedResult:
    env_name, index, task, _ = args
    ensure_registered()  # a worker process starts clean (forkserver), so it registers the simulated provider itself
    try:
        return run_seed(*args)
    except Exception as exc:  # e.g. a real model's API error: reported per seed, the other seeds go on
        return SeedResult(env_name, index, task.id or "", False, error=f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- many seeds

def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` processes for `inject` runs.

    Not "fork": the caller may run threads (litellm's logging pool, span processors), and a forked child can
    inherit one of their locks held and hang at exit. Forkserver workers start clean. A caller that runs several
    `inject`s over one environment (a shard's top-up rounds) passes one pool to all, so its workers import the
    framework once.
    """
    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("forkserver"))


def inject(config: InjectConfig, progress: Callable[[int, int], None] | None = None,
           pool: Executor | None = None) -> InjectResult:
    """Run the pipeline over `config.seeds` tasks of each environment (in `pool` when given, else in a pool of
    `config.workers` processes made for this run, or in this process for one worker)."""
    jobs: list[tuple[str, int, Task, InjectConfig]] = []
    for env_name in config.envs:
        env = envs.get(env_name)
        for index, task in enumerate(env.tasks(config.seed, config.seeds)):
            jobs.append((env_name, index, task, config))
    results: dict[tuple[str, int], SeedResult] = {}
    done = 0
    if pool is None and config.workers <= 1:
        for job in jobs:
            results[(job[0], job[1])] = _run_seed_job(job)
            done += 1
            if progress:
                progress(done, len(jobs))
    else:
        with nullcontext(pool) if pool is not None else worker_pool(config.workers) as running:
            futures = {running.submit(_run_seed_job, job): (job[0], job[1]) for job in jobs}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                done += 1
                if progress:
                    progress(done, len(jobs))
    ordered = [results[(job[0], job[1])] for job in jobs]
    traces = [a.trace for s in ordered for a in s.attempts if a.status == "kept" and a.trace is not None]
    return InjectResult(traces, ordered)


def kept_traces(results: Iterable[SeedResult]) -> list[Trace]:
    return [a.trace for s in results for a in s.attempts if a.status == "kept" and a.trace is not None]


__all__ = ["Attempt", "InjectConfig", "InjectResult", "SeedResult", "candidates", "choose_pairs", "inject", "inject_one",
           "run_seed", "worker_pool", "write_native_log"]
