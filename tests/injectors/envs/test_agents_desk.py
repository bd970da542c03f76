"""`agents_desk`: real OpenAI Agents SDK code (handoffs, function tools, an input guardrail) on simulated agents.

The tests that run the team skip when the `frameworks` extra (openai-agents) is
not installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import assert_inject_is_byte_identical, assert_rule_fails_the_task  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.agents_desk.mistakes import MUTATORS  # noqa: E402
from faultlens.injectors.envs.agents_desk.wire import completion, text_of  # noqa: E402
from faultlens.injectors.envs.base import stable_seed  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Drift, Session  # noqa: E402

ENV = "agents_desk"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("agents") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    env = envs.get(ENV)
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(0, 12)]


def test_listed_only_with_frameworks_so_the_bundled_benchmark_is_unchanged():
    assert ENV not in envs.names()
    assert ENV in envs.names(include_frameworks=True)
    assert envs.get(ENV).framework == "openai-agents"


def test_without_the_sdk_a_run_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "agents", None)  # as if not installed
    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]  # tasks need no framework
    with pytest.raises(RuntimeError, match=r"faultlens\[frameworks\]"):
        env.run(task, sim={"seed": 0, "noise": 0.0})


def test_a_step_text_and_its_completion_map_onto_each_other():
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    call = 'Looking it up.\nAction: lookup_order\n{"order_id": "A1234"}'
    made = completion(request, call)
    message = made["choices"][0]["message"]
    assert message["content"] == "Looking it up." and message["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert text_of(made) == call and completion(request, call) == made  # deterministic ids
    assert text_of(completion(request, '{"resolution": "refund"}')) == '{"resolution": "refund"}'


@needs_sdk
def test_seed_runs_succeed_and_replay_with_zero_drift(runs):
    env = envs.get(ENV)
    assert {t.metadata["family"] for t, _ in runs} == {"damaged", "return", "late", "change"}
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.framework == "openai-agents" and trace.source.benchmark == ENV
        session = Session(result.recording, replay_until=None)
        again = env.run(task, session=session, sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()
        assert session.live == 0 and session.replayed == len(result.recording.calls)


@needs_sdk
def test_the_requests_are_the_sdks_own(runs):
    _, result = next((t, r) for t, r in runs if any(c.agent == "refunds" for c in r.recording.calls))
    calls = result.recording.calls
    assert calls[0].agent == "screen"  # the input guardrail's agent runs before Triage
    assert calls[0].request["response_format"]["json_schema"]["schema"]["title"] == "Screen"
    triage = next(c for c in calls if c.agent == "triage")
    tools = {t["function"]["name"] for t in triage.request["tools"]}
    assert {"verify_customer", "transfer_to_refunds_specialist", "transfer_to_orders_specialist"} <= tools
    specialist = next(c for c in calls if c.agent == "refunds")
    handed = [m for m in specialist.request["messages"] if m.get("role") == "tool" and "Refunds Specialist" in m["content"]]
    assert handed and handed[0]["content"] == '{"assistant": "Refunds Specialist"}'  # the SDK's handoff result


@needs_sdk
def test_steps_map_to_their_calls_and_tool_results_have_none(runs):
    for _, result in runs:
        steps, calls = result.trace.steps, result.recording.calls
        assert len(result.step_calls) == len(steps)
        assert sorted(c for c in result.step_calls if c is not None) == list(range(len(calls)))
        for step, call in zip(steps, result.step_calls):
            if call is None:
                assert step.kind == StepKind.tool_result and step.tool_result
            else:
                assert text_of(calls[call].response) == step.content
        assert steps[0].agent == "Request Screen" and steps[-1].kind == StepKind.final_answer
        handoffs = [s for s in steps if s.metadata.get("handoff")]
        assert all(s.agent == "Triage" and s.kind == StepKind.message for s in handoffs)


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    errors = sum(any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in r.trace.steps)
                 for _, r in runs)
    assert errors >= 2
    env = envs.get(ENV)
    for task, _ in runs[:4]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert not any(s.kind == StepKind.tool_result and s.content.startswith("error") for s in clean.trace.steps)


@needs_sdk
def test_a_changed_request_on_replay_is_drift_not_a_crash(runs):
    env = envs.get(ENV)
    _, result = runs[0]
    with pytest.raises(Drift):
        env.run(env.tasks(0, 12)[1], session=Session(result.recording, replay_until=None), sim=SIM)


@needs_sdk
@pytest.mark.parametrize("mode,rule", [(m, r) for m, rules in MUTATORS.items() for r in rules],
                         ids=lambda v: getattr(v, "__name__", v))
def test_each_rule_of_the_environment_fails_the_task_with_an_exact_label(runs, mode, rule):
    assert_rule_fails_the_task(ENV, runs, mode, rule, SIM)


@needs_sdk
def test_inject_is_byte_identical_in_process_and_in_workers():
    assert_inject_is_byte_identical(ENV)


@needs_sdk
def test_runs_are_captured_as_the_sdks_openinference_spans_and_import(tmp_path):
    pytest.importorskip("openinference.instrumentation.openai_agents")
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
    assert imported.source.framework == "openai-agents"
    # One LLM span per recorded call, each under the agent that made it.
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    names = {"screen": "Request Screen", "triage": "Triage", "refunds": "Refunds Specialist", "orders": "Orders Specialist"}
    assert llm == [names[c.agent] for c in seed_run.recording.calls]
    assert {"Triage", "Request Screen"} <= {a.name for a in imported.agents}
    ran = CliRunner().invoke(cli, ["traces", "import", f"otlp:{seed_file}", "--db", str(tmp_path / "t.db")],
                             catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
