"""examples/rerun_own_agent.py: a LangGraph + litellm team made re-runnable, its failure verified by counterfactual reruns."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultlens.attributors import get
from faultlens.middleware import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import rerun_own_agent as example  # noqa: E402


@pytest.fixture(scope="module")
def failed():
    example.register_toy_model()
    example.desk.run = example.solve
    trace = example.desk.record(example.BASKET)
    assert not trace.outcome.success  # the toy calculator forgets the melons at temperature 0
    return trace


def test_the_recorded_run_has_one_step_per_model_and_tool_call(failed):
    assert [(s.agent, s.kind.value) for s in failed.steps] == [
        ("planner", "llm_call"), ("researcher", "tool_result"), ("researcher", "tool_result"),
        ("researcher", "tool_result"), ("calculator", "llm_call"), ("writer", "final_answer")]
    assert failed.steps[4].content == "Total: 26" and example.right_total(example.BASKET) == 40


def test_counterfactual_verifies_the_calculator_and_records_its_trials(failed, tmp_path, monkeypatch):
    asked: list[str] = []
    real = example.ToyShopModel.completion
    monkeypatch.setattr(example.ToyShopModel, "completion",
                        lambda self, model, messages, *a, **k: asked.append(messages[0]["content"].split(".")[0]) or real(self, model, messages, *a, **k))
    a = get("counterfactual", k=len(failed.steps), mode_from="correction").attribute(failed)
    assert (a.step, a.agent, a.mode, a.details["verified"]) == (4, "calculator", "R.3", True)
    trials = a.details["trials"]
    assert [t["step"] for t in trials] == [0, 1, 2, 3, 4] and [t["success"] for t in trials] == [False] * 4 + [True]
    assert trials[-1]["changed"] is True and trials[-1]["regenerated"] == "Total: 40"
    assert a.cost.reruns == a.details["reruns"] == 5
    # the prefix is replayed: rerunning step 4 asks only the calculator (re-sampled) and the writer (its input changed)
    assert asked[-2:] == ["You are the calculator", "You are the writer"]
    assert asked.count("You are the planner") == 1  # step 0 re-sampled once; never asked again in later trials
    store = open_store(tmp_path / "runs.db")
    store.save_trace(failed)
    store.save_attribution(a)
    [saved] = store.attributions(failed.id)
    assert saved.details["trials"] == trials and saved.cost.reruns == 5
    assert open_store(tmp_path / "runs.db").get_trace(failed.id).metadata["recording"] == failed.metadata["recording"]


def test_the_script_prints_the_verified_step(tmp_path):
    result = CliRunner().invoke(example.main, ["--db", str(tmp_path / "runs.db")])
    assert result.exit_code == 0, result.output
    assert "decisive step: 4 by calculator, mode R.3 (verified; 5 reruns)" in result.output
    assert "rerun with step 4 regenerated: changed=True success=True" in result.output
