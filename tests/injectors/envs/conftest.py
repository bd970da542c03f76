"""Shared helpers of the environment tests: seed runs, and one injection of every applicable mode.

`seed_runs(env, sim, task_seed, n)` runs an environment's first `n` tasks under
simulated agents (cached per arguments, so the tests of a session share them).
`inject_every_mode(env, runs, sim)` injects each applicable mode once per seed,
at the first step where the template generator writes an error for it, and
checks what every environment must guarantee: the warm-started run
never drifts or crashes; it either fails the task (kept, labelled with the
injected step, its agent and the mode) or still succeeds (filtered).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from functools import lru_cache
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@lru_cache(maxsize=None)
def _seed_runs(env_name: str, sim_json: str, task_seed: int, n: int) -> tuple:
    from faultlens.injectors import envs

    env = envs.get(env_name)
    sim = json.loads(sim_json)
    return tuple((task, env.run(task, sim=sim, trace_id=f"{task.id}-seed")) for task in env.tasks(task_seed, n))


def seed_runs(env_name: str, sim: dict[str, Any], task_seed: int = 0, n: int = 4) -> list:
    """[(task, RunResult)] of the environment's first `n` tasks of `task_seed` under simulated agents."""
    return list(_seed_runs(env_name, json.dumps(sim, sort_keys=True), task_seed, n))


# -- a framework team's own test module: its skip mark, its seed runs, an injection at a step, the inject check --
FRAMEWORK_SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}  # the framework teams' tests' simulated agents


