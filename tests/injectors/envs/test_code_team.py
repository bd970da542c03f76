"""code_team: the LangGraph team, subprocess tests, hidden tests, caught and carried errors, injection per mode, tracing."""

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.code_team.world import TESTS_MARK, run_tests  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402
from faultlens.middleware.replay.session import Session  # noqa: E402

from .conftest import seed_runs  # noqa: E402

SIM = {"seed": 2, "noise": 0.3, "tendencies": {}}
ENV = "code_team"


@pytest.fixture(scope="module")
def seeds():
    return seed_runs(ENV, SIM, task_seed=0, n=7)


def test_run_tests_reports_passes_failures_and_load_errors():
    code = "def double(x):\n    return x * 2"
    report = run_tests(f"{code}\n{TESTS_MARK}\nexpect('double(2)', 4)\nexpect('double(3)', 7)\nexpect('double(None)', TypeError)")
    assert report.splitlines()[0] == "2 passed, 1 failed"
    assert "FAIL double(3): expected 7, got 6" in report
    broken = run_tests(f"def double(x)\n    return x\n{TESTS_MARK}\nexpect('double(2)', 4)")
    assert broken.startswith("the code does not load: SyntaxError")
    missing = run_tests(f"import fastround\n{TESTS_MARK}\nexpect('1', 1)")
    assert "ModuleNotFoundError" in missing


def test_tasks_are_deterministic_with_hidden_tests():
    env = envs.get(ENV)
    a, b = env.tasks(0, 5), env.tasks(0, 5)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert len({t.metadata["family"] for t in a}) == 5
    for task in a:
        # the reference implementation passes its own hidden tests; an empty answer does not
        assert env.evaluate(task, task.reference_answer).success
        assert not env.evaluate(task, None).success


def test_hidden_tests_catch_a_wrong_boundary():
    env = envs.get(ENV)
    task = next(t for t in env.tasks(0, 10) if t.metadata["family"] == "grade")
    wrong = task.reference_answer.replace(">=", ">") if ">=" in task.reference_answer else task.reference_answer.replace(">", ">=")
    outcome = env.evaluate(task, wrong)
    assert not outcome.success and "failed" in outcome.detail and 0 < outcome.score < 1


def test_seed_runs_succeed_with_one_step_per_call_and_replay_exactly(seeds):
    env = envs.get(ENV)
    for task, result in seeds:
        assert result.trace.outcome.success, result.trace.outcome.detail
        assert len(result.trace.steps) == len(result.recording)
        assert [s.agent for s in result.trace.steps if s.kind != StepKind.tool_result][-1] == "architect"
        assert result.trace.steps[-1].kind == StepKind.final_answer
        assert any(s.kind == StepKind.plan and s.agent == "architect" for s in result.trace.steps)
        replay = env.run(task, session=Session(result.recording, replay_until=None), sim=SIM, trace_id=result.trace.id)
        assert replay.trace.model_dump() == result.trace.model_dump()
    assert len({len(r.trace.steps) for _, r in seeds}) >= 3


def test_the_tester_catches_a_coder_slip_and_the_next_version_fixes_it(seeds):
    caught = [r for _, r in seeds if any(s.agent == "tester" and " fails " in s.content for s in r.trace.steps)]
    assert caught, "no seed had a first version with a slip"
    for result in caught:
        versions = [s for s in result.trace.steps if s.agent == "coder" and s.content.startswith("Version ")]
        assert len(versions) == 2 and versions[0].content != versions[1].content
        assert result.trace.steps[-1].content == "Submit version 2."


def test_a_design_error_passes_the_team_tests_and_fails_the_hidden_ones(seeds):
    env = envs.get(ENV)
    task, seed = next((t, r) for t, r in seeds if t.metadata["family"] == "grade")
    design = next(s for s in seed.trace.steps if s.kind == StepKind.plan)
    changed = design.content.replace("- invalid: score < 0 or score > 100 raises ValueError\n", "")
    assert changed != design.content
    result = env.run(task, session=Session(seed.recording, replay_until=design.index,
                                           overrides={design.index: lambda rec: {"content": changed}}), sim=SIM)
    assert any("Approved" in s.content for s in result.trace.steps if s.agent == "tester")
    assert not result.trace.outcome.success and "failed" in result.trace.outcome.detail


def test_a_failing_last_round_submits_nothing():
    """An unrecoverable test failure: the architect submits nothing and the graph ends (no loop)."""
    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]
    seed = env.run(task, sim=SIM)
    t = next(s.index for s in seed.trace.steps if s.kind == StepKind.tool_result and s.tool_name == "run_tests")
    session = Session(seed.recording, replay_until=t, overrides={t: lambda rec: {"output": "0 passed, 5 failed\nFAIL x: expected 1, got 2"}})
    result = env.run(task, session=session, sim=SIM)
    assert result.trace.steps[-1].agent == "architect"
    if "Submit version" not in result.trace.steps[-1].content:
        assert result.answer is None and not result.trace.outcome.success


@pytest.mark.slow
def test_every_applicable_mode_is_generated_and_fails_the_task_or_is_filtered(seeds, every_mode):
    tried, kept = every_mode(ENV, seeds, SIM)
    assert {"R.2", "R.3", "R.4", "PL.1", "PL.2", "PL.3", "A.3", "A.4", "A.5", "V.2", "V.3", "C.1", "C.2", "C.3"} <= tried
    assert {"R.4", "PL.1", "PL.2", "PL.3", "A.5", "C.3"} <= set(kept), kept


def test_langgraph_run_is_traced_through_the_instrumentation(tmp_path):
    """With a tracer, the graph's nodes are recorded by the LangGraph callback handler, one agent per node."""
    from faultlens.middleware.capture.tracer import Tracer

    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]
    tracer = Tracer(db=tmp_path / "traces.db", env_exporters=False)
    result = env.run(task, sim=SIM, tracer=tracer)
    tracer.force_flush()
    assert result.trace.outcome.success
    stored = [tracer.store.get_trace(t.id) for t in tracer.store.list_traces()]
    assert len(stored) == 1
    agents = {s.agent for s in stored[0].steps}
    assert {"architect", "coder", "tester"} <= agents
    # the recorded run is the same with and without the tracer (record/replay stays exact)
    plain = env.run(task, sim=SIM)
    assert [s.content for s in plain.trace.steps] == [s.content for s in result.trace.steps]


def test_real_model_path_gets_the_role_prompts():
    import litellm

    env = envs.get(ENV)
    task = env.tasks(0, 1)[0]
    seen = []
    original = litellm.completion

    def spy(**kwargs):
        seen.append(kwargs)
        return original(mock_response="Submit version 1.", **kwargs)  # litellm's mock_response: no network

    litellm.completion = spy
    try:
        result = env.run(task, model="openai/gpt-4o-mini")
    finally:
        litellm.completion = original
    firsts = {call["messages"][0]["content"].split(",")[0] for call in seen}
    assert any(f.startswith("You are the architect") for f in firsts) and any(f.startswith("You are the coder") for f in firsts)
    assert all("metadata" not in call for call in seen)
    # the mock never writes code, so nothing passes the hidden tests
    assert not result.trace.outcome.success
