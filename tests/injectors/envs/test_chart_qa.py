"""chart_qa: rendered charts as step media, simulated team, perception errors, the range check."""

from __future__ import annotations

import base64
import os
import random

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.media_render import render_chart  # noqa: E402
from faultlens.injectors.generators import Generated, gen_input, get_generator  # noqa: E402
from faultlens.injectors.pipeline import InjectConfig, inject_one, run_seed  # noqa: E402
from faultlens.injectors.applicability import applicable_modes  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

SIM = {"seed": 3, "noise": 0.0, "tendencies": {}}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def env():
    return envs.get("chart_qa")


@pytest.fixture(scope="module")
def runs(env):
    return [(task, env.run(task, sim=SIM, trace_id=f"{task.id}-seed")) for task in env.tasks(7, 10)]


def test_registered_as_a_multi_agent_image_environment(env):
    assert "chart_qa" in envs.names()
    assert env.modality == "image" and env.topology == "multi"
    assert [a.name for a in env.agents] == ["analyst", "perceiver", "answerer"]


def test_tasks_are_deterministic_and_mix_bar_and_line_charts(env):
    a, b = env.tasks(7, 18), env.tasks(7, 18)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert {t.metadata["chart_kind"] for t in a} == {"bar", "line"}
    assert len({t.metadata["question_kind"] for t in a}) >= 5
    assert all(t.reference_answer for t in a)


def test_png_renders_are_small_and_byte_identical(env):
    task = env.tasks(7, 1)[0]
    md = task.metadata
    args = (md["chart_kind"], md["title"], tuple(md["labels"]), tuple((n, tuple(v)) for n, v in md["series"]), md["ymax"], md["unit"])
    first, _ = render_chart(*args)
    render_chart.cache_clear()
    second, _ = render_chart(*args)
    assert first == second
    assert first.startswith(PNG_MAGIC) and len(first) < 12_000


def test_seed_runs_succeed_and_carry_the_chart_as_step_media(runs):
    for task, result in runs:
        trace = result.trace
        assert trace.outcome.success, (task.query, trace.outcome.detail)
        assert trace.source.modality == "image" and trace.source.benchmark == "chart_qa"
        with_media = [s for s in trace.steps if s.media]
        # the view_chart result and the perceiver's readings both carry the image
        assert {s.kind for s in with_media} >= {StepKind.tool_result, StepKind.message}
        for step in with_media:
            raw = base64.b64decode(step.media[0].data)
            assert raw.startswith(PNG_MAGIC) and step.media[0].mime_type == "image/png"
        readings = [s for s in trace.steps if s.agent == "perceiver" and s.content.startswith("Readings")]
        assert readings and all(s.media for s in readings)


def test_traces_vary_in_shape(runs):
    lengths = {len(r.trace.steps) for _, r in runs}
    firsts = {r.trace.steps[0].agent for _, r in runs}
    assert len(lengths) >= 3
    assert firsts == {"analyst", "perceiver"}  # some teams start with the perceiver's overview


def test_perception_modes_apply_only_where_the_image_is(runs):
    trace = runs[0][1].trace
    for step in trace.steps:
        modes = applicable_modes(step, trace)
        if not step.media:
            assert not any(m.startswith("P.") for m in modes)
    readings = next(s for s in trace.steps if s.content.startswith("Readings"))
    assert {"P.1", "P.3"} <= set(applicable_modes(readings, trace))


def test_a_misreading_outside_the_axis_is_caught_and_re_read(env, runs):
    task, seed = runs[1]
    trace = seed.trace
    t = next(s.index for s in trace.steps if s.content.startswith("Readings"))
    label, _ = trace.steps[t].content.split(": ", 1)[1].split(", ")[0].split(" = ")
    off_axis = trace.steps[t].content.replace(f"{label} = ", f"{label} = 9", 1)
    attempt = inject_one(env, trace, seed.recording, t, "P.3", Generated(off_axis, "reads a value off the axis"),
                         model=None, sim=SIM, trace_id="caught")
    assert attempt.status == "succeeded"


def test_every_applicable_mode_fails_the_task_or_is_filtered(env):
    config = InjectConfig(envs=["chart_qa"], seeds=1, per_seed=200, seed=7, noise=0.0)
    task = env.tasks(7, 3)[2]
    result = run_seed("chart_qa", 2, task, config)
    assert result.seed_success
    statuses = {a.status for a in result.attempts}
    assert statuses <= {"kept", "succeeded"} and "kept" in statuses
    kept = [a for a in result.attempts if a.status == "kept"]
    for attempt in kept:
        trace = attempt.trace
        assert not trace.outcome.success
        assert trace.gold.step == attempt.t and trace.gold.agent == trace.steps[attempt.t].agent
    assert any(a.mode.startswith("P.") for a in kept)
    assert any(a.status == "succeeded" for a in result.attempts)  # some injected errors are caught or harmless


def test_perception_rules_write_plausible_misreadings(env, runs):
    task, seed = runs[0]
    trace = seed.trace
    t = next(s.index for s in trace.steps if s.content.startswith("Readings"))
    gen = get_generator("template")
    for mode in ("P.1", "P.2", "P.3"):
        out = None
        for k in range(6):
            out = out or gen.generate(gen_input(trace, t, mode, random.Random(k), env))
        assert out is not None and out.text != trace.steps[t].content
        assert out.text.startswith("Readings (")


def test_traces_show_renders_the_image_steps(tmp_path, runs):
    from click.testing import CliRunner

    from faultlens.cli import cli
    from faultlens.middleware.store import open_store

    trace = runs[0][1].trace
    db = tmp_path / "f.db"
    store = open_store(db)
    store.save_trace(trace)
    result = CliRunner().invoke(cli, ["traces", "show", trace.id, "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "image/png" in result.output
