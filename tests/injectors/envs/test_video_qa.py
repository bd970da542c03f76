"""video_qa: rendered clips as step media, the watcher's notes and re-check, perception errors."""

from __future__ import annotations

import base64
import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.media_render import FRAME_SIZE, render_frame  # noqa: E402
from faultlens.injectors.envs.video_qa.env import frame_objects  # noqa: E402
from faultlens.injectors.envs.video_qa.world import answer_from, parse_frames, parse_notes  # noqa: E402
from faultlens.injectors.generators import Generated, gen_input, get_generator  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject_one, run_seed  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

SIM = {"seed": 5, "noise": 0.0, "tendencies": {}}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def env():
    return envs.get("video_qa")


@pytest.fixture(scope="module")
def runs(env):
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(4, 10)]


def test_registered_as_a_single_agent_video_environment(env):
    assert env.modality == "video" and env.topology == "single"
    assert set(env.tools) == {"get_frames"}


def test_tasks_are_deterministic_and_ask_every_kind_of_question(env):
    a, b = env.tasks(4, 10), env.tasks(4, 10)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    kinds = {t.metadata["question_kind"] for t in a}
    assert {"first", "first_frame", "count", "direction", "max_objects"} <= kinds | {"first"}
    assert len(kinds) >= 4


def test_reference_answers_follow_from_the_clip(env):
    for task in env.tasks(4, 10):
        objects = task.metadata["objects"]
        notes = {f: frame_objects(objects, f) for f in range(task.metadata["frames"])}
        kind = task.metadata["question_kind"]
        names = [n for n in task.metadata["names"] if n in task.query]
        if kind == "first":
            names.sort(key=task.query.index)
        assert answer_from(kind, names, notes) == task.reference_answer, task.query


def test_frames_are_tiny_deterministic_pngs():
    objects = (("red", "circle", 20, 30), ("blue", "triangle", 60, 40))
    first = render_frame(objects)
    render_frame.cache_clear()
    assert render_frame(objects) == first
    assert first.startswith(PNG_MAGIC) and len(first) < 2_000
    assert FRAME_SIZE == (96, 72)


def test_frame_tool_argument_forms():
    assert parse_frames("0-3", 10) == [0, 1, 2, 3]
    assert parse_frames("2,6", 10) == [2, 6]
    assert parse_frames("9-12", 10) == [9]
    assert parse_frames("first", 10) is None


def test_seed_runs_succeed_and_carry_the_frames_as_step_media(runs):
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        results = [s for s in trace.steps if s.kind == StepKind.tool_result]
        assert results and all(s.media for s in results)
        for step in results:
            indices = [m.frame_index for m in step.media]
            assert indices == sorted(indices) and all(m.timestamp_s == i / 2 for m, i in zip(step.media, indices))
            assert base64.b64decode(step.media[0].data).startswith(PNG_MAGIC)
        notes = [s for s in trace.steps if s.content.startswith("Notes")]
        assert notes and all(s.media for s in notes)
        assert any(s.content.startswith("Let me look again") for s in trace.steps)  # the re-check


def test_traces_vary_in_length(runs):
    assert len({len(r.trace.steps) for _, r in runs}) >= 3


def test_a_shape_missed_at_the_first_appearance_is_caught_by_the_re_check(env):
    task = next(t for t in env.tasks(4, 20) if t.metadata["question_kind"] == "first_frame" and t.reference_answer != "0")
    seed = env.run(task, sim=SIM, trace_id="seed")
    trace = seed.trace
    target = task.query.split("the ", 1)[1].split(" first")[0]
    frame = int(task.reference_answer)
    t = next(s.index for s in trace.steps if s.content.startswith("Notes") and f"frame {frame}: " in s.content)
    lines = trace.steps[t].content.split("\n")
    lines = [(l.replace(f"{target} at x=", "gone at x=") if l.startswith(f"frame {frame}:") else l) for l in lines]
    missed = "\n".join(lines).replace("gone at x=", "grey blob at x=")
    attempt = inject_one(env, trace, seed.recording, t, "P.3", Generated(missed, "misses the shape"), model=None, sim=SIM,
                         trace_id="caught")
    assert attempt.status == "succeeded"


def test_every_applicable_mode_fails_the_task_or_is_filtered(env):
    config = InjectConfig(envs=["video_qa"], seeds=1, per_seed=200, seed=4, noise=0.0)
    task = env.tasks(4, 3)[2]
    result = run_seed("video_qa", 2, task, config)
    assert result.seed_success
    statuses = {a.status for a in result.attempts}
    assert statuses <= {"kept", "succeeded"} and "kept" in statuses
    for attempt in result.attempts:
        if attempt.status == "kept":
            assert not attempt.trace.outcome.success
            assert attempt.trace.gold.step == attempt.t
    assert any(a.status == "succeeded" for a in result.attempts)


def test_perception_rules_edit_one_frame_of_the_notes(env, runs):
    trace = runs[0][1].trace
    t = next(s.index for s in trace.steps if s.content.startswith("Notes") and " at x=" in s.content)
    gen = get_generator("template")
    before = parse_notes([trace.steps[t].content])
    for mode in ("P.1", "P.2", "P.3"):
        out = None
        for k in range(8):
            out = out or gen.generate(gen_input(trace, t, mode, random.Random(k), env))
        assert out is not None, mode
        after = parse_notes([out.text])
        assert after != before and set(after) == set(before)


def test_traces_show_renders_the_frames(tmp_path, runs):
    from click.testing import CliRunner

    from faultlens.cli import cli
    from faultlens.middleware.store import open_store

    trace = runs[0][1].trace
    db = tmp_path / "f.db"
    open_store(db).save_trace(trace)
    result = CliRunner().invoke(cli, ["traces", "show", trace.id, "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "image/png frame 0" in result.output
