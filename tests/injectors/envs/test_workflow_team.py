"""`workflow_team`: real LlamaIndex AgentWorkflow code (FunctionAgents, its handoff tool, its runtime) on simulated agents.

The tests that run the team skip when the `frameworks` extra (llama-index) is
not installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import assert_inject_is_byte_identical, assert_rule_fails_the_task  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.workflow_team.env import MAX_ITERATIONS  # noqa: E402
from faultlens.injectors.envs.workflow_team.mistakes import MUTATORS  # noqa: E402
from faultlens.injectors.envs.workflow_team.world import FAMILIES, make_task, resolve  # noqa: E402
from faultlens.injectors.envs.base import stable_seed  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Drift, Session  # noqa: E402

ENV = "workflow_team"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("llama_index") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    env = envs.get(ENV)
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(0, 12)]


def test_listed_only_with_frameworks_so_the_bundled_benchmark_is_unchanged():
    assert ENV not in envs.names()
    assert ENV in envs.names(include_frameworks=True)
    assert envs.get(ENV).framework == "llama-index"


def test_without_llama_index_a_run_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "llama_index" or m.startswith("llama_index.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "llama_index", None)  # as if not installed
    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]  # tasks need no framework
    with pytest.raises(RuntimeError, match=r"faultlens\[frameworks\]"):
        env.run(task, sim={"seed": 0, "noise": 0.0})


def test_every_criterion_matters_in_the_tasks():
    for i in range(60):
        family = FAMILIES[i % len(FAMILIES)]
        _, world = make_task(random.Random(i), family)
        want = resolve(world)
        cheapest = min(world["hotels"], key=lambda h: h["nightly"])
        best = max(world["hotels"], key=lambda h: h["rating"])
        assert want.hotel != (best if family == "comfort" else cheapest)
        if family == "comfort":
            assert min(world["flights"], key=lambda f: f["price"])["stops"] == 1 and want.flight["stops"] == 0


@needs_sdk
def test_seed_runs_succeed_and_replay_with_zero_drift(runs):
    env = envs.get(ENV)
    assert {t.metadata["family"] for t, _ in runs} == set(FAMILIES)
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.framework == "llama-index" and trace.source.benchmark == ENV
        session = Session(result.recording, replay_until=None)
        again = env.run(task, session=session, sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()
        assert session.live == 0 and session.replayed == len(result.recording.calls)


@needs_sdk
def test_the_requests_are_llama_indexs_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:2]] == ["concierge", "researcher"]
    tools = {t["function"]["name"] for t in calls[0].request["tools"]}
    assert tools == {"handoff"}  # the concierge has no tools of its own: LlamaIndex adds its handoff tool
    assert "Currently available agents" in calls[0].request["tools"][0]["function"]["description"]
    researcher = calls[1].request
    handed = [m for m in researcher["messages"] if m.get("role") == "tool"]
    assert handed and handed[0]["content"].startswith("Agent researcher is now handling the request")
    assert researcher["parallel_tool_calls"] is False
    assert {t["function"]["name"] for t in researcher["tools"]} == {"search_flights", "search_hotels", "handoff"}


@needs_sdk
def test_steps_map_to_their_calls_and_tool_results_have_none(runs):
    from faultlens.injectors.envs.agents_desk.wire import text_of

    for _, result in runs:
        steps, calls = result.trace.steps, result.recording.calls
        assert len(result.step_calls) == len(steps)
        assert sorted(c for c in result.step_calls if c is not None) == list(range(len(calls)))
        for step, call in zip(steps, result.step_calls):
            if call is None:
                assert step.kind == StepKind.tool_result and step.tool_result
            else:
                assert text_of(calls[call].response) == step.content
        assert steps[0].agent == "concierge" and steps[0].kind == StepKind.plan
        assert steps[-1].agent == "reviewer" and steps[-1].kind == StepKind.final_answer
        handoffs = [s for s in steps[1:] if s.metadata.get("handoff")]
        assert all(s.kind == StepKind.message and s.tool_name is None for s in handoffs)


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    loops = sum(any(s.agent == "reviewer" and s.metadata.get("handoff") == "booker" for s in r.trace.steps) for _, r in runs)
    errors = sum(any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in r.trace.steps) for _, r in runs)
    assert loops >= 2 and errors >= 1
    env = envs.get(ENV)
    for task, _ in runs[:4]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert len(clean.trace.steps) == 14  # no error, no review loop


@needs_sdk
def test_a_changed_request_on_replay_is_drift_not_a_crash(runs):
    env = envs.get(ENV)
    _, result = runs[0]
    with pytest.raises(Drift):
        env.run(env.tasks(0, 12)[1], session=Session(result.recording, replay_until=None), sim=SIM)


@needs_sdk
def test_a_run_that_loops_ends_at_llama_indexs_iteration_cap(runs):
    """A booker that always rebooks would loop forever: LlamaIndex's max_iterations ends the run, which fails."""
    from faultlens.injectors.envs.workflow_team import policy as team

    env = envs.get(ENV)
    task, _ = runs[0]
    original = team.TeamPolicy.booker

    def rebook(self, note, brief, mine, chance):
        return original(self, note, brief, [c for c in mine if c.tool != "book_trip"], chance)

    team.TeamPolicy.booker = rebook
    try:
        result = env.run(task, sim=dict(SIM, noise=0.0))
    finally:
        team.TeamPolicy.booker = original
    assert not result.trace.outcome.success and "Max iterations" in result.trace.outcome.detail
    assert len(result.recording.calls) == MAX_ITERATIONS


