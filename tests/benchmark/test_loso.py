"""Leave-one-system-out: each system scored by a model that never saw a run of it, beside every comparison method."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from faultlens.benchmark import loso
from faultlens.benchmark.loso import PRIOR, RANDOM, freeze, frozen_rows, loso_tables, random_verdict, score_systems, system_of
from faultlens.middleware.model.trace import GoldLabel, Source, Step, StepKind, Task, Trace

from ..attributors.test_learned import ENVS, injected_traces, split_by_task


def _as_systems(traces):
    """Three systems: the first environment's runs say framework "fw-a", the second's "fw-b", the rest "fw-c"."""
    names = {ENVS[0]: "fw-a", ENVS[1]: "fw-b"}
    return [t.model_copy(update={"source": t.source.model_copy(update={"framework": names.get(t.source.benchmark, "fw-c")})})
            for t in traces]


@pytest.fixture(scope="module")
def report():
    train, held = split_by_task(injected_traces())
    return score_systems(_as_systems(train), _as_systems(held), data_dir=Path("/nonexistent"), frozen={}, default="blend"), \
        _as_systems(held)


def test_every_system_is_scored_by_a_model_that_never_saw_it(report, monkeypatch):
    rep, held = report
    assert rep.systems == ["fw-a", "fw-b", "fw-c"]
    assert {"learned", "blend", "heuristic", RANDOM, PRIOR, "baseline:last-step"} <= set(rep.methods)
    assert rep.competitors and "blend" not in rep.competitors and PRIOR not in rep.competitors
    for system in rep.systems:
        n = sum(1 for t in held if system_of(t) == system)
        assert all(len(rep.verdicts[system][m]) == n for m in rep.methods)
    # first-step is right exactly on the traces whose gold step is 0
    for system in rep.systems:
        gold0 = np.mean([t.gold.step == 0 for t in held if system_of(t) == system])
        assert rep.accuracy(system, "baseline:first-step", "step") == pytest.approx(gold0)
    # the mean weighs each system the same, whatever its size
    step = rep.mean("heuristic", "step")
    assert step["value"] == pytest.approx(np.mean([rep.accuracy(s, "heuristic", "step") for s in rep.systems]))
    assert step["ci"][0] <= step["value"] <= step["ci"][1] and step["systems"] == 3
    assert rep.mean_difference("blend", "blend", "step") == {"value": 0.0, "ci": [0.0, 0.0]}


def test_no_fold_trains_on_the_system_it_scores(monkeypatch):
    seen = []
    real_fit = loso.fit

    def spy(traces, **kw):
        seen.append({system_of(t) for t in traces})
        return real_fit(traces, **kw)

    monkeypatch.setattr(loso, "fit", spy)
    train, held = split_by_task(injected_traces())
    rep = score_systems(_as_systems(train), _as_systems(held), data_dir=Path("/nonexistent"), frozen={}, methods=[])
    assert [sorted(s) for s in seen] == [["fw-b", "fw-c"], ["fw-a", "fw-c"], ["fw-a", "fw-b"]]
    assert rep.systems == ["fw-a", "fw-b", "fw-c"]


def test_random_choice_is_exact():
    steps = [Step(index=i, agent=a, kind=StepKind.message, content=f"m{i}") for i, a in enumerate("aabb")]
    trace = Trace(id="t", task=Task(query="q"), steps=steps, gold=GoldLabel(step=2, agent="b"))
    v = random_verdict(trace)
    assert v.step == pytest.approx(1 / 4) and v.agent == pytest.approx(2 / 4) and v.early == pytest.approx(3 / 4)


def test_tables_show_every_system_the_mean_and_the_early_step_shares(report):
    rep, _ = report
    text = Console(width=220, record=True)
    for table in loso_tables(rep):
        text.print(table)
    printed = text.export_text()
    assert "fw-a" in printed and "mean [95% CI]" in printed and "blend (default)" in printed
    assert "first 3 steps" in printed and "gold labels" in printed and "mode macro-F1" in printed
    summary = json.loads(json.dumps(rep.summary()))
    assert summary["default"] == "blend" and set(summary["systems"]) == {"fw-a", "fw-b", "fw-c"}
    assert 0.0 <= summary["systems"]["fw-a"]["gold_early_share"] <= 1.0


def test_a_frozen_row_replays_the_same_verdicts(report, tmp_path):
    rep, held = report
    path = freeze(rep, "heuristic", "heuristic (frozen)", tmp_path / "h.json")
    rows = frozen_rows(tmp_path)
    assert list(rows) == ["heuristic (frozen)"]
    train, _ = split_by_task(injected_traces())
    again = score_systems(_as_systems(train), held, data_dir=Path("/nonexistent"), frozen=rows, methods=["heuristic"])
    for system in again.systems:
        assert again.accuracy(system, "heuristic (frozen)", "step") == again.accuracy(system, "heuristic", "step")
    # within a system the row saw, a trace it never saw counts as wrong, never as right
    data = json.loads(path.read_text())
    ids_a = rep.trace_ids["fw-a"]
    right = [i for i, v in zip(ids_a, again.verdicts["fw-a"]["heuristic"]) if v.step == 1.0]
    assert right, "the heuristic gets some fw-a trace right"
    data["verdicts"] = {i: data["verdicts"][i] for i in ids_a if i != right[0]}
    path.write_text(json.dumps(data))
    partial = score_systems(_as_systems(train), held, data_dir=Path("/nonexistent"), frozen=frozen_rows(tmp_path), methods=["heuristic"])
    frozen_a = partial.accuracy("fw-a", "heuristic (frozen)", "step")
    assert frozen_a == pytest.approx(partial.accuracy("fw-a", "heuristic", "step") - 1 / len(ids_a))
    # a system the row never saw (added after it was frozen) is not measured: no cell, left out of its mean
    assert partial.accuracy("fw-b", "heuristic (frozen)", "step") is None
    assert partial.mode_f1("fw-b", "heuristic (frozen)") is None
    mean = partial.mean("heuristic (frozen)", "step")
    assert mean["systems"] == 1 and mean["value"] == pytest.approx(frozen_a)
    console = Console(record=True, width=300)
    for table in loso_tables(partial):
        console.print(table)
    assert "over 1 systems" in console.export_text()


def test_real_datasets_are_their_own_systems():
    assert system_of(Trace(id="a", task=Task(query="q"), source=Source(format="trail", framework="smolagents"))) == "TRAIL"
    assert system_of(Trace(id="b", task=Task(query="q"), source=Source(format="taubench"))) == "AgentRx"
    assert system_of(Trace(id="c", task=Task(query="q"), source=Source(format="faultlens", framework="ag2"))) == "ag2"
