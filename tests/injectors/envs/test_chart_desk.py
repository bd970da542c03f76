"""`chart_desk`: real PydanticAI code (agents as tools, a structured output, an image in a tool return) on simulated agents.

The tests that run the team skip when the `frameworks` extra (pydantic-ai-slim) is
not installed; `make test` installs it.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import captured_seed, seed_runs  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.chart_desk.world import FAMILIES, make_task  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "chart_desk"
SIM = {"seed": 5, "noise": 0.3, "tendencies": {}}
needs_sdk = pytest.mark.skipif(importlib.util.find_spec("pydantic_ai") is None,
                               reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")


@pytest.fixture(scope="module")
def runs():
    return seed_runs(ENV, SIM, 0, 12)  # shared with test_framework_envs


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
def test_the_lead_plans_and_every_reading_carries_the_chart_image(runs):
    for _, result in runs:
        steps = result.trace.steps
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
def test_runs_are_captured_as_pydantic_ais_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.pydantic_ai")
    assert imported.source.framework == "pydantic-ai"
    # One LLM span per recorded call, each under the agent that made it.
    llm = [s.agent for s in imported.steps if s.kind == StepKind.llm_call]
    names = {"lead": "lead", "reader": "chart_reader", "calculator": "calculator"}
    assert llm == [names[c.agent] for c in seed_run.recording.calls]
