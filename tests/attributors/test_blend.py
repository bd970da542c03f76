"""`blend`: learned's step scores, the heuristic's signals and a lateness term; who first, then when."""

import numpy as np
import pytest

from faultlens.attributors import get
from faultlens.attributors.learned.blend import HEURISTIC_WEIGHT, LATENESS, WHO_FIRST, Blend
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.middleware.model.trace import Outcome, Step, StepKind, Task, Trace

from .test_evidence import _run


class FlatModel:
    """A test double of the learned model: the same score for every step, so only the blend's other terms decide."""

    meta = {"traces": 0}

    def __init__(self, scores=None):
        self.scores = scores

    def step_scores(self, X):
        return np.asarray(self.scores if self.scores is not None else np.ones(len(X)), dtype=float)

    def mode(self, row):
        return "R.2", 0.5

    def contributions(self, X, step):
        return [("content.len_log", 0.1)]


def _long_run(n: int, agents: str) -> Trace:
    steps = [Step(index=i, agent=agents[i % len(agents)], kind=StepKind.message, content=f"note {i} about the plan")
             for i in range(n)]
    return Trace(id=f"long-{n}-{agents}", task=Task(query="q"), steps=steps, outcome=Outcome(success=False))


def test_blend_is_the_default_and_is_registered():
    assert DEFAULT_METHOD == "blend" and isinstance(get("blend"), Blend)


def test_with_equal_learned_scores_and_no_signal_a_long_run_blames_late_and_a_short_one_early():
    blend = Blend(model=FlatModel())
    long_run, short = _long_run(12, "a"), _long_run(2, "a")
    assert blend.attribute(long_run).step == 11  # the lateness term, in full from LONG_RUN candidates on
    assert blend.attribute(short).step == 1  # a short run: the term is small but still breaks the tie
    assert Blend(model=FlatModel(), lateness=0.0).attribute(long_run).step == 0  # without it: earliest on a tie


def test_who_first_blames_the_agent_holding_most_of_the_score_then_its_best_step():
    trace = _long_run(6, "ab")  # a b a b a b
    scores = [0.1, 0.9, 0.1, 0.8, 0.1, 0.0]
    scores[4] = 1.0  # a's single best step beats b's best ...
    a = Blend(model=FlatModel(scores), lateness=0.0, heuristic_weight=0.0).attribute(trace)
    # ... but b's steps hold more of the score (1.7 against 1.2): b is blamed, at its best step
    assert len(trace.steps) >= WHO_FIRST and a.agent == "b" and a.step == 1
    assert a.details["who_first"]["agent"] == "b"
    assert [c.agent for c in a.ranking[:3]] == ["b", "b", "b"]


def test_the_lateness_term_orders_steps_but_does_not_choose_the_agent():
    trace = _long_run(12, "a" * 6 + "b" * 6)  # a acts first, b last
    scores = [1.0] * 6 + [0.95] * 6  # a's steps hold slightly more of the learned score
    a = Blend(model=FlatModel(scores), heuristic_weight=0.0).attribute(trace)
    assert a.agent == "a" and a.step == 5  # a is blamed, at its latest step: lateness still orders a's steps
    # the earlier rule added lateness to each agent's mass, and blamed whoever acts last
    earlier = Blend(model=FlatModel(scores), heuristic_weight=0.0, lateness_in_who=True).attribute(trace)
    assert earlier.agent == "b" and earlier.step == 11


def test_the_verdict_reads_as_evidence_and_keeps_the_numbers_for_developers():
    a = Blend(model=FlatModel()).attribute(_run())
    assert a.status.value == "ok" and a.method == "blend"
    assert a.details["blend"]["heuristic_weight"] == HEURISTIC_WEIGHT and a.details["blend"]["lateness"] == LATENESS
    assert a.details["top_features"] and "content." not in a.reason
    if a.step == 3:
        assert a.mode == "V.3" and "Munich" in a.reason


@pytest.mark.parametrize("method", ["blend", "learned"])
def test_the_shipped_model_blames_the_report_that_drops_the_failed_lookup(method):
    a = get(method).attribute(_run())
    assert a.agent == "researcher" and a.step == 3 and a.mode == "V.3"
    assert "Munich" in a.reason and "failed at step 2" in a.reason
