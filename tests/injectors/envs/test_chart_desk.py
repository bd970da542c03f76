"""`chart_desk`: real PydanticAI code (agents as tools, a structured output, an image in a tool return) on simulated agents.

The tests that run the team skip when the `frameworks` extra (pydantic-ai-slim) is
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
from faultlens.injectors.envs.chart_desk.mistakes import MUTATORS  # noqa: E402
from faultlens.injectors.envs.chart_desk.world import FAMILIES, make_task  # noqa: E402
from faultlens.injectors.envs.agents_desk.wire import text_of  # noqa: E402
from faultlens.injectors.envs.base import stable_seed  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Drift, Session  # noqa: E402

ENV = "chart_desk"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("pydantic_ai") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    env = envs.get(ENV)
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(0, 12)]


def test_listed_only_with_frameworks_and_an_image_environment():
    assert ENV not in envs.names()
    assert ENV in envs.names(include_frameworks=True)
    env = envs.get(ENV)
    assert env.framework == "pydantic-ai" and env.modality == "image"
    assert not {"P.1", "P.2", "P.3"} & set(env.not_applicable)  # the reader reads an image


def test_tasks_are_deterministic_cover_every_family_and_are_not_chart_qas():
    tasks = envs.get(ENV).tasks(0, 18)
    assert [t.model_dump() for t in tasks] == [make_task(0, i).model_dump() for i in range(18)]
    assert {t.metadata["family"] for t in tasks} == set(FAMILIES)
    assert all(t.id.startswith("chart_desk-") and t.reference_answer for t in tasks)
    qa = envs.get("chart_qa").tasks(0, 18)
    assert [t.metadata["series"] for t in tasks] != [t.metadata["series"] for t in qa]


def test_without_pydantic_ai_a_run_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)  # as if not installed
    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]  # tasks need no framework
    with pytest.raises(RuntimeError, match=r"faultlens\[frameworks\]"):
        env.run(task, sim={"seed": 0, "noise": 0.0})


@needs_sdk
def test_seed_runs_succeed_and_replay_with_zero_drift(runs):
    env = envs.get(ENV)
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.framework == "pydantic-ai" and trace.source.benchmark == ENV
        session = Session(result.recording, replay_until=None)
        again = env.run(task, session=session, sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()
        assert session.live == 0 and session.replayed == len(result.recording.calls)


@needs_sdk
def test_the_reader_is_sent_the_chart_image_by_pydantic_ai(runs):
    _, result = runs[1]
    calls = result.recording.calls
    assert calls[0].agent == "lead"
    tools = {t["function"]["name"] for t in calls[0].request["tools"]}
    assert tools == {"ask_chart_reader", "ask_calculator", "final_result"}  # agents as tools and the output tool
    reading = next(c for c in calls if c.agent == "reader" and c.response["choices"][0]["message"].get("tool_calls") is None)
    parts = [p for m in reading.request["messages"] if isinstance(m.get("content"), list) for p in m["content"]]
    assert any(p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,") for p in parts)
    # The image in the request is the image the trace carries with the reading.
    step = next(s for s in result.trace.steps if s.agent == "chart_reader" and s.kind == StepKind.message)
    url = next(p["image_url"]["url"] for p in parts if p.get("type") == "image_url")
    assert step.media and url.endswith(step.media[0].data)


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
        assert steps[0].agent == "lead" and steps[0].kind == StepKind.plan and steps[-1].kind == StepKind.final_answer
        readings = [s for s in steps if s.agent == "chart_reader" and s.kind == StepKind.message]
        assert readings and all(s.media and s.media[0].mime_type == "image/png" for s in readings)


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    rereads = sum(any("zoom on" in s.content for s in r.trace.steps if s.agent == "lead") for _, r in runs)
    retries = sum(any(s.kind == StepKind.tool_result and s.content.startswith(("error", "Cannot")) for s in r.trace.steps)
                  for _, r in runs)
    assert rereads + retries >= 2
    env = envs.get(ENV)
    for task, _ in runs[:4]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert not any("zoom on" in s.content for s in clean.trace.steps)


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
    assert_rule_fails_the_task(ENV, runs, mode, rule, SIM, tries=8)


@needs_sdk
def test_perception_modes_are_offered_where_the_reader_reads_the_image_and_nowhere_else(runs):
    from faultlens.injectors.applicability import applicable_modes

    for _, result in runs:
        trace = result.trace
        for step, call in zip(trace.steps, result.step_calls):
            perceptive = {"P.1", "P.2", "P.3"} & set(applicable_modes(step, trace))
            if call is not None and step.agent == "chart_reader" and step.kind == StepKind.message:
                assert perceptive == {"P.1", "P.2", "P.3"}
            elif step.agent == "lead":
                assert not perceptive
            assert not set(applicable_modes(step, trace)) & set(envs.get(ENV).not_applicable)


@needs_sdk
def test_inject_is_byte_identical_in_process_and_in_workers():
    assert_inject_is_byte_identical(ENV)


@needs_sdk
def test_runs_are_captured_as_pydantic_ais_openinference_spans_and_import(tmp_path):
    pytest.importorskip("openinference.instrumentation.pydantic_ai")
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
    assert imported.source.framework == "pydantic-ai"
    # One LLM span per recorded call, each under the agent that made it.
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    names = {"lead": "lead", "reader": "chart_reader", "calculator": "calculator"}
    assert llm == [names[c.agent] for c in seed_run.recording.calls]
    ran = CliRunner().invoke(cli, ["traces", "import", f"otlp:{seed_file}", "--db", str(tmp_path / "t.db")],
                             catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