@needs_sdk
@pytest.mark.parametrize("mode,rule", [(m, r) for m, rules in MUTATORS.items() for r in rules],
                         ids=lambda v: getattr(v, "__name__", v))
def test_each_rule_of_the_environment_fails_the_task_with_an_exact_label(runs, mode, rule):
    assert_rule_fails_the_task(ENV, runs, mode, rule, SIM)


@needs_sdk
def test_inject_is_byte_identical_in_process_and_in_workers():
    assert_inject_is_byte_identical(ENV)


@needs_sdk
def test_runs_are_captured_as_llama_indexs_openinference_spans_and_import(tmp_path):
    pytest.importorskip("openinference.instrumentation.llama_index")
    from click.testing import CliRunner

    from faultlens.cli import cli
    from faultlens.middleware.otlp.convert import read_otlp_file

    out = tmp_path / "otlp"
    result = inject(InjectConfig(envs=[ENV], seeds=1, per_seed=1, seed=2, workers=1, otlp_dir=str(out)))
    task = envs.get(ENV).tasks(2, 1)[0]
    seed_file = out / f"{task.id}-seed.json"
    assert seed_file.exists() and len(list(out.glob("*.json"))) == 1 + len(result.seeds[0].attempts)
    seed_run = envs.get(ENV).run(task, sim={"seed": stable_seed(2, ENV, 0), "noise": 0.2, "tendencies": {}})
    (imported,) = list(read_otlp_file(seed_file))
    assert imported.source.framework == "llama-index"
    # Each function tool and each handoff is a TOOL span (`FunctionTool.acall`), in the order the run called them.
    from faultlens.injectors.envs.agents_desk.wire import tool_call_of

    called = [tool_call_of(c.response)["function"]["name"] for c in seed_run.recording.calls if tool_call_of(c.response)]
    assert [s.tool_name for s in imported.steps if s.kind == StepKind.tool_call] == called
    # LlamaIndex's instrumentation nests LLM spans (`OpenAILike.achat` twice, `_prepare_chat_with_tools`): 3 per call.
    assert len([s for s in imported.steps if s.kind == StepKind.llm_call]) == 3 * len(seed_run.recording.calls)
    ran = CliRunner().invoke(cli, ["traces", "import", f"otlp:{seed_file}", "--db", str(tmp_path / "t.db")],
                             catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
