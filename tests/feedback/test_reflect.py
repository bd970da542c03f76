"""Reflection: attribution + trace → lessons, offline and through litellm."""

from __future__ import annotations

import json

from faultlens.feedback.reflect import ALL_AGENTS, LLMReflector, OfflineReflector, TerminalReflector, parse_lesson_json
from faultlens.middleware.model.trace import Attribution, AttributionStatus

from .conftest import blame_analyst, failed_trace


def test_offline_lesson_is_addressed_to_the_blamed_agent_and_records_its_provenance():
    trace = failed_trace()
    attribution = blame_analyst(trace)
    reflection = OfflineReflector().reflect(trace, attribution)
    assert reflection.status == "ok"
    [lesson] = reflection.lessons
    assert lesson.agent == "analyst"
    assert lesson.mode == "R.3"
    assert lesson.attribution_id == attribution.id and lesson.method == "offline"
    assert lesson.trace_id == trace.id and lesson.step == 2
    # built from the mode's definition and the blamed step's own content
    assert "numerical/calculation error" in lesson.mistake and "412 - 374 = 48" in lesson.mistake
    assert "Recompute" in lesson.advice
    assert "Valfos Corp" in lesson.situation


def test_offline_reflection_refuses_an_unusable_attribution():
    trace = failed_trace()
    broken = Attribution(trace_id=trace.id, method="x", status=AttributionStatus.unparsed, raw=["???"])
    out_of_range = Attribution(trace_id=trace.id, method="x", agent="analyst", step=99, mode="R.3")
    for attribution in (None, broken, out_of_range):
        reflection = OfflineReflector().reflect(trace, attribution)
        assert reflection.status == "skipped" and reflection.lessons == [] and reflection.error


def test_terminal_reflection_reads_only_the_outcome_and_addresses_everyone():
    reflection = TerminalReflector().reflect(failed_trace(), None)
    [lesson] = reflection.lessons
    assert lesson.agent == ALL_AGENTS and lesson.method == "terminal"
    assert lesson.mode == "R.3"  # a wrong number, read from the final answer alone
    assert lesson.step is None


def _good_answer() -> str:
    return json.dumps({"situation": "computing a difference of two looked-up values",
                       "mistake": "subtracted 374 from 412 and wrote 48",
                       "advice": "Recompute the subtraction digit by digit before reporting it."})


def test_llm_reflection_with_a_good_answer(monkeypatch):
    # mock_response is litellm's own test double: no network, real parsing path.
    reflector = LLMReflector("openai/gpt-4o-mini", mock_response=_good_answer())
    trace = failed_trace()
    attribution = blame_analyst(trace)
    reflection = reflector.reflect(trace, attribution)
    assert reflection.status == "ok" and reflection.cost.calls == 1
    [lesson] = reflection.lessons
    assert lesson.agent == "analyst" and lesson.mode == "R.3"
    assert lesson.method == "llm:openai/gpt-4o-mini" and lesson.attribution_id == attribution.id
    assert lesson.advice.startswith("Recompute the subtraction")
    assert "Valfos Corp" in lesson.situation  # the task text is kept for retrieval
    assert reflection.raw == [_good_answer()]
    # the prompt shows the blamed step and the mode's definition
    prompt = reflector.messages(trace, attribution)[0]["content"]
    assert ">> [2] analyst" in prompt and "computes a wrong number" in prompt


def test_llm_reflection_with_an_unparsable_answer_makes_no_lesson():
    for answer in ("Sure! The analyst should be more careful.", '{"situation": "x", "mistake": "", "advice": "y"}', "[1, 2]"):
        reflection = LLMReflector("openai/gpt-4o-mini", mock_response=answer).reflect(failed_trace(), blame_analyst(failed_trace()))
        assert reflection.status == "unparsed"
        assert reflection.lessons == []
        assert reflection.raw == [answer]


def test_llm_reflection_reports_a_failed_call():
    reflector = LLMReflector("openai/gpt-4o-mini", num_retries=0, mock_response=Exception("boom"))
    trace = failed_trace()
    reflection = reflector.reflect(trace, blame_analyst(trace))
    assert reflection.status == "error" and reflection.lessons == [] and "boom" in reflection.error


def test_parse_lesson_json_accepts_fenced_objects():
    assert parse_lesson_json("```json\n" + _good_answer() + "\n```")["mistake"].startswith("subtracted")
    assert parse_lesson_json("no json here") is None
