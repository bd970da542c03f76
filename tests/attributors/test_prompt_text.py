"""Trace rendering for prompts: numbering, shortening, fitting, windows, media."""

from __future__ import annotations

from faultlens.attributors import prompt_text
from faultlens.middleware.model.trace import Media, Step, StepKind

from .conftest import numbered_trace, team_trace


def test_step_shows_number_agent_kind_tool_and_error():
    step = Step(index=4, agent="searcher", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": "x"},
                tool_result={"hits": 0}, error="no results")
    text = prompt_text.render_step(step)
    assert text.splitlines()[0] == "[step 4] agent=searcher kind=tool_call"
    assert 'tool call: search({"q": "x"})' in text and 'tool result: {"hits": 0}' in text and "ERROR: no results" in text


def test_shorten_keeps_head_and_tail_with_visible_marker():
    text = "HEAD " + "x" * 5000 + " TAIL"
    short = prompt_text.shorten(text, 300)
    assert short.startswith("HEAD") and short.endswith("TAIL") and "characters cut" in short
    assert len(short) <= 300 + 40
    assert prompt_text.shorten("short", 300) == "short"


def test_fit_steps_picks_the_longest_limit_that_fits():
    trace = numbered_trace(10, marker_at=3, words=200)
    text, limit = prompt_text.fit_steps(trace.steps, 6000)
    assert limit < prompt_text.STEP_LIMITS[0] and len(text) <= 6000
    assert prompt_text.fit_steps(trace.steps, 100) is None


def test_render_prefix_omits_earliest_steps_with_marker():
    trace = numbered_trace(200, marker_at=199, words=30)
    text = prompt_text.render_prefix(trace.steps, 3000, focus=199)
    assert len(text) <= 3000 + 200
    assert "[steps 0-" in text and "omitted" in text
    assert "[step 199]" in text and "WRONGSTEP" in text


def test_windows_cover_every_step_and_overlap():
    for n, size, overlap in [(1, 5, 1), (10, 4, 1), (60, 7, 2), (5, 10, 3)]:
        spans = prompt_text.windows(n, size, overlap)
        covered = sorted({i for lo, hi in spans for i in range(lo, hi)})
        assert covered == list(range(n))
        assert all(hi - lo <= size for lo, hi in spans)
        assert all(b[0] == a[1] - overlap for a, b in zip(spans, spans[1:]))


def test_window_size_respects_budget():
    trace = numbered_trace(50, marker_at=0, words=20)
    size = prompt_text.window_size(trace.steps, 2000)
    assert 1 <= size < 50
    assert len(prompt_text.render_steps(trace.steps[:size], prompt_text.MIN_STEP_LIMIT)) <= 2000


def test_media_placeholders_and_image_parts(tmp_path):
    png = tmp_path / "chart.png"
    png.write_bytes(b"\x89PNG fake")
    trace = team_trace()
    trace.steps[4].media = [Media(mime_type="image/png", path=str(png)), Media(mime_type="video/mp4", uri="file:///clip.mp4", frame_index=3)]
    text = prompt_text.render_step(trace.steps[4])
    assert "[image not shown: image/png" in text and "[video frame not shown: video/mp4 frame 3" in text
    parts, notes = prompt_text.image_parts(trace, trace.steps)
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert urls == ["data:image/png;base64,iVBORyBmYWtl"]
    assert any("not an image" in n for n in notes)
    assert prompt_text.user_content("hi", trace, trace.steps, vision=False) == "hi"


def test_context_budget_in_characters_grows_with_the_model():
    assert prompt_text.char_budget(128_000) > prompt_text.char_budget(8192) > prompt_text.char_budget(2048) >= 2000
