"""Metric functions against hand-computed values."""

from __future__ import annotations

import pytest
from sklearn.metrics import f1_score

from faultlens.benchmark.metrics import (
    agent_correct,
    breakdown,
    compute_metrics,
    confidence_bucket,
    length_bucket,
    step_correct,
    step_within,
)


def rec(gold_step, pred_step, gold_agent="A", pred_agent="A", gold_mode="R.2", pred_mode="R.2", status="ok",
        multi=True, native=None, bench="env1", n_steps=12, usd=0.0):
    return {
        "trace_id": f"t{gold_step}-{pred_step}-{status}",
        "status": status,
        "predicted": {"agent": pred_agent, "step": pred_step, "native_step": native[1] if native else None, "mode": pred_mode},
        "gold": {"agent": gold_agent if multi else None, "step": gold_step, "native_step": native[0] if native else None, "mode": gold_mode},
        "cost": {"calls": 2, "input_tokens": 100, "output_tokens": 20, "usd": usd, "seconds": 0.5},
        "meta": {"multi_agent": multi, "benchmark": bench, "n_steps": n_steps, "modality": "text"},
    }


# The hand-worked example (see the comments for each line).
RECORDS = [
    rec(1, 10),  # the substring trap: "1" is in "10", but step 10 is not step 1
    rec(3, 3, "B", "B", "A.1", "A.1"),  # all right
    rec(5, 6, "A", "C", "R.2", "A.1"),  # step off by one, wrong agent, wrong mode
    rec(2, 2, "A", "A", "A.1", "A.1", status="unparsed"),  # would be right, but unparsed counts as wrong
    rec(0, 0, None, None, "R.2", "R.2", multi=False),  # single-agent: no agent accuracy
]


def test_substring_trap_and_exact_step_matching():
    assert not step_correct({"step": 10}, {"step": 1})
    assert not step_correct({"step": 1}, {"step": 10})
    assert not step_correct({"native_step": "1.10", "step": 3}, {"native_step": "1.1", "step": 1})
    assert step_correct({"native_step": "1.1", "step": 1}, {"native_step": "1.1", "step": 1})
    assert step_correct({"step": "4"}, {"step": 4})  # an all-digit string is the same integer
    assert not step_correct({"step": "step 4"}, {"step": 4})
    assert not step_correct({"step": None}, {"step": 0})
    assert not step_correct({"step": True}, {"step": 1})  # a bool is not a step
    assert step_within({"step": 6}, {"step": 5}, 1) and not step_within({"step": 7}, {"step": 5}, 1)


def test_agent_names_ignore_case_and_role_parenthetical():
    assert agent_correct({"agent": "Orchestrator (thought)"}, {"agent": "Orchestrator"})
    assert agent_correct({"agent": "websurfer"}, {"agent": "WebSurfer"})
    assert not agent_correct({"agent": "WebSurfer"}, {"agent": "Orchestrator"})
    assert not agent_correct({"agent": None}, {"agent": "Orchestrator"})


def test_headline_metrics_match_hand_computed_values():
    m = compute_metrics(RECORDS, samples=200)
    assert m["n"] == 5
    assert m["status"] == {"ok": 4, "unparsed": 1, "error": 0}
    assert m["step_accuracy"]["value"] == pytest.approx(2 / 5)  # records 2 and 5
    assert m["step_within"]["1"]["value"] == pytest.approx(3 / 5)  # 2, 3 and 5; not 1 (|10-1|=9), not 4 (unparsed)
    assert m["agent_accuracy"]["value"] == pytest.approx(2 / 4) and m["agent_accuracy"]["n"] == 4  # single-agent excluded
    assert m["joint_accuracy"]["value"] == pytest.approx(2 / 5)  # 2 and 5
    # R.2: tp=2 (1, 5), fp=0, fn=1 (3) -> P=1, R=2/3, F1=0.8
    # A.1: tp=1 (2), fp=1 (3), fn=1 (4, unparsed) -> P=R=F1=0.5
    assert m["per_mode"]["R.2"] == pytest.approx({"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3, "predicted": 2})
    assert m["per_mode"]["A.1"] == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2, "predicted": 2})
    assert m["mode_macro_f1"]["value"] == pytest.approx(0.65)
    assert m["confusion"] == {"gold": ["A.1", "R.2"], "predicted": ["A.1", "R.2", "(none)"], "matrix": [[1, 0, 1], [1, 2, 0]]}
    assert m["cost"]["per_trace"]["calls"] == 2 and m["cost"]["total"]["input_tokens"] == 500


