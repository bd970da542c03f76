"""Which runs failed (`failed.FailureRule`), a verdict as annotations (`annotations`), and the sync state file (`state`)."""

from __future__ import annotations

import json

import pytest

from faultlens.middleware.errors import ConfigError, InputError
from faultlens.middleware.model.trace import Attribution, Candidate, Step, StepKind, Task, Trace
from faultlens.phoenix.annotations import DECISIVE_ERROR, IDENTIFIER, VERDICT, annotator_kind, verdict_annotations
from faultlens.phoenix.failed import Condition, FailureRule
from faultlens.phoenix.state import RunState, SyncState, default_state_path


class FakePhoenix:
    """The two annotation look-ups `FailureRule.judge` makes, answered from lists."""

    def __init__(self, trace_annotations=(), span_annotations=()):
        self.traces, self.spans, self.calls = list(trace_annotations), list(span_annotations), []

    def trace_annotations(self, project, trace_ids, names=None):
        self.calls.append(("traces", sorted(trace_ids), names))
        return [a for a in self.traces if a["trace_id"] in set(trace_ids)]

    def span_annotations(self, project, span_ids, names=None):
        self.calls.append(("spans", sorted(span_ids), names))
        return [a for a in self.spans if a["span_id"] in set(span_ids)]


def run(trace: str, root: str, status: str = "ok") -> RunState:
    return RunState(phase="complete", traces=[trace], roots={root: status})


def test_conditions_parse_labels_and_score_bounds():
    assert Condition.parse("correctness=incorrect") == Condition("correctness", "=", "incorrect")
    assert Condition.parse(" hallucination >= 0.5 ").matches({"name": "hallucination", "result": {"score": 0.7}})
    assert not Condition.parse("hallucination>=0.5").matches({"name": "hallucination", "result": {"score": 0.2}})
    assert not Condition.parse("correctness=incorrect").matches({"name": "correctness", "result": {"label": "correct"}})
    assert not Condition.parse("correctness<0.5").matches({"name": "correctness", "result": {"label": "x"}})  # no score: no match
    for bad in ("correctness", "=x", "score<high"):
        with pytest.raises(ConfigError, match="--failed-if"):
            Condition.parse(bad)


def test_each_way_of_failing_counts_and_says_why():
    runs = {"r1": run("t1", "s1", "error"), "r2": run("t2", "s2"), "r3": run("t3", "s3"), "r4": run("t4", "s4"), "r5": run("t5", "s5")}
    phoenix = FakePhoenix(
        trace_annotations=[{"trace_id": "t2", "name": "correctness", "result": {"label": "incorrect"}},
                           {"trace_id": "t4", "name": "correctness", "result": {"label": "correct"}}],
        span_annotations=[{"span_id": "s3", "name": "correctness", "result": {"label": "incorrect"}}],
    )
    rule = FailureRule.parse(["correctness=incorrect"], trace_ids=["T5"])
    failed = rule.judge(phoenix, "agents", runs)
    assert failed == {"r1": "root span s1 has status ERROR", "r2": "trace t2 is annotated correctness=incorrect (--failed-if)",
                      "r3": "root span s3 is annotated correctness=incorrect (--failed-if)", "r5": "trace t5 is listed (--trace-id)"}
    # one look-up of each kind, for the runs not already failed, asking only for the names needed
    assert phoenix.calls == [("traces", ["t2", "t3", "t4"], ["correctness"]), ("spans", ["s2", "s3", "s4"], ["correctness"])]
    assert FailureRule(status_error=False).judge(FakePhoenix(), "agents", {"r1": run("t1", "s1", "error")}) == {}


def trace_with_steps() -> Trace:
    steps = [Step(index=0, agent="planner", kind=StepKind.plan, content="plan", span_id="aaaaaaaaaaaaaaa1"),
             Step(index=1, agent="coder", kind=StepKind.llm_call, content="x = 2 * 3", span_id="aaaaaaaaaaaaaaa2")]
    return Trace(id="run1", task=Task(query="add"), steps=steps)


def test_a_verdict_is_two_annotations_on_the_blamed_and_the_root_span():
    attribution = Attribution(trace_id="run1", method="heuristic", agent="coder", step=1, mode="R.3", reason="multiplies instead of adding",
                              confidence=0.8, ranking=[Candidate(step=1, score=0.8, agent="coder"), Candidate(step=0, score=0.2)])
    blamed, verdict = verdict_annotations(trace_with_steps(), attribution, "rootspan00000001")
    assert (blamed["span_id"], blamed["name"], blamed["result"]) == ("aaaaaaaaaaaaaaa2", DECISIVE_ERROR,
                                                                     {"label": "R.3", "score": 0.8, "explanation": "multiplies instead of adding"})
    assert blamed["annotator_kind"] == "CODE" and blamed["identifier"] == verdict["identifier"] == IDENTIFIER
    assert blamed["metadata"]["method"] == "heuristic" and blamed["metadata"]["agent"] == "coder" and blamed["metadata"]["step"] == 1
    assert [c["step"] for c in blamed["metadata"]["candidates"]] == [1, 0]
    assert (verdict["span_id"], verdict["name"], verdict["result"]["label"]) == ("rootspan00000001", VERDICT, "coder")
    assert "step 1 (llm_call) by coder: R.3 numerical/calculation error" in verdict["result"]["explanation"]
    json.dumps([blamed, verdict])  # what is posted is plain JSON


def test_llm_methods_annotate_as_llm_and_a_stepless_verdict_writes_nothing():
    assert annotator_kind(Attribution(trace_id="r", method="all_at_once")) == "LLM"
    assert annotator_kind(Attribution(trace_id="r", method="blend")) == "CODE"
    assert annotator_kind(Attribution(trace_id="r", method="not-a-method", model="openai/gpt-4o-mini")) == "LLM"
    assert verdict_annotations(trace_with_steps(), Attribution(trace_id="run1", method="heuristic", step=None), "root") == []
    assert verdict_annotations(trace_with_steps(), Attribution(trace_id="run1", method="heuristic", step=7), "root") == []


def test_the_state_round_trips_and_refuses_another_phoenix(tmp_path):
    path = tmp_path / "state.json"
    state = SyncState.load(path, url="http://127.0.0.1:6006", project="agents")
    state.cursor, state.spans = "U3Bhbjo1MQ==", 50
    state.run("run1").roots["s1"] = "error"
    state.save()
    again = SyncState.load(path, url="http://127.0.0.1:6006", project="agents")
    assert (again.cursor, again.spans, again.runs["run1"].roots) == ("U3Bhbjo1MQ==", 50, {"s1": "error"})
    assert not list(tmp_path.glob("*.tmp"))
    with pytest.raises(InputError, match="project 'agents', not 'other'; give another --state"):
        SyncState.load(path, url="http://127.0.0.1:6006", project="other")
    path.write_text("{not json")
    with pytest.raises(InputError, match="not a faultlens phoenix sync state"):
        SyncState.load(path, url="http://127.0.0.1:6006", project="agents")
    a, b = default_state_path(str(tmp_path / "f.db"), "http://a", "p"), default_state_path(str(tmp_path / "f.db"), "http://a", "q")
    assert a.parent == tmp_path and a != b
