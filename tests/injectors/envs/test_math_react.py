"""math_react: tools, evaluator, seeds under simulated agents, errors carried forward or caught, injection per mode."""

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.math_react.env import same_answer  # noqa: E402
from faultlens.injectors.envs.math_react.world import calculate, convert  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Session  # noqa: E402

from .conftest import seed_runs  # noqa: E402

SIM = {"seed": 4, "noise": 0.3, "tendencies": {}}
ENV = "math_react"


@pytest.fixture(scope="module")
def seeds():
    return seed_runs(ENV, SIM, task_seed=2, n=8)


def test_tools_are_deterministic_functions_of_their_argument():
    assert convert("12 ft to m", None) == "12 ft = 3.6576 m"
    assert convert("212 F to C", None) == "212 F = 100 C"
    assert convert("3 gal to kg", None).startswith("Cannot convert gal to kg")
    assert convert("3 ft to mtr", None).startswith("Unknown unit 'mtr'")
    assert convert("twelve feet", None).startswith("Cannot parse")
    assert calculate("(2 + 3) * 4 / 8", None) == "2.5"
    assert calculate("2 x 3", None).startswith("Cannot evaluate")
    assert calculate("1 / 0", None).startswith("Cannot evaluate")


def test_evaluator_needs_the_unit_and_the_value():
    assert same_answer("12.34 L", "12.34 L") and same_answer("12.345 L", "12.34 L")
    assert not same_answer("12.34 mL", "12.34 L")
    assert not same_answer("12.50 L", "12.34 L")
    assert not same_answer("about 12.34 L", "12.34 L")
    assert not same_answer("12.34", "12.34 L")


def test_tasks_are_deterministic_and_varied():
    env = envs.get(ENV)
    a, b = env.tasks(2, 7), env.tasks(2, 7)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert len({t.metadata["family"] for t in a}) == 7
    assert env.tasks(3, 1)[0].query != a[0].query


def test_seed_runs_succeed_with_one_step_per_call_and_replay_exactly(seeds):
    env = envs.get(ENV)
    lengths = set()
    for task, result in seeds:
        assert result.trace.outcome.success, result.trace.outcome.detail
        assert len(result.trace.steps) == len(result.recording)
        first = result.trace.steps[0]
        assert first.kind == StepKind.plan or (first.kind == StepKind.message and first.content.startswith("Known:"))
        assert any(s.kind == StepKind.plan for s in result.trace.steps) and result.trace.steps[-1].kind == StepKind.final_answer
        replay = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=result.trace.id)
        assert replay.trace.model_dump() == result.trace.model_dump()
        lengths.add(len(result.trace.steps))
    assert len(lengths) >= 3  # trace shapes vary (notes, checks, retries, 2-5 tool calls)


def test_seeds_carry_recovered_mistakes_and_checks(seeds):
    texts = [s.content for _, r in seeds for s in r.trace.steps]
    assert any(t.startswith("Cannot evaluate") or t.startswith("Unknown unit") for t in texts)  # a retried tool call
    assert any(t.startswith("Check:") for t in texts)
    assert any(t.startswith("Note:") for t in texts)
    assert any(t.startswith("Known:") for t in texts) and any(r.trace.steps[0].kind == StepKind.plan for _, r in seeds)


def _first(seeds, predicate):
    for task, result in seeds:
        for step in result.trace.steps:
            if predicate(step):
                return task, result, step.index
    raise AssertionError("no such step in the seeds")


def test_a_wrong_tool_output_is_carried_forward(seeds):
    env = envs.get(ENV)
    task, seed, t = _first(seeds, lambda s: s.kind == StepKind.tool_result and " = " in s.content)
    value = seed.trace.steps[t].content.rsplit(" = ", 1)[1].split(" ")[0]
    changed = seed.trace.steps[t].content.replace(f"= {value} ", f"= {float(value) * 3:.4f} ")
    result = env.run(task, session=Session(seed.recording, replay_until=t, overrides={t: lambda rec: {"output": changed}}), sim=SIM)
    assert not result.trace.outcome.success
    assert any(f"{float(value) * 3:.4f}" in s.content for s in result.trace.steps[t + 1:] if s.kind == StepKind.tool_call)


def test_the_check_catches_a_misnoted_value(seeds):
    """A note changed after the fact is caught by the check, which recomputes from the tools' outputs."""
    env = envs.get(ENV)
    caught = 0
    for task, seed in seeds:
        steps = seed.trace.steps
        checks = [s for s in steps if s.content.startswith("Check:")]
        notes = [s for s in steps if s.content.startswith("Note:")]
        if not checks or not notes:
            continue
        last_calc = checks[0].content.split("Action: calculate\n", 1)[-1]
        feeding = [n for n in notes if n.content.split(" = ")[1] in last_calc]
        if not feeding:
            continue
        note = feeding[-1]
        name, value = note.content[6:].split(" = ")
        wrong = f"Note: {name} = {float(value) + 7:.4f}"
        result = env.run(task, session=Session(seed.recording, replay_until=note.index,
                                                overrides={note.index: lambda rec: {"content": wrong}}), sim=SIM)
        if result.trace.outcome.success and any("The check gives" in s.content for s in result.trace.steps):
            caught += 1
    assert caught >= 1


@pytest.mark.slow
def test_every_applicable_mode_is_generated_and_fails_the_task_or_is_filtered(seeds, every_mode):
    """Inject each applicable mode at the first step it fits: the run fails (kept) or succeeds (filtered), never drifts."""
    tried, kept = every_mode(ENV, seeds[:4], SIM)
    single_agent_modes = {"R.1", "R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.1", "A.2", "A.3", "A.4", "A.5", "A.6", "V.1", "V.3"}
    assert single_agent_modes <= tried
    assert len(kept) >= 10, kept


def test_real_model_path_gets_the_solver_prompt():
    """With a real model, the calls carry the environment's prompt (litellm's mock_response: no network)."""
    import litellm

    env = envs.get(ENV)
    task = env.tasks(2, 1)[0]
    seen = []
    original = litellm.completion

    def spy(**kwargs):
        seen.append(kwargs)
        return original(mock_response=f"Answer: {task.reference_answer}", **kwargs)

    litellm.completion = spy
    try:
        result = env.run(task, model="openai/gpt-4o-mini")
    finally:
        litellm.completion = original
    assert seen[0]["messages"][0]["content"].startswith("You are the solver")
    assert "metadata" not in seen[0]
    assert result.trace.outcome.success and result.trace.steps[0].kind == StepKind.final_answer
