"""The environments: seeds succeed, one step per recorded call, agents act on what they see."""

import re

import pytest

from faultlens.injectors import envs
from faultlens.middleware.model.trace import StepKind
from faultlens.middleware.replay.session import Session

from .conftest import ENVS, SIM


def test_registry_lists_both_environments():
    names = envs.names()
    assert {"research_team", "table_qa"} <= set(names)
    assert envs.get("table_qa").topology == "single" and envs.get("research_team").topology == "multi"
    with pytest.raises(KeyError, match="unknown environment"):
        envs.get("nope")


def test_tasks_are_deterministic_and_have_reference_answers():
    for name in ENVS:
        env = envs.get(name)
        a, b = env.tasks(3, 4), env.tasks(3, 4)
        assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
        assert all(t.reference_answer for t in a)
        assert env.tasks(4, 4)[0].model_dump() != a[0].model_dump()


@pytest.mark.parametrize("name", ENVS)
def test_seed_runs_succeed_with_one_step_per_recorded_call(seed_runs, name):
    runs = seed_runs[name]
    assert sum(r.trace.outcome.success for _, r in runs) == len(runs)
    for _, result in runs:
        assert len(result.trace.steps) == len(result.recording)
        for step, call in zip(result.trace.steps, result.recording.calls):
            assert call.agent == step.agent
            assert (call.kind == "tool") == (step.kind == StepKind.tool_result)
        assert result.trace.steps[-1].kind == StepKind.final_answer


def test_seeds_contain_recovered_mistakes_at_the_noise_rate(seed_runs):
    # table: a crashed or empty first query that is rewritten; research: a retried search or a corrected reading
    recovered = 0
    for _, result in seed_runs["table_qa"]:
        outputs = [s.content for s in result.trace.steps if s.kind == StepKind.tool_result]
        recovered += any("Traceback" in o or o.strip() in ("0", "None") for o in outputs)
    for _, result in seed_runs["research_team"]:
        texts = [s.content for s in result.trace.steps]
        recovered += any(t.startswith("Let me search again") or t.startswith("Corrected:") for t in texts)
    assert recovered >= 1
    # and without noise there are none
    env = envs.get("table_qa")
    for task in env.tasks(5, 4):
        outputs = [s.content for s in env.run(task, sim={"seed": 11, "noise": 0.0}).trace.steps if s.kind == StepKind.tool_result]
        assert not any("Traceback" in o for o in outputs)


def test_simulated_agents_carry_wrong_inputs_forward(seed_runs):
    """Change one search result: the reader reads it, the verifier accepts it (it is in the source), the answer changes."""
    env = envs.get("research_team")
    task, seed = next((t, r) for t, r in seed_runs["research_team"] if t.metadata["question_kind"] == "employees")
    t = max(s.index for s in seed.trace.steps if s.kind == StepKind.tool_result and "employs" in s.content)
    original = seed.trace.steps[t].content
    number = re.search(r"employs ([\d,]+)", original).group(1)
    changed = original.replace(f"employs {number}", "employs 4,321")
    session = Session(seed.recording, replay_until=t, overrides={t: lambda rec: {"output": changed}})
    result = env.run(task, session=session, sim=SIM)
    assert result.answer == "4,321"
    assert not result.trace.outcome.success


def test_real_model_path_uses_the_same_prompts(seed_runs):
    """With --agent-model, the agents' calls go to that litellm model with the environment's prompts."""
    env = envs.get("table_qa")
    task = env.tasks(5, 1)[0]
    import litellm

    seen = []
    original = litellm.completion

    def spy(**kwargs):
        seen.append(kwargs)
        return original(mock_response="Answer: 7", **kwargs)  # litellm's mock_response: no network

    litellm.completion, restore = spy, original
    try:
        result = env.run(task, model="openai/gpt-4o-mini")
    finally:
        litellm.completion = restore
    assert seen[0]["model"] == "openai/gpt-4o-mini"
    assert seen[0]["messages"][0]["content"].startswith("You are the analyst")
    assert "metadata" not in seen[0]  # simulated-agent settings are not sent to real models
    assert result.answer == "7" and result.trace.steps[0].content == "Answer: 7"
    assert result.trace.outcome.success == (task.reference_answer == "7")


def test_an_environment_is_got_without_importing_its_neighbours():
    # A program that runs one environment imports its package alone: not every framework, nor a broken neighbour.
    import ast
    import subprocess
    import sys

    code = ("import sys; from faultlens.injectors.envs import get; get('math_react'); "
            "print(sorted({m.split('.')[3] for m in sys.modules if m.startswith('faultlens.injectors.envs.') and m.count('.') >= 3}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout))
    assert "math_react" in loaded and not loaded & {"ag2_experts", "workflow_team", "supervisor_team", "web_shop"}
