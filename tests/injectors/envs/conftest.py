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
