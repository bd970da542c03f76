"""`ag2_experts`: real AG2 code (group chat, auto speaker selection, code executor) on simulated experts.

Skipped when the `frameworks` extra (AG2) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("autogen", reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")

from .conftest import captured_seed  # noqa: E402
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.base import stable_seed  # noqa: E402
from faultlens.injectors.generators import Generated, TemplateGenerator, gen_input  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, candidates, inject, inject_one  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Drift, Session  # noqa: E402

SIM = {"seed": 3, "noise": 0.3, "tendencies": {}}
ENV = "ag2_experts"


@pytest.fixture(scope="module")
def runs():
    env = envs.get(ENV)
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(0, 5)]


def test_listed_only_with_frameworks_so_the_bundled_benchmark_is_unchanged():
    assert ENV not in envs.names()
    assert ENV in envs.names(include_frameworks=True)
    assert envs.get(ENV).framework == "ag2"


def test_seed_runs_succeed_and_replay_exactly(runs):
    env = envs.get(ENV)
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.framework == "ag2" and trace.source.benchmark == ENV
        again = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=trace.id)
        assert again.trace.model_dump() == trace.model_dump()
        pairs = lambda rec: [(c.agent, c.request, c.response) for c in rec.calls]  # noqa: E731
        assert pairs(again.recording) == pairs(result.recording)


def test_the_requests_are_the_frameworks_own(runs):
    _, result = runs[0]
    first = result.recording[0]
    assert first.agent == "chat_manager"
    messages = first.request["messages"]
    assert messages[0]["content"].startswith("You are in a role play game")
    assert messages[-1]["name"] == "checking_agent"
    expert = next(c for c in result.recording.calls if c.agent == "planner")
    assert expert.request["messages"][0]["content"].startswith("You are the planner")
    assert expert.response["object"] == "chat.completion"


def test_steps_map_to_their_calls_and_control_calls_are_no_steps(runs):
    for _, result in runs:
        steps, calls = result.trace.steps, result.recording.calls
        assert len(result.step_calls) == len(steps)
        for step, call in zip(steps, result.step_calls):
            if step.agent == "executor":
                assert call is None and step.kind == StepKind.tool_result
            else:
                assert calls[call].agent == step.agent
                text = calls[call].response["choices"][0]["message"]["content"]
                assert text == step.content
        mapped = {c for c in result.step_calls if c is not None}
        assert all(c.agent == "chat_manager" for c in calls if c.index not in mapped)
        assert steps[0].kind == StepKind.plan and steps[-1].kind == StepKind.final_answer


def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    crashed = sum(any(s.agent == "executor" and "exitcode: 1" in s.content for s in r.trace.steps) for _, r in runs)
    requeried = sum(any("more than one name" in str(m.get("content")) for c in r.recording.calls
                        for m in c.request["messages"]) for _, r in runs)
    assert crashed + requeried >= 1
    env = envs.get(ENV)
    clean = env.run(runs[0][0], sim=dict(SIM, noise=0.0))
    assert clean.trace.outcome.success and not any("exitcode: 1" in s.content for s in clean.trace.steps)


def test_only_steps_with_a_call_are_candidates(runs):
    _, result = runs[0]
    injectable = {t for t, c in enumerate(result.step_calls) if c is not None}
    queues = candidates(result.trace, random.Random(0), 0, injectable=injectable)
    offered = {t for steps in queues.values() for t in steps}
    assert offered and offered <= injectable
    assert all(result.trace.steps[t].agent != "executor" for t in offered)


def test_a_changed_request_on_replay_is_drift_not_a_crash(runs):
    task, result = runs[0]
    other = envs.get(ENV).tasks(0, 5)[1]
    with pytest.raises(Drift):
        envs.get(ENV).run(other, session=Session(result.recording, replay_until=None), sim=SIM)


def test_an_injected_plan_error_fails_the_task_with_an_exact_label(runs):
    env = envs.get(ENV)
    task, result = runs[0]
    inp = gen_input(result.trace, 0, "R.4", random.Random(1), env)
    generated = TemplateGenerator().generate(inp)
    assert generated is not None and generated.text != result.trace.steps[0].content
    attempt = inject_one(env, result.trace, result.recording, 0, "R.4", generated, model=None, sim=SIM,
                         trace_id="x", step_calls=result.step_calls)
    assert attempt.status == "kept", attempt.reason
    trace = attempt.trace
    assert not trace.outcome.success
    assert trace.gold.agent == "planner" and trace.gold.step == 0 and trace.gold.mode == "R.4"
    assert trace.steps[0].content == generated.text
    # the calls before the injected one were replayed, the rest ran live on the same simulated experts
    assert trace.metadata["injection"]["replayed_calls"] == result.step_calls[0]


def test_an_error_in_the_coders_code_is_caught_or_fails_the_task(runs):
    env = envs.get(ENV)
    task, result = runs[1]
    t = next(i for i, s in enumerate(result.trace.steps) if s.agent == "coder")
    code = result.trace.steps[t].content
    broken = code.replace("print(", "print(1 + ", 1)
    attempt = inject_one(env, result.trace, result.recording, t, "R.3", Generated(broken, "adds one"), model=None,
                         sim=SIM, trace_id="y", step_calls=result.step_calls)
    assert attempt.status == "kept"
    executed = [s for s in attempt.trace.steps[t + 1:] if s.agent == "executor"]
    assert executed and "exitcode: 0" in executed[0].content


def test_inject_is_deterministic_and_keeps_failures(tmp_path):
    # In-process (workers=1): worker processes would each import AG2 first, several times the cost of the runs;
    # that results come back in seed order whatever the scheduling is the pipeline's own test.
    config = InjectConfig(envs=[ENV], seeds=3, per_seed=3, seed=1, workers=1)
    a, b = inject(config), inject(config)
    dump = lambda r: "\n".join(t.model_dump_json() for t in r.traces)  # noqa: E731
    assert dump(a).encode() == dump(b).encode()
    assert a.traces and all(not t.outcome.success and t.gold is not None for t in a.traces)
    assert all(s.seed_success for s in a.seeds)


def test_runs_are_captured_as_the_frameworks_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.ag2")
    # The OpenAI instrumentation's LLM spans are the recorded calls, in order, answer for answer.
    llm = [s.content for s in imported.steps if s.kind == StepKind.llm_call]
    recorded = [c.response["choices"][0]["message"]["content"] for c in seed_run.recording.calls]
    assert llm == recorded
    # AG2's own AGENT spans name the experts
    assert {"planner", "coder"} <= {a.name for a in imported.agents}


def test_the_native_log_is_ag2s_saved_chat_state_and_replays_identically(runs):
    import json

    from autogen import GroupChatManager

    env = envs.get(ENV)
    task, result = runs[0]
    lines = result.native_log.splitlines()
    messages = [json.loads(line) for line in lines]
    # AG2's own serialisation of the chat, one message a line: what GroupChatManager resumes from.
    assert GroupChatManager.messages_from_string(None, "[" + ",".join(lines) + "]") == messages
    assert messages[0] == {"content": task.query, "role": "user", "name": "executor"}
    assert [(m["name"], m["content"]) for m in messages[1:]] == [(s.agent, s.content) for s in result.trace.steps]
    again = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=result.trace.id)
    assert again.native_log == result.native_log


def test_the_executor_runs_code_in_an_isolated_interpreter():
    import subprocess

    from faultlens.injectors.envs.ag2_experts.env import _interpreter_dir

    shim = _interpreter_dir() / "python"
    out = subprocess.run([str(shim), "-c", "import sys; print(sys.flags.isolated, sys.flags.no_site)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]


from faultlens.injectors.envs.ag2_experts.mistakes import MUTATORS  # noqa: E402


@pytest.mark.parametrize("mode", sorted(MUTATORS))
def test_each_env_rule_makes_the_task_fail(runs, mode):
    """Every rule of the environment, wherever it applies in the seed runs (one family each), fails the task."""
    env = envs.get(ENV)
    tried = 0
    for task, result in runs:
        for t, call in enumerate(result.step_calls):
            if call is None:
                continue
            inp = gen_input(result.trace, t, mode, random.Random(stable_seed(mode, t)), env)
            for rule in MUTATORS[mode]:
                generated = rule(inp)
                if generated is None:
                    continue
                attempt = inject_one(env, result.trace, result.recording, t, mode, generated, model=None, sim=SIM,
                                     trace_id=f"{task.id}-{mode}", step_calls=result.step_calls)
                assert attempt.status == "kept", (mode, rule.__name__, task.metadata["family"], attempt.reason)
                assert attempt.trace.gold.mode == mode and attempt.trace.gold.step == t
                assert attempt.trace.steps[t].content == generated.text
                tried += 1
    assert tried >= 2, f"{mode}: the rules applied to fewer than two steps of five seed runs"


def test_every_mean_above_task_has_a_reading_above_its_threshold():
    """A draw with no reading above the threshold had no answer (ZeroDivisionError in answer_of); it is drawn again."""
    import random

    from faultlens.injectors.envs.ag2_experts.tasks import answer_of, make_task

    for seed in range(3000):
        _, spec = make_task(random.Random(seed), "mean_above")
        assert any(r > spec.values[0] for r in spec.data), seed
        float(answer_of(spec))
