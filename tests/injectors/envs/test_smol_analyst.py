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
from faultlens.injectors.applicability import applicable_modes  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Drift, Session  # noqa: E402

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


def test_requests_are_smolagents_own_and_steps_interleave_as_they_happen(clean_total):
    _, result = clean_total
    first = result.recording[0]
    assert first.agent == "analyst" and first.request["stop"] == ["<end_plan>"]
    action = result.recording[1]
    assert action.request["stop"] == ["Observation:", "Calling tools:", "</code>"]
    assert first.request["messages"][0]["content"][0]["type"] == "text"  # list-of-parts content
    sub = next(c for c in result.recording.calls if c.agent == "data_agent")
    assert "You're a helpful agent named 'data_agent'" in sub.request["messages"][1]["content"][0]["text"]
    agents = [s.agent for s in result.trace.steps]
    # smolagents' planning step, the delegation, the managed agent's steps, the analyst's observation of its report,
    # its check of the report (a python_interpreter call and its observation), then the answer
    assert result.trace.steps[0].kind == StepKind.plan and "## 2. Plan" in result.trace.steps[0].content
    assert "write the facts survey" in first.request["messages"][-1]["content"][0]["text"]
    assert agents[:3] == ["analyst", "analyst", "data_agent"] and agents[-4:] == ["analyst"] * 4
    report, check, checked, answer = result.trace.steps[-4:]
    assert report.kind == StepKind.tool_result and "managed agent 'data_agent'" in report.content
    assert check.kind == StepKind.tool_call and check.tool_name == "python_interpreter" and "= [" in check.content
    assert checked.kind == StepKind.tool_result and "6 months" in checked.content
    assert answer.kind == StepKind.final_answer and "final_answer(result)" in answer.content
    lookup = next(s for s in result.trace.steps if s.agent == "data_agent")
    assert lookup.kind == StepKind.tool_call and lookup.tool_name == "lookup_sales"
    for step, call in zip(result.trace.steps, result.step_calls):
        assert (call is None) == (step.kind == StepKind.tool_result)
        if call is not None:
            assert result.recording[call].agent == step.agent


def test_seeds_hold_recovered_mistakes(runs):
    retried = sum(any("unknown region" in s.content for s in r.trace.steps) for _, r in runs)
    rewritten = sum(any("Error:" in s.content for s in r.trace.steps if s.kind == StepKind.tool_result) for _, r in runs)
    assert retried >= 1 and rewritten >= 1


def test_no_noise_no_mistake():
    env = envs.get(ENV)
    for task in env.tasks(0, 3):
        steps = env.run(task, sim=dict(SIM, noise=0.0)).trace.steps
        assert not any("unknown region" in s.content or "Error:" in s.content for s in steps)
        assert len(steps) == 9


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


def test_inject_is_deterministic_and_captures_openinference_spans_and_native_logs(tmp_path):
    pytest.importorskip("openinference.instrumentation.smolagents")
    from faultlens.middleware.otlp.convert import read_otlp_file

    config = InjectConfig(envs=[ENV], seeds=3, per_seed=2, seed=1, workers=1, otlp_dir=str(tmp_path / "a"),
                          native_log_dir=str(tmp_path / "na"))
    # another process (workers=2) with another string-hash seed: the same traces and native logs, byte for byte
    a, b = inject(config), inject(InjectConfig(envs=[ENV], seeds=3, per_seed=2, seed=1, workers=2,
                                               native_log_dir=str(tmp_path / "nb")))
    assert [t.model_dump_json() for t in a.traces] == [t.model_dump_json() for t in b.traces]
    assert a.traces and all(not t.outcome.success for t in a.traces)
    tasks = envs.get(ENV).tasks(1, 3)
    (imported,) = list(read_otlp_file(tmp_path / "a" / f"{tasks[0].id}-seed.json"))
    seed = envs.get(ENV).run(tasks[0], sim={"seed": stable_seed(1, ENV, 0), "noise": 0.2, "tendencies": {}})
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert len(llm) == len(seed.recording)
    # one native log per run, seed and injected runs alike, named like the OTLP files
    names = sorted(p.name for p in (tmp_path / "na").iterdir())
    attempts = [x for s in a.seeds for x in s.attempts]
    assert names == sorted([f"{t.id}-seed.jsonl" for t in tasks] + [f"{x.task_id}-t{x.t}-{x.mode}.jsonl" for x in attempts])
    assert names == sorted(p.name for p in (tmp_path / "nb").iterdir())
    for name in names:
        assert (tmp_path / "na" / name).read_bytes() == (tmp_path / "nb" / name).read_bytes(), name
    assert (tmp_path / "na" / f"{tasks[0].id}-seed.jsonl").read_text() == seed.native_log