def test_macro_f1_agrees_with_scikit_learn():
    gold = [r["gold"]["mode"] for r in RECORDS]
    pred = [r["predicted"]["mode"] if r["status"] == "ok" else "(none)" for r in RECORDS]
    expected = f1_score(gold, pred, labels=sorted(set(gold)), average="macro")
    assert compute_metrics(RECORDS, samples=0)["mode_macro_f1"]["value"] == pytest.approx(expected)


def test_bootstrap_intervals_are_seeded_and_sensible():
    many = [rec(i % 7, i % 7 if i % 3 else 99) for i in range(90)]  # 2/3 right
    a = compute_metrics(many, samples=500)
    b = compute_metrics(many, samples=500)
    assert a["step_accuracy"] == b["step_accuracy"]  # same seed, same interval
    low, high = a["step_accuracy"]["ci"]
    assert a["step_accuracy"]["value"] == pytest.approx(60 / 90)
    assert low < 60 / 90 < high
    assert 0.05 < high - low < 0.3
    wider = compute_metrics(many[:15], samples=500)["step_accuracy"]["ci"]
    assert wider[1] - wider[0] > high - low  # fewer traces, wider interval
    perfect = compute_metrics([rec(1, 1)] * 10, samples=100)
    assert perfect["step_accuracy"]["ci"] == [1.0, 1.0]


def test_empty_and_inapplicable_metrics_are_none_not_zero():
    m = compute_metrics([rec(0, 0, None, None, None, None, multi=False)], samples=50)
    assert m["agent_accuracy"] == {"value": None, "ci": None, "n": 0}
    assert m["mode_macro_f1"]["value"] is None
    assert m["joint_accuracy"]["value"] == 1.0
    assert compute_metrics([])["step_accuracy"]["value"] is None


def test_length_buckets_and_breakdowns():
    assert [length_bucket(n) for n in (1, 10, 11, 20, 21, 50, 51, 100, 101, 5000)] == \
        ["1-10", "1-10", "11-20", "11-20", "21-50", "21-50", "51-100", "51-100", "101+", "101+"]
    records = [rec(1, 1, bench="a", n_steps=5), rec(1, 2, bench="a", n_steps=30), rec(1, 1, bench="b", n_steps=30)]
    by_env = breakdown(records, "benchmark", samples=0)
    assert {k: v["step_accuracy"]["value"] for k, v in by_env.items()} == {"a": 0.5, "b": 1.0}
    by_len = breakdown(records, "length", samples=0)
    assert list(by_len) == ["1-10", "21-50"]
    assert by_len["21-50"]["n"] == 2 and by_len["21-50"]["step_accuracy"]["value"] == 0.5


def test_confidence_quarters_and_breakdown():
    assert [confidence_bucket(c) for c in (0.0, 0.24, 0.25, 0.5, 0.74, 0.75, 1.0)] == \
        ["0.00-0.25", "0.00-0.25", "0.25-0.50", "0.50-0.75", "0.50-0.75", "0.75-1.00", "0.75-1.00"]
    # No confidence (a baseline, an unparsed answer) and nonsense are "none", never a quarter.
    assert {confidence_bucket(c) for c in (None, True, float("nan"), "0.9")} == {"none"}
    records = [rec(1, 1), rec(1, 2), rec(2, 2), rec(3, 3)]
    for r, c in zip(records, (0.9, 0.8, 0.1, None)):
        r["predicted"]["confidence"] = c
    by = breakdown(records, "confidence", samples=0)
    assert list(by) == ["0.00-0.25", "0.75-1.00", "none"]
    assert by["0.75-1.00"]["n"] == 2 and by["0.75-1.00"]["step_accuracy"]["value"] == 0.5
