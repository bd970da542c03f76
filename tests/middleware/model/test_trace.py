import pytest
from pydantic import ValidationError

from faultlens.middleware import (
    Attribution,
    Cost,
    GoldLabel,
    Lesson,
    Media,
    Outcome,
    Source,
    Step,
    StepKind,
    Task,
    Trace,
    Usage,
    load_jsonl,
    write_jsonl,
)
from faultlens.middleware.errors import InputError
from faultlens.middleware.jsonl import parse_trace


def sample_trace() -> Trace:
    return Trace(
        task=Task(query="How many moons?", reference_answer="2", attachments=[Media(mime_type="image/png", path="chart.png")]),
        steps=[
            Step(index=0, agent="planner", kind=StepKind.plan, content="look it up"),
            Step(index=1, agent="searcher", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": "moons"}, tool_result={"error": "timeout"}, error="timeout"),
            Step(index=2, agent="viewer", kind=StepKind.llm_call, media=[Media(mime_type="image/jpeg", data="aGVsbG8=", frame_index=3, timestamp_s=0.5)], usage=Usage(input_tokens=10, output_tokens=3, cost_usd=0.001)),
            Step(index=3, agent="answerer", kind=StepKind.final_answer, content="3", native_id="2.1"),
        ],
        outcome=Outcome(success=False, score=0.0, evaluator="exact", detail="expected 2"),
        source=Source(framework="langgraph", benchmark="demo", modality="image"),
        gold=GoldLabel(step=1, agent="searcher", mode="A.2", reason="bad query"),
    )


def test_trace_round_trips_through_json_exactly():
    trace = sample_trace()
    again = Trace.model_validate_json(trace.model_dump_json())
    assert again == trace
    assert again.model_dump_json() == trace.model_dump_json()


def test_trace_round_trips_through_jsonl_and_gzip(tmp_path):
    traces = [sample_trace(), sample_trace()]
    for name in ("t.jsonl", "t.jsonl.gz"):
        write_jsonl(traces, tmp_path / name)
        assert load_jsonl(tmp_path / name) == traces


def test_gzip_output_is_byte_reproducible(tmp_path):
    trace = sample_trace()
    write_jsonl([trace], tmp_path / "a.jsonl.gz")
    write_jsonl([trace], tmp_path / "b" / "a.jsonl.gz")
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b" / "a.jsonl.gz").read_bytes()


def test_agents_are_collected_from_steps():
    trace = sample_trace()
    assert trace.agent_names == ["planner", "searcher", "viewer", "answerer"]
    assert trace.multi_agent and trace.failed
    assert trace.step_of("2.1").index == 3


def test_steps_must_be_numbered_in_order():
    with pytest.raises(ValidationError, match="numbered 0..n-1"):
        Trace(task=Task(query="q"), steps=[Step(index=1, agent="a")])


def test_gold_step_must_be_inside_the_trace():
    with pytest.raises(ValidationError, match="outside"):
        Trace(task=Task(query="q"), steps=[Step(index=0, agent="a")], gold=GoldLabel(step=4))


def test_media_needs_exactly_one_location():
    with pytest.raises(ValidationError, match="exactly one"):
        Media(mime_type="image/png")
    with pytest.raises(ValidationError, match="exactly one"):
        Media(mime_type="image/png", path="a.png", uri="http://x/a.png")


def test_unknown_field_is_an_error_naming_the_field():
    text = sample_trace().model_dump_json().replace('"tool_name"', '"tool_nam"', 1)
    with pytest.raises(InputError) as err:
        parse_trace(text, "f.jsonl", "line 3")
    assert err.value.record == "line 3"
    assert err.value.field == "steps.0.tool_nam"


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = sample_trace().model_dump_json()
    path.write_text(good + "\n" + good[:50] + "\n")
    with pytest.raises(InputError, match="line 2"):
        load_jsonl(path)


def test_wrong_type_names_the_field():
    data = sample_trace().model_dump(mode="json")
    data["steps"][0]["index"] = "first"
    import json

    with pytest.raises(InputError) as err:
        parse_trace(json.dumps(data), "x", 1)
    assert err.value.field == "steps.0.index"


def test_cost_adds_up():
    total = Cost(calls=1, input_tokens=5, usd=0.5) + Cost(calls=2, output_tokens=7, seconds=1.5)
    assert total == Cost(calls=3, input_tokens=5, output_tokens=7, usd=0.5, seconds=1.5)


def test_attribution_and_lesson_round_trip():
    a = Attribution(trace_id="t", method="heuristic", agent="x", step=2, mode="R.1", status="unparsed", raw=["???"])
    assert Attribution.model_validate_json(a.model_dump_json()) == a
    lesson = Lesson(agent="x", situation="s", mistake="m", advice="a")
    assert Lesson.model_validate_json(lesson.model_dump_json()) == lesson
