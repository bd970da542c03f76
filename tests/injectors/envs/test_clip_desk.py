"""`clip_desk`: real Agno code (a `Team` whose member's tool returns a clip's frames as images) on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team: its clips, the frames that
enter the watcher's requests as image parts, the steps that carry them as video media. The tests that run the team
skip when the `frameworks` extra (agno) is not installed; `make test` installs it.
"""

from __future__ import annotations

import base64
import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.applicability import applicable_modes  # noqa: E402
from faultlens.injectors.envs.clip_desk.policy import DeskPolicy, images_after  # noqa: E402
from faultlens.injectors.envs.clip_desk.world import (FAMILIES, answer_of, clip_world, frame_png,  # noqa: E402
                                                      make_task, visible)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "clip_desk"
SIM = FRAMEWORK_SIM
needs_sdk = needs_framework("agno")
runs = seed_runs_fixture(ENV, 10)


def _image_parts(request: dict) -> list[str]:
    return [p["image_url"]["url"] for m in request["messages"] if isinstance(m.get("content"), list)
            for p in m["content"] if p.get("type") == "image_url"]


def test_clips_count_up_and_every_family_has_its_answer():
    for i in range(60):
        family = FAMILIES[i % len(FAMILIES)]
        _, world = make_task(random.Random(i), family)
        counter = world["counter"]
        assert all(b > a for a, b in zip(counter, counter[1:]))  # what the lead's check relies on
        answer = answer_of(world)
        q = world["question"]
        if family == "rate":
            assert (counter[q["b"]] - counter[q["a"]]) % (q["b"] - q["a"]) == 0 and int(answer) > 0
        if family == "order":
            assert answer in q["parcels"]
        if family == "count":
            assert int(answer) == sum(1 for f in range(world["frames"]) if q["parcel"] in dict(visible(world, f)))


def test_a_clip_id_gives_its_tasks_world_and_each_frame_its_own_image():
    env = envs.get(ENV)
    task = env.tasks(3, 4)[2]
    world = clip_world(str(task.id))
    assert world == task.metadata["world"]
    pngs = [frame_png(world, f) for f in range(world["frames"])]
    assert len(set(pngs)) == len(pngs) and all(p.startswith(b"\x89PNG") for p in pngs)


@needs_sdk
def test_the_frames_enter_the_watchers_request_as_image_parts_and_never_the_leads(runs):
    task, result = runs[0]
    world = task.metadata["world"]
    calls = result.recording.calls
    assert {t["function"]["name"] for t in calls[0].request["tools"]} == {"calculate", "delegate_task_to_member"}
    watcher = [c for c in calls if c.agent == "watcher"]
    assert {t["function"]["name"] for t in watcher[0].request["tools"]} == {"get_frames"}
    looked = [c for c in watcher if _image_parts(c.request)]
    assert looked and not any(_image_parts(c.request) for c in calls if c.agent == "lead")
    # Agno's follow-up user message after the tool's text: one data: URL per frame, the frame's own PNG bytes
    messages = looked[0].request["messages"]
    media = next(m for m in messages if isinstance(m.get("content"), list))
    assert media["role"] == "user" and media["content"][0]["text"] == "The tool call above generated the attached media."
    shown = {frame_png(world, f) for f in range(world["frames"])}
    urls = _image_parts(looked[0].request)
    assert all(u.startswith("data:image/png;base64,") and base64.b64decode(u.split(",", 1)[1]) in shown for u in urls)


@needs_sdk
def test_the_watcher_notes_only_frames_whose_images_are_in_its_request(runs):
    _, result = runs[0]
    call = next(c for c in result.recording.calls if c.agent == "watcher" and _image_parts(c.request))
    sim = {"seed": 0, "noise": 0.0}
    seen = DeskPolicy().respond("watcher", call.request, sim)
    assert "\nframe " in seen
    blind = {**call.request, "messages": [m for m in call.request["messages"] if not isinstance(m.get("content"), list)]}
    assert "were not shown" in DeskPolicy().respond("watcher", blind, sim)
    first = next(i for i, m in enumerate(call.request["messages"]) if m.get("tool_calls"))
    assert len(images_after(call.request["messages"], first)) == seen.count("\nframe ")


@needs_sdk
def test_steps_carry_the_frames_as_video_media_where_perception_modes_apply(runs):
    for task, result in runs:
        trace = result.trace
        assert trace.source.modality == "video" and trace.outcome.success
        results = [s for s in trace.steps if s.kind == StepKind.tool_result and s.tool_name == "get_frames" and s.media]
        notes = [s for s in trace.steps if s.agent == "watcher" and s.kind == StepKind.message]
        assert results and notes and all(s.media for s in notes)
        for step in results + notes:
            assert all(m.mime_type == "image/png" and m.frame_index is not None and m.timestamp_s == m.frame_index
                       for m in step.media)
        for step in notes:  # the notes describe the frames they carry
            assert all(f"frame {m.frame_index}:" in step.content for m in step.media)
        assert {"P.1", "P.2", "P.3"} <= set(applicable_modes(notes[0], trace))
        assert not {"P.1", "P.2", "P.3"} & {m for s in trace.steps if s.agent == "lead" for m in applicable_modes(s, trace)}


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    steps = [s for _, r in runs for s in r.trace.steps]
    assert any(s.kind == StepKind.tool_result and s.content.startswith("error: cannot read frames") for s in steps)
    assert any(s.agent == "lead" and "look again" in s.content for s in steps)
    env = envs.get(ENV)
    for task, _ in runs[:5]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        assert not any("Look again" in s.content or s.content.startswith("error") for s in clean.trace.steps)


@needs_sdk
def test_a_missed_parcel_at_the_edge_of_its_run_passes_the_check_and_fails_the_count(runs):
    from faultlens.injectors.envs.clip_desk.mistakes import _p3
    from faultlens.injectors.generators import gen_input

    task, seed = next((t, r) for t, r in runs if t.metadata["family"] == "count")
    env = envs.get(ENV)
    t, generated = next((s.index, g) for s in seed.trace.steps if s.agent == "watcher" and s.kind == StepKind.message
                        and (g := _p3(gen_input(seed.trace, s.index, "P.3", random.Random(0), env))) is not None)
    attempt = inject_at(ENV, seed, t, "P.3", generated)
    assert attempt.status == "kept" and attempt.trace.gold.agent == "watcher"
    assert not any("Look again" in s.content for s in attempt.trace.steps[t:])  # the lead's check let it through


@needs_sdk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    kept = assert_inject_keeps_many_modes(ENV, modes=8)
    assert all(t.source.modality == "video" for t in kept)


@needs_sdk
def test_runs_are_captured_as_agnos_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.agno")
    assert imported.source.framework == "agno"
    # Agents: the Team's and the member's AGENT spans name them (the team is named after its leader): no adapter.
    assert [a.name for a in imported.agents] == ["lead", "watcher"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: each look and calculation is a TOOL span whose output is the text the agent was given.
    tools = [s for s in imported.steps if s.kind == StepKind.tool_call and s.tool_name != "delegate_task_to_member"]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    assert [(s.agent, s.tool_name) for s in tools] == [(s.agent, s.tool_name) for s in given]
    assert [str(s.tool_result) for s in tools if s.tool_name == "get_frames"] == [s.content for s in given if s.tool_name == "get_frames"]
    # the task: the prompt the Team was run with, the question and the line saying who has the clip
    assert imported.task.query.startswith(seed_run.trace.task.query) and "is with the watcher" in imported.task.query
