"""`faultlens lessons`: list, show, learn, for."""

from __future__ import annotations

from click.testing import CliRunner

from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback.cli import lessons
from faultlens.feedback.memory import LessonMemory
from faultlens.middleware.store import open_store

from .conftest import DISSIMILAR_TASK, SIMILAR_TASK, failed_trace


def _stored_run(tmp_path):
    """A store holding one failed run: (its path, the store, the run)."""
    db = tmp_path / "runs.db"
    store = open_store(db)
    trace = failed_trace()
    store.save_trace(trace)
    return db, store, trace


def test_learn_then_list_show_and_for(tmp_path):
    db, store, trace = _stored_run(tmp_path)
    runner = CliRunner()

    learnt = runner.invoke(lessons, ["learn", trace.id, "--db", str(db)])
    assert learnt.exit_code == 0, learnt.output
    assert f"attribution ({DEFAULT_METHOD}, ok)" in learnt.output and "reflection (offline): ok" in learnt.output
    [lesson] = LessonMemory(open_store(db)).lessons()
    assert store.attributions(trace.id)[0].agent == lesson.agent

    listed = runner.invoke(lessons, ["list", "--db", str(db)])
    assert listed.exit_code == 0 and lesson.id[:8] in listed.output and lesson.agent in listed.output

    shown = runner.invoke(lessons, ["show", lesson.id[:10], "--db", str(db)])
    assert shown.exit_code == 0 and lesson.advice[:30] in shown.output

    similar = runner.invoke(lessons, ["for", lesson.agent, SIMILAR_TASK, "--db", str(db)])
    assert similar.exit_code == 0 and "yes" in similar.output
    other = runner.invoke(lessons, ["for", lesson.agent, DISSIMILAR_TASK, "--db", str(db)])
    assert other.exit_code == 0 and "yes" not in other.output

    missing = runner.invoke(lessons, ["show", "zzz", "--db", str(db)])
    assert missing.exit_code != 0 and "0 lessons" in missing.output


def test_learn_with_the_counterfactual_method_blames_the_verified_step(tmp_path):
    from faultlens.injectors.pipeline import InjectConfig, inject

    kept = inject(InjectConfig(envs=["math_react"], seeds=3, per_seed=3, seed=7, workers=1)).traces
    trace = next(t for t in kept if len(t.steps) <= 10)  # learned ranks up to 10 steps: every step is a candidate
    db = tmp_path / "cf.db"
    open_store(db).save_trace(trace)
    learnt = CliRunner().invoke(lessons, ["learn", trace.id, "--db", str(db), "--method", "counterfactual", "-O", "k=10"])
    assert learnt.exit_code == 0, learnt.output
    [attribution] = open_store(db).attributions(trace.id)
    assert attribution.method == "counterfactual" and attribution.details["verified"]
    assert (attribution.step, attribution.agent) == (trace.gold.step, trace.gold.agent)
    assert attribution.cost.reruns == len(attribution.details["trials"]) >= 1


def test_learn_from_label(tmp_path):
    from faultlens.cli import cli
    from faultlens.middleware.model.labels import label_for

    db, store, trace = _stored_run(tmp_path)
    runner = CliRunner()
    unlabelled = runner.invoke(cli, ["lessons", "learn", trace.id, "--from-label", "--db", str(db)])
    assert unlabelled.exit_code != 0 and "has no label" in unlabelled.output
    assert runner.invoke(lessons, ["learn", trace.id, "--db", str(db)]).exit_code == 0
    [before] = LessonMemory(open_store(db)).lessons()
    other = 1 if before.step != 1 else 2
    store.set_gold(trace.id, label_for(trace, other, mode="C.2"))
    learnt = runner.invoke(lessons, ["learn", trace.id, "--from-label", "--db", str(db)])
    text = " ".join(learnt.output.split())
    assert learnt.exit_code == 0, learnt.output
    assert f"retired lesson {before.id[:12]}" in text and f"attribution (label, ok): agent {trace.steps[other].agent}, step {other}" in text
    [after] = LessonMemory(open_store(db)).lessons()
    assert after.step == other
    assert runner.invoke(lessons, ["learn", trace.id, "--from-label", "--method", "learned", "--db", str(db)]).exit_code != 0