def test_cli_native_log_option(tmp_path):
    from click.testing import CliRunner

    from faultlens.injectors.cli import inject as inject_cmd

    out = CliRunner().invoke(inject_cmd, ["--env", ENV, "--seeds", "1", "--per-seed", "1", "--seed", "4", "--workers", "1",
                                          "--out", str(tmp_path / "a.jsonl"), "--native-log", str(tmp_path / "logs")])
    assert out.exit_code == 0, out.output
    task = envs.get(ENV).tasks(4, 1)[0]
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert f"{task.id}-seed.jsonl" in names and len(names) == 2

# The agent whose step each environment rule rewrites.
RULE_AGENT = {"R.1": "analyst", "R.2": "analyst", "R.3": "analyst", "R.4": "analyst", "PL.1": "analyst",
              "A.1": "data_agent", "A.2": "data_agent", "A.3": "data_agent", "A.4": "analyst", "A.5": "analyst",
              "V.1": "analyst", "V.2": "analyst", "C.1": "analyst", "C.2": "data_agent", "C.3": "analyst"}


@pytest.fixture(scope="module")
def clean_total():
    """A noise-free seed of a two-region 'combined sales' task (every rule has a step there)."""
    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]
    assert task.metadata["family"] == "total"
    return task, env.run(task, sim=dict(SIM, noise=0.0), trace_id=f"{task.id}-seed")


def test_every_environment_rule_fails_the_task(clean_total):
    from faultlens.injectors.envs.smol_analyst.mistakes import MUTATORS

    assert len(MUTATORS) >= 12 and set(MUTATORS) == set(RULE_AGENT)
    assert not set(MUTATORS) & set(envs.get(ENV).not_applicable)
    env = envs.get(ENV)
    task, result = clean_total
    sim = dict(SIM, noise=0.0)
    for mode, rules in MUTATORS.items():
        made = [(t, out) for t, step in enumerate(result.trace.steps) if result.step_calls[t] is not None
                and mode in applicable_modes(step, result.trace)
                for out in [rules[0](gen_input(result.trace, t, mode, random.Random(t), env))] if out is not None]
        assert made, f"{mode}: the rule rewrites no step of the seed"
        t, generated = made[0]
        attempt = inject_one(env, result.trace, result.recording, t, mode, generated, model=None, sim=sim,
                             trace_id=f"rule-{mode}", step_calls=result.step_calls)
        assert attempt.status == "kept", (mode, attempt.status, generated.text)
        assert not attempt.trace.outcome.success
        assert (attempt.trace.gold.agent, attempt.trace.gold.step, attempt.trace.gold.mode) == (RULE_AGENT[mode], t, mode)
        assert attempt.trace.steps[t].content == generated.text


def test_a_repeated_action_is_recovered_so_a6_is_not_applicable(clean_total):
    env = envs.get(ENV)
    task, result = clean_total
    t = next(i for i, s in enumerate(result.trace.steps) if s.agent == "data_agent" and s.kind == StepKind.message)
    repeat = next(s.content for s in result.trace.steps[:t] if s.agent == "data_agent" and s.kind == StepKind.tool_call)
    from faultlens.injectors.generators import Generated

    attempt = inject_one(env, result.trace, result.recording, t, "A.6", Generated(repeat, "repeats its look-up"),
                         model=None, sim=dict(SIM, noise=0.0), trace_id="a6", step_calls=result.step_calls)
    assert attempt.status == "succeeded" and "A.6" in env.not_applicable


def test_native_log_is_smolagents_memory_in_order(runs):
    import json

    _, result = runs[0]
    lines = [json.loads(line) for line in result.native_log.splitlines()]
    assert lines[0]["type"] == "TaskStep" and lines[0]["task"] == runs[0][0].query
    steps = lines[1:]
    assert {line["type"] for line in steps} == {"ActionStep", "PlanningStep"}
    assert not any("timing" in line for line in lines)
    # each memory step is one recorded model call; per agent in the order of its calls (steps are logged as they
    # finish, so the analyst's delegation comes after the data agent's steps it waited for)
    for agent in ("analyst", "data_agent"):
        logged = [line["model_output_message"]["content"] for line in steps if line["agent"] == agent]
        assert logged == [c.response["choices"][0]["message"]["content"] for c in result.recording.calls if c.agent == agent]
    assert len(steps) == len(result.recording.calls)
    assert steps[-1]["is_final_answer"] and str(steps[-1]["action_output"]) == runs[0][0].reference_answer

