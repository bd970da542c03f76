"""`smol_analyst`: real smolagents code (a CodeAgent managing a CodeAgent, its Python executor) on simulated agents.

Skipped when the `frameworks` extra (smolagents) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("smolagents", reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.base import stable_seed  # noqa: E402
from faultlens.injectors.generators import TemplateGenerator, gen_input  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject, inject_one  # noqa: E402
from faultlens.middleware.model import StepKind  # noqa: E402
from faultlens.middleware.replay import Drift, Session  # noqa: E402

SIM = {"seed": 3, "noise": 0.3, "tendencies": {}}
ENV = "smol_analyst"


@pytest.fixture(scope="module")
def runs():
    env = envs.get(ENV)
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(0, 6)]


def test_listed_only_with_frameworks():
    assert ENV not in envs.names() and ENV in envs.names(include_frameworks=True)


def test_seed_runs_succeed_and_replay_exactly(runs):
    env = envs.get(ENV)
    for task, result in runs:
        assert result.trace.outcome.success, (task.query, result.trace.outcome.detail)
        assert result.trace.source.framework == "smolagents"
        again = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=result.trace.id)
        assert again.trace.model_dump() == result.trace.model_dump()


def test_requests_are_smolagents_own_and_steps_interleave_as_they_happen(runs):
    _, result = runs[0]
    first = result.recording[0]
    assert first.agent == "analyst" and first.request["stop"] == ["<end_plan>"]
    action = result.recording[1]
    assert action.request["stop"] == ["Observation:", "Calling tools:", "</code>"]
    assert first.request["messages"][0]["content"][0]["type"] == "text"  # list-of-parts content
    sub = next(c for c in result.recording.calls if c.agent == "data_agent")
    assert "You're a helpful agent named 'data_agent'" in sub.request["messages"][1]["content"][0]["text"]
    agents = [s.agent for s in result.trace.steps]
    # smolagents' planning step, the delegation, the managed agent's steps, the analyst's observation of its report,
    # then the answer
    assert result.trace.steps[0].kind == StepKind.plan and "## 2. Plan" in result.trace.steps[0].content
    assert "write the facts survey" in first.request["messages"][-1]["content"][0]["text"]
    assert agents[:3] == ["analyst", "analyst", "data_agent"] and agents[-2:] == ["analyst", "analyst"]
    assert result.trace.steps[-2].kind == StepKind.tool_result and "managed agent 'data_agent'" in result.trace.steps[-2].content
    for step, call in zip(result.trace.steps, result.step_calls):
        assert (call is None) == (step.kind == StepKind.tool_result)
        if call is not None:
            assert result.recording[call].agent == step.agent


def test_seeds_hold_recovered_mistakes(runs):
    retried = sum(any("unknown region" in s.content for s in r.trace.steps) for _, r in runs)
    rewritten = sum(any(s.content.startswith("Error:") or "Error" in s.content[:40] for s in r.trace.steps
                        if s.kind == StepKind.tool_result) for _, r in runs)
    assert retried + rewritten >= 1


def test_drift_is_raised_not_swallowed(runs):
    _, result = runs[0]
    with pytest.raises(Drift):
        envs.get(ENV).run(envs.get(ENV).tasks(0, 6)[1], session=Session(result.recording, replay_until=None), sim=SIM)


def test_a_misreported_figure_fails_the_task_with_the_managed_agents_label(runs):
    env = envs.get(ENV)
    task, result = runs[0]
    t = next(i for i, s in enumerate(result.trace.steps) if s.agent == "data_agent" and "final_answer(" in s.content)
    generated = TemplateGenerator().generate(gen_input(result.trace, t, "C.2", random.Random(0), env))
    assert generated is not None
    attempt = inject_one(env, result.trace, result.recording, t, "C.2", generated, model=None, sim=SIM, trace_id="x",
                         step_calls=result.step_calls)
    assert attempt.status == "kept", attempt.reason
    assert attempt.trace.gold.agent == "data_agent" and attempt.trace.gold.step == t
    assert not attempt.trace.outcome.success


def test_the_analyst_follows_its_plan_so_a_misread_plan_fails_the_task(runs):
    env = envs.get(ENV)
    task, result = runs[0]
    generated = TemplateGenerator().generate(gen_input(result.trace, 0, "R.4", random.Random(0), env))
    assert generated is not None
    attempt = inject_one(env, result.trace, result.recording, 0, "R.4", generated, model=None, sim=SIM, trace_id="p",
                         step_calls=result.step_calls)
    assert attempt.status == "kept" and attempt.trace.gold.agent == "analyst" and attempt.trace.gold.step == 0
    assert attempt.trace.metadata["injection"]["replayed_calls"] == 0


def test_inject_is_deterministic_and_captures_openinference_spans(tmp_path):
    pytest.importorskip("openinference.instrumentation.smolagents")
    from faultlens.middleware.otlp import read_otlp_file

    config = InjectConfig(envs=[ENV], seeds=3, per_seed=2, seed=1, workers=1, otlp_dir=str(tmp_path / "a"))
    a, b = inject(config), inject(InjectConfig(envs=[ENV], seeds=3, per_seed=2, seed=1, workers=2))
    assert [t.model_dump_json() for t in a.traces] == [t.model_dump_json() for t in b.traces]
    assert a.traces and all(not t.outcome.success for t in a.traces)
    task = envs.get(ENV).tasks(1, 1)[0]
    (imported,) = list(read_otlp_file(tmp_path / "a" / f"{task.id}-seed.json"))
    seed = envs.get(ENV).run(task, sim={"seed": stable_seed(1, ENV, 0), "noise": 0.2, "tendencies": {}})
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert len(llm) == len(seed.recording)
