"""examples/langgraph_self_improve.py: arms run, results are deterministic, --model routes to a real (here: test double) model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import litellm
import pytest
from click.testing import CliRunner
from litellm import CustomLLM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import langgraph_self_improve as example  # noqa: E402


def test_an_arm_is_deterministic_and_learns_lessons():
    first = example.run_arm("attribution", 0, 2, 4, model=None, attributor="heuristic", reflector=None)
    again = example.run_arm("attribution", 0, 2, 4, model=None, attributor="heuristic", reflector=None)
    assert first == again and len(first) == 2 and all(0 <= r <= 1 for r in first)


def test_the_oracle_attributor_uses_the_gold_label():
    from faultlens.injectors.envs import get

    env = get("research_desk")
    task = env.tasks(2, 1)[0]
    trace = env.run(task, sim={"seed": 3, "tendencies": {"analyst": {"R.3": 1.0}, "reviewer": {"V.2": 1.0}}}).trace
    attribution = example.OracleAttributor().attribute(trace)
    assert (attribution.agent, attribution.mode, attribution.backend) == ("analyst", "R.3", "gold")
    assert trace.steps[attribution.step].agent == "analyst"


def test_the_attribution_arm_reruns_the_team_with_counterfactual():
    from faultlens.attributors.methods.counterfactual import Counterfactual
    from faultlens.injectors.envs import get
    from faultlens.middleware.store import open_store

    store = open_store(":memory:")
    attributor = example.make_attributor("counterfactual", store)
    assert isinstance(attributor, Counterfactual) and attributor.base.name == "learned"
    assert attributor.rerunner.resample == "fresh" and attributor.draws == example.DRAWS
    env = get("research_desk")
    sim = {"seed": 1, "tendencies": {"analyst": {"R.3": 0.5}, "reviewer": {"V.2": 1.0}}}
    for task in env.tasks(5, 20):
        trace = env.run(task, sim=sim).trace
        if not trace.outcome.success:
            break
    a = attributor.attribute(trace)
    # the simulated analyst slipped; a new draw of its step, approved by the reviewer, makes the run succeed
    assert a.details["verified"] and (a.agent, a.mode) == ("analyst", "R.3") and a.details["mode_from"] == "correction"
    assert a.cost.reruns == len(a.details["trials"]) >= 1
    assert example.make_attributor("heuristic", store).name == "heuristic"


def test_an_arm_with_the_counterfactual_attributor_is_deterministic():
    first = example.run_arm("attribution", 1, 2, 4, model=None, attributor="counterfactual", reflector=None)
    assert first == example.run_arm("attribution", 1, 2, 4, model=None, attributor="counterfactual", reflector=None)


@pytest.mark.slow
def test_the_command_prints_every_arm_and_writes_the_plot(tmp_path):
    out, data = tmp_path / "plot.png", tmp_path / "results.json"
    result = CliRunner().invoke(example.main, ["--seeds", "2", "--rounds", "2", "--tasks", "3", "--workers", "1",
                                               "--plot", str(out), "--json", str(data)])
    assert result.exit_code == 0, result.output
    for arm in example.ARMS:
        assert arm in result.output
    assert "lift of attribution over none" in result.output
    assert out.stat().st_size > 10_000
    saved = json.loads(data.read_text())
    assert set(saved["results"]) == set(example.ARMS) and all(len(per_seed) == 2 for per_seed in saved["results"].values())
    assert saved["attributor"] == "counterfactual"
    lift = saved["lift"]
    if lift["oracle"]["lift"] > 0:  # the share is the ratio of the paired lifts, as printed
        assert lift["attribution"]["share_of_oracle"] == pytest.approx(lift["attribution"]["lift"] / lift["oracle"]["lift"])
        assert f"{lift['attribution']['share_of_oracle']:.0%} of the oracle's lift" in result.output
    else:  # a tiny run where the oracle did not help: no ratio is made up
        assert "share_of_oracle" not in lift["attribution"] and "no share of it to report for attribution" in result.output


def test_the_share_of_the_oracle_is_reported_from_the_paired_lifts(tmp_path, monkeypatch):
    rates = {"none": [0.5, 0.25, 0.25], "attribution": [0.5, 0.5, 0.5], "oracle": [0.5, 0.75, 0.75]}
    monkeypatch.setattr(example, "run_arm", lambda arm, seed, rounds, per_round, **kw: rates[arm])
    monkeypatch.setattr(example, "plot", lambda *args: None)
    data = tmp_path / "results.json"
    result = CliRunner().invoke(example.main, ["--seeds", "2", "--rounds", "3", "--workers", "1", "--arms",
                                               "none,attribution,oracle", "--json", str(data)])
    assert result.exit_code == 0, result.output
    assert "attribution reaches 50% of the oracle's lift (+0.250 of +0.500, rounds 2–3, paired by seed)" in result.output
    assert json.loads(data.read_text())["lift"]["attribution"]["share_of_oracle"] == 0.5


class DeskModelTestDouble(CustomLLM):
    """Test double for `--model`: a 'real' model endpoint that answers with the desk's careful policy."""

    def completion(self, model, messages, *args, **kwargs):
        from faultlens.injectors.envs.research_desk.env import DeskPolicy
        from faultlens.injectors.sim import SimConfig, SimContext

        self.calls = getattr(self, "calls", 0) + 1
        text = DeskPolicy().respond(SimContext("research_desk", messages, SimConfig()))
        return litellm.ModelResponse(model=model, choices=[{"message": {"role": "assistant", "content": text}}])


def test_model_option_sends_every_agent_call_to_that_model():
    double = DeskModelTestDouble()
    before = litellm.custom_provider_map
    litellm.custom_provider_map = [*(before or []), {"provider": "desk-test-double", "custom_handler": double}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    try:
        rates = example.run_arm("none", 0, 1, 2, model="desk-test-double/any", attributor="heuristic", reflector=None)
    finally:
        litellm.custom_provider_map = before
    assert rates == [1.0]  # the careful policy, with no tendencies, solves both tasks
    assert double.calls >= 2 * 6
