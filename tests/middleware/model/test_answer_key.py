"""attributor_view: the one way a trace reaches an attributor hides the gold label and every answer key."""

from __future__ import annotations

from faultlens.middleware.model.answer_key import ANSWER_KEY, attributor_view, has_answer_key
from faultlens.middleware.model.trace import GoldLabel, Step, Task, Trace


def _trace() -> Trace:
    return Trace(
        id="t1",
        task=Task(query="2+2?", reference_answer="4"),
        steps=[Step(index=0, agent="a", content="2+2=5", metadata={ANSWER_KEY: {"is_injected": True}, "role": "solver"}),
               Step(index=1, agent="b", content="5", metadata={"stage": "aggregate"})],
        gold=GoldLabel(step=0, agent="a", mode="R.3"),
        metadata={"injection": {"action": "2+2=5"}, ANSWER_KEY: {"ground_truth": {"step": 0}}, "topology": {"layers": {}}},
    )


def test_view_hides_gold_trace_and_step_answer_keys_and_keeps_the_rest():
    trace = _trace()
    view = attributor_view(trace, with_reference=False)
    assert view.gold is None and not has_answer_key(view)
    assert view.metadata == {"topology": {"layers": {}}}
    assert [s.metadata for s in view.steps] == [{"role": "solver"}, {"stage": "aggregate"}]
    assert [s.content for s in view.steps] == ["2+2=5", "5"] and view.task.reference_answer is None
    # The original is untouched.
    assert has_answer_key(trace) and trace.gold.step == 0 and trace.task.reference_answer == "4"
    assert trace.steps[0].metadata[ANSWER_KEY] == {"is_injected": True} and "injection" in trace.metadata


def test_view_keeps_the_reference_answer_when_asked():
    assert attributor_view(_trace()).task.reference_answer == "4"
    assert attributor_view(_trace(), with_reference=True).task.reference_answer == "4"
