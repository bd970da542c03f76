"""The `learned` attributor: features from the trace alone, a reproducible fit, and a ranking that beats a baseline.

Training data here is a small injected set made by the injection pipeline
(seed 31, far from the bundled benchmark's task seeds), so the tests do not
depend on `benchmark/data`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from faultlens.attributors import registry
from faultlens.attributors.steptext import side_effect
from faultlens.attributors.learned import LearnedAttributor, ModelMissingError, dense_feature_names, feature_names, fit, load, save, trace_features
from faultlens.attributors.learned.model import source_weights
from faultlens.middleware.model.trace import AgentInfo, GoldLabel, Outcome, Source, Step, StepKind, Task, Trace

ENVS = ("math_react", "table_qa", "research_team", "code_team")


@functools.lru_cache(maxsize=1)
def injected_traces() -> tuple[Trace, ...]:
    """Kept failure traces of four text environments (simulated agents, template errors; deterministic)."""
    from faultlens.injectors.pipeline import InjectConfig, inject

    result = inject(InjectConfig(envs=list(ENVS), seeds=10, per_seed=4, seed=31, workers=1))
    assert len(result.traces) >= 60, "the injection pipeline kept too few traces to train on"
    return tuple(result.traces)


def split_by_task(traces) -> tuple[list[Trace], list[Trace]]:
    """Half the tasks for training, the other half held out (never the same task on both sides)."""
    tasks = sorted({t.task.id for t in traces})
    held = set(tasks[1::2])
    return [t for t in traces if t.task.id not in held], [t for t in traces if t.task.id in held]


def message_only_trace() -> Trace:
    """A trace as Who&When imports it: messages only, no tools, timings or media."""
    texts = [
        ("Orchestrator", "Plan: find the population of Lindenfeld in 2020, then add 1200 new residents."),
        ("WebSurfer", "I searched. The population of Lindenfeld in 2020 was 48,300."),
        ("Orchestrator", "Thanks. Now compute 48,300 + 1200."),
        ("Assistant", "48,300 + 1200 = 49,600."),
        ("Orchestrator", "The final answer is 49,600."),
    ]
    steps = [Step(index=i, agent=a, content=c) for i, (a, c) in enumerate(texts)]
    return Trace(task=Task(query="What is Lindenfeld's 2020 population plus 1200?", reference_answer="49,500"),
                 agents=[AgentInfo(name=a) for a in ("Orchestrator", "WebSurfer", "Assistant")], steps=steps,
                 outcome=Outcome(success=False), gold=GoldLabel(step=3, agent="Assistant", mode="R.3"))


def features_of(trace: Trace, step: int) -> dict[str, float]:
    return dict(zip(feature_names(), trace_features(trace)[step]))


def test_features_on_message_only_trace():
    trace = message_only_trace()
    X = trace_features(trace)
    assert X.shape == (5, len(feature_names())) and feature_names() == dense_feature_names()
    assert np.isfinite(X).all()
    step3 = features_of(trace, 3)
    # 49,600 (the final answer's value) first appears at step 3, which states it without the task or an earlier step giving it.
    assert step3["content.answer_value_here"] == 1.0 and step3["first.content.answer_value_here"] == 1.0
    assert step3["content.new_values_in_answer"] == 1.0 and step3["content.written_new_values"] == 1.0
    assert step3["kind.message"] == 1.0 and step3["err.this"] == 0.0
    assert step3["turn.agent_first_appearance"] == 1.0 and step3["turn.speaker_change"] == 1.0
    first = features_of(trace, 0)
    assert first["pos.is_first"] == 1.0 and first["content.answer_value_here"] == 0.0
    assert first["before.content.answer_value_here"] == 1.0
    assert first["content.task_values"] == 1.0  # 1200 and Lindenfeld come from the task
    # 48,300 is new at step 1 (read off a search the trace does not show).
    assert features_of(trace, 1)["content.written_new_values"] == 1.0
    # The final step is not "where the answer first appears", however it is worded.
    assert features_of(trace, 4)["content.answer_value_here"] == 0.0
    # The reference answer is never a feature: changing it changes nothing.
    other = trace.model_copy(deep=True)
    other.task.reference_answer = "something else"
    assert np.array_equal(trace_features(other), X)


def test_within_trace_features_compare_steps_of_one_trace():
    trace = message_only_trace()
    X = trace_features(trace)
    names = feature_names()
    length, rank, z = (names.index(f"{p}content.len_log") for p in ("", "rank.", "z."))
    longest = int(np.argmax(X[:, length]))
    assert X[longest, rank] == 0.0 and X[:, rank].max() <= 1.0
    assert abs(X[:, z].mean()) < 1e-9 and X[longest, z] > 0
    # Padding every step with the same words moves the absolute length, not the ranks within the trace.
    padded = trace.model_copy(deep=True)
    for step in padded.steps:
        step.content += " (noted)"
    assert np.array_equal(trace_features(padded)[:, rank], X[:, rank])


def test_features_of_a_bare_message_list():
    """No agents declared, no kinds but `message`, no task text: features still come out finite."""
    steps = [Step(index=i, agent=f"a{i % 2}", content=c) for i, c in enumerate(["hello", "the value is 7", "7", ""])]
    X = trace_features(Trace(task=Task(query=""), steps=steps))
    assert X.shape == (4, len(feature_names())) and np.isfinite(X).all()


def test_a_tool_error_is_seen_on_the_call_and_the_result():
    steps = [Step(index=0, agent="a", kind=StepKind.tool_call, tool_name="lookup", content="lookup Nudsko Work"),
             Step(index=1, agent="a", kind=StepKind.tool_result, tool_name="lookup", content="No record", error="not found"),
             Step(index=2, agent="a", kind=StepKind.tool_call, tool_name="lookup", content="lookup Nudsko Works"),
             Step(index=3, agent="a", kind=StepKind.final_answer, content="Answer: 4")]
    trace = Trace(task=Task(query="What is the headcount of Nudsko Works?"), steps=steps)
    call, result = features_of(trace, 0), features_of(trace, 1)
    assert call["err.next"] == 1.0 and call["err.retry"] == 1.0 and call["first.err.next"] == 1.0
    assert result["err.this"] == 1.0 and result["first.err.any"] == 1.0


def test_empty_trace_has_no_rows_and_attribution_is_an_error(tmp_path):
    model = fit(list(injected_traces())[:20], seed=0)
    empty = Trace(task=Task(query="q"))
    assert trace_features(empty).shape[0] == 0
    a = LearnedAttributor(model=model).attribute(empty)
    assert a.status.value == "error" and a.step is None


@pytest.mark.slow
def test_fit_is_reproducible_and_round_trips(tmp_path):
    train, held = split_by_task(injected_traces())
    a, b = fit(train, seed=0), fit(train, seed=0)
    pa = [LearnedAttributor(model=a).attribute(t) for t in held]
    pb = [LearnedAttributor(model=b).attribute(t) for t in held]
    assert [(x.step, x.agent, x.mode, x.confidence) for x in pa] == [(x.step, x.agent, x.mode, x.confidence) for x in pb]
    path = save(a, tmp_path / "m.joblib")
    loaded = LearnedAttributor(model_path=path)
    pc = [loaded.attribute(t) for t in held]
    assert [(x.step, x.mode) for x in pc] == [(x.step, x.mode) for x in pa]


@pytest.mark.slow
def test_learned_beats_first_step_on_held_out_injected_traces():
    train, held = split_by_task(injected_traces())
    model = fit(train, seed=0)
    learned = LearnedAttributor(model=model)
    first = registry.get("baseline:first-step")
    ours = sum(learned.attribute(t).step == t.gold.step for t in held)
    base = sum(first.attribute(t).step == t.gold.step for t in held)
    assert len(held) >= 30
    assert ours > base, f"learned {ours}/{len(held)} vs first-step {base}/{len(held)}"


def test_attribution_shape(tmp_path):
    traces = list(injected_traces())
    model = fit(traces[:40], seed=0)
    trace = message_only_trace()
    a = LearnedAttributor(model=model).attribute(trace)
    assert a.status.value == "ok" and a.backend == "learned" and a.method == "learned"
    assert 0 <= a.step < len(trace.steps) and a.agent == trace.steps[a.step].agent
    assert a.ranking[0].step == a.step and len({c.step for c in a.ranking}) == len(a.ranking)
    assert [c.score for c in a.ranking] == sorted((c.score for c in a.ranking), reverse=True)
    assert 0.0 <= a.confidence <= 1.0
    assert a.details["top_features"] and all(f["feature"] in feature_names() for f in a.details["top_features"])
    assert a.mode in model.meta["modes"]
    # Every step can be given a mode (counterfactual asks for its candidates' modes).
    attributor = LearnedAttributor(model=model)
    assert attributor.mode_at(trace, a.step) == a.mode
    assert all(attributor.mode_at(trace, i) in model.meta["modes"] for i in range(len(trace.steps)))
    assert attributor.mode_at(trace, 99) is None


def test_registry_and_missing_model(tmp_path):
    assert "learned" in registry.names()
    with pytest.raises(ModelMissingError, match="faultlens train"):
        registry.get("learned", model_path=tmp_path / "nope.joblib")
    bad = tmp_path / "bad.joblib"
    import joblib

    joblib.dump({"something": 1}, bad)
    with pytest.raises(ModelMissingError, match="not a faultlens learned model"):
        load(bad)


def test_registry_get_with_a_trained_model(tmp_path):
    path = save(fit(list(injected_traces())[:30], seed=0), tmp_path / "m.joblib")
    attributor = registry.get("learned", model_path=str(path))
    assert attributor.name == "learned"
    assert attributor.attribute(message_only_trace()).backend == "learned"


def test_shipped_model_loads_if_present():
    from faultlens.attributors.learned.model import DEFAULT_MODEL_PATH

    if not Path(DEFAULT_MODEL_PATH).exists():
        pytest.skip("no model shipped in this tree")
    assert DEFAULT_MODEL_PATH.stat().st_size < 5_000_000
    a = registry.get("learned").attribute(message_only_trace())
    assert a.status.value == "ok" and a.step is not None


def test_a_consequential_action_and_the_request_it_carried_out_are_features():
    steps = [Step(index=0, agent="User", kind=StepKind.human, content="Cancel order #W1 please."),
             Step(index=1, agent="Assistant", kind=StepKind.tool_call, tool_name="get_order_details", tool_arguments={"id": "#W1"}),
             Step(index=2, agent="Tool", kind=StepKind.tool_result, tool_name="get_order_details", content="status: pending"),
             Step(index=3, agent="Assistant", kind=StepKind.message, content="Order #W1 is pending. Confirm?"),
             Step(index=4, agent="User", kind=StepKind.human, content="Yes, cancel it."),
             Step(index=5, agent="Assistant", kind=StepKind.tool_call, tool_name="cancel_pending_order", tool_arguments={"id": "#W1"}),
             Step(index=6, agent="Assistant", kind=StepKind.tool_call, tool_name="sendEmail", tool_arguments={"to": "u"})]
    trace = Trace(task=Task(query="Cancel order #W1."), steps=steps)
    assert [side_effect(s) for s in steps] == [False, False, False, False, False, True, True]
    assert features_of(trace, 5)["act.side_effect"] == 1.0 and features_of(trace, 5)["first.act.side_effect"] == 1.0
    assert features_of(trace, 6)["first.act.side_effect"] == 0.0
    # The user's "Yes, cancel it." is the request the first consequential action carried out; the order lookup is not.
    assert features_of(trace, 4)["act.requests_first_side_effect"] == 1.0
    assert features_of(trace, 0)["act.requests_first_side_effect"] == 0.0
    assert features_of(trace, 3)["act.reports_result"] == 1.0 and features_of(trace, 1)["act.reports_result"] == 0.0


def test_source_weights_give_small_sources_the_weight_balance_asks_for():
    def t(i: int, fmt: str) -> Trace:
        return Trace(id=f"{fmt}-{i}", task=Task(query="q"), source=Source(format=fmt))

    traces = [t(i, "faultlens") for i in range(8)] + [t(i, "taubench") for i in range(2)]
    assert set(source_weights(traces, 0.0).values()) == {1.0}
    full = source_weights(traces, 1.0)
    assert full["faultlens-0"] == 1.0 and full["taubench-0"] == 4.0  # each source then weighs 8 in all
    assert source_weights(traces, 0.5)["taubench-1"] == 2.0


def test_the_runs_of_the_system_a_model_is_for_get_their_share_of_the_weight():
    traces = [Trace(id=f"t{i}", task=Task(query="q"), source=Source(format="faultlens")) for i in range(202)]
    mine = {"t200", "t201"}  # two runs injected into the user's own successful runs, beside 200 bundled ones
    by_dataset = {t.id: ("jsonl:adapted" if t.id in mine else "bundled:dev") for t in traces}
    balanced = source_weights(traces, 0.75, by_dataset)
    assert sum(balanced[i] for i in mine) / sum(balanced.values()) < 0.3
    for share in (0.5, 0.8):
        weights = source_weights(traces, 0.75, by_dataset, mine, share)
        assert sum(weights[i] for i in mine) / sum(weights.values()) == pytest.approx(share)
        assert weights["t0"] == balanced["t0"] and weights["t200"] == weights["t201"]  # the others' weights stay
    assert source_weights(traces, 0.75, by_dataset, mine, 0.0) == balanced  # 0: one more source


def test_source_weights_take_the_dataset_over_the_format():
    # A user's labelled runs are stored in faultlens's format, like the bundled benchmark: by format they would be
    # one source with it and weigh next to nothing.
    traces = [Trace(id=f"t{i}", task=Task(query="q"), source=Source(format="faultlens")) for i in range(10)]
    by_dataset = {t.id: ("bundled:dev" if i < 8 else "store:mine.db") for i, t in enumerate(traces)}
    assert set(source_weights(traces, 1.0).values()) == {1.0}
    weights = source_weights(traces, 1.0, by_dataset)
    assert weights["t0"] == 1.0 and weights["t9"] == 4.0


def test_blamed_steps_in_one_batch_are_the_steps_attribute_blames():
    learned = LearnedAttributor()
    traces = list(injected_traces()[:25])
    features = {t.id: trace_features(t) for t in traces}
    assert learned.blamed_steps(traces, features) == [learned.attribute(t).step for t in traces]