def needs_framework(module: str, extra: str = "frameworks") -> pytest.MarkDecorator:
    """Skips a test that runs the team when its framework (`module`, of the optional `extra`) is not installed."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"needs the {extra} extra: pip install 'faultlens[{extra}]'")


def seed_runs_fixture(env_name: str, n: int, sim: dict[str, Any] = FRAMEWORK_SIM) -> Any:
    """A module fixture `runs`: `seed_runs` of the first `n` tasks of task seed 0 (shared with test_framework_envs)."""

    @pytest.fixture(scope="module", name="runs")
    def runs() -> list:
        return seed_runs(env_name, sim, 0, n)

    return runs


def inject_at(env_name: str, seed: Any, t: int, mode: str, generated: Any, sim: dict[str, Any] = FRAMEWORK_SIM) -> Any:
    """The attempt of `generated` (a `Generated`) injected at step `t` of a seed run (a `RunResult`) as `mode`."""
    from faultlens.injectors import envs
    from faultlens.injectors.pipeline import inject_one

    return inject_one(envs.get(env_name), seed.trace, seed.recording, t, mode, generated, model=None, sim=sim,
                      trace_id="x", step_calls=seed.step_calls)


def assert_inject_keeps_many_modes(env_name: str, modes: int = 6) -> list:
    """`inject` of 3 seeds, 8 attempts each: every seed run succeeds, every attempt is kept or still succeeds, at
    least `modes` modes are kept, and each kept run failed with its gold step's agent as the gold agent. Returns the
    kept traces."""
    from faultlens.injectors.pipeline import InjectConfig, inject

    result = inject(InjectConfig(envs=[env_name], seeds=3, per_seed=8, seed=0, workers=1))
    assert all(s.seed_success for s in result.seeds)
    assert not [a for s in result.seeds for a in s.attempts if a.status not in ("kept", "succeeded")]
    kept = result.traces
    assert len({t.gold.mode for t in kept}) >= modes
    for trace in kept:
        assert not trace.outcome.success and trace.steps[trace.gold.step].agent == trace.gold.agent
    return kept


def inject_every_mode(env_name: str, runs: list, sim: dict[str, Any]) -> tuple[set[str], dict[str, int]]:
    """Inject each applicable mode once per seed; assert kept-or-filtered and the gold label.

    Returns (modes tried, kept runs per mode)."""
    from faultlens.injectors import envs
    from faultlens.injectors.generators import announces, gen_input, get_generator
    from faultlens.injectors.pipeline import inject_one
    from faultlens.injectors.applicability import applicable_modes

    env = envs.get(env_name)
    generator = get_generator("template")
    tried: set[str] = set()
    kept: dict[str, int] = {}
    for task, seed in runs:
        trace = seed.trace
        assert trace.outcome.success, trace.outcome.detail
        done: set[str] = set()  # each mode once per seed, at the first step it fits
        for step in trace.steps:
            modes = applicable_modes(step, trace)
            assert not set(modes) & set(env.not_applicable), "a mode declared not applicable was offered"
            for mode in modes:
                if mode in done:
                    continue
                generated = generator.generate(gen_input(trace, step.index, mode, random.Random(step.index), env))
                if generated is None:
                    continue
                done.add(mode)
                tried.add(mode)
                assert not announces(generated.text, step.content), (mode, generated.text)
                attempt = inject_one(env, trace, seed.recording, step.index, mode, generated, model=None, sim=sim,
                                     trace_id=f"{task.id}-t{step.index}-{mode}")
                assert attempt.status in ("kept", "succeeded"), (mode, attempt.status, attempt.reason)
                if attempt.status == "kept":
                    assert not attempt.trace.outcome.success
                    gold = attempt.trace.gold
                    assert (gold.step, gold.agent, gold.mode) == (step.index, step.agent, mode)
                    assert attempt.trace.steps[step.index].content == generated.text
                    kept[mode] = kept.get(mode, 0) + 1
    return tried, kept


@pytest.fixture(scope="session")
def every_mode():
    """`inject_every_mode`, as a fixture."""
    return inject_every_mode


def assert_rule_fails_the_task(env_name: str, runs: list, mode: str, rule: Any, sim: dict[str, Any], *,
                               tries: int = 6, max_steps: int | None = None) -> None:
    """One error rule of a framework environment, at the steps with a recorded call where the pipeline injects its
    mode (`applicable_modes`: a rule that works only where the build never uses it is no rule): within `tries`
    applications it makes a kept failure labelled with the injected step, its agent and the mode (a run may also
    still succeed: a caught error); never a drift or a crash."""
    from faultlens.injectors import envs
    from faultlens.injectors.applicability import applicable_modes
    from faultlens.injectors.generators import announces, gen_input
    from faultlens.injectors.pipeline import inject_one

    env = envs.get(env_name)
    tried = []
    for task, result in runs:
        for t, call in enumerate(result.step_calls):
            if call is None or mode not in applicable_modes(result.trace.steps[t], result.trace):
                continue
            inp = gen_input(result.trace, t, mode, random.Random(t), env)
            generated = rule(inp)
            if generated is None:
                continue
            assert not announces(generated.text, inp.text), generated.text
            attempt = inject_one(env, result.trace, result.recording, t, mode, generated, model=None, sim=sim,
                                 trace_id="x", step_calls=result.step_calls)
            tried.append(attempt.status)
            assert attempt.status in ("kept", "succeeded"), attempt.reason
            if attempt.status == "kept":
                trace = attempt.trace
                assert not trace.outcome.success
                assert (trace.gold.step, trace.gold.agent, trace.gold.mode) == (t, result.trace.steps[t].agent, mode)
                assert trace.steps[t].content == generated.text
                assert trace.metadata["injection"]["replayed_calls"] == call
                if max_steps is not None:
                    assert len(trace.steps) < max_steps  # the run ended in bounded steps
                return
            if len(tried) >= tries:
                break
    pytest.fail(f"{rule.__name__} made no kept failure ({tried or 'never applied'})")


def assert_inject_is_byte_identical(env_name: str) -> None:
    """`inject` gives the same traces, byte for byte, in one process and in two workers; every kept trace failed."""
    from faultlens.injectors.pipeline import InjectConfig, inject

    a = inject(InjectConfig(envs=[env_name], seeds=3, per_seed=3, seed=1, workers=1))
    b = inject(InjectConfig(envs=[env_name], seeds=3, per_seed=3, seed=1, workers=2))
    dump = lambda r: "\n".join(t.model_dump_json() for t in r.traces)  # noqa: E731
    assert a.traces and dump(a) == dump(b)
    assert all(not t.outcome.success and t.gold is not None for t in a.traces)
    assert all(s.seed_success for s in a.seeds)


def captured_seed(env_name: str, tmp_path: Any, instrumentation: str) -> tuple[Any, Any]:
    """One task of seed 2 injected with its framework's OpenInference capture on (skips without `instrumentation`).

    Asserts one span file per run and that `faultlens traces import` takes the seed run's file; returns (the seed
    run's spans read back as a trace, the seed run made again without capture)."""
    pytest.importorskip(instrumentation)
    from click.testing import CliRunner

    from faultlens.cli import cli
    from faultlens.injectors import envs
    from faultlens.injectors.envs.base import stable_seed
    from faultlens.injectors.pipeline import InjectConfig, inject
    from faultlens.middleware.otlp.convert import read_otlp_file

    out = tmp_path / "otlp"
    result = inject(InjectConfig(envs=[env_name], seeds=1, per_seed=1, seed=2, workers=1, otlp_dir=str(out)))
    task = envs.get(env_name).tasks(2, 1)[0]
    seed_file = out / f"{task.id}-seed.json"
    assert seed_file.exists() and len(list(out.glob("*.json"))) == 1 + len(result.seeds[0].attempts)
    seed_run = envs.get(env_name).run(task, sim={"seed": stable_seed(2, env_name, 0), "noise": 0.2, "tendencies": {}})
    (imported,) = list(read_otlp_file(seed_file))
    ran = CliRunner().invoke(cli, ["traces", "import", f"otlp:{seed_file}", "--db", str(tmp_path / "t.db")],
                             catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    return imported, seed_run
