"""The LLM client around litellm: retries, cache, budget, accounting, parsing."""

from __future__ import annotations

import asyncio

import litellm
import pytest
from pydantic import BaseModel

from faultlens import attributors
from faultlens.attributors.llm import BudgetExceeded, LLMClient, LLMError, ParseError, extract_json, parse_answer
from faultlens.middleware.model.trace import AttributionStatus

from .conftest import answer


class Pair(BaseModel):
    a: int
    b: str


def rate_limited_then(text: str, failures: int):
    state = {"n": 0}

    def script(messages, params):
        state["n"] += 1
        if state["n"] <= failures:
            return litellm.RateLimitError(message="slow down", llm_provider="scripted", model="judge")
        return text

    return script


def client(tmp_path, **kw) -> LLMClient:
    kw.setdefault("cache_dir", tmp_path / "cache")
    return LLMClient(model="scripted/judge", retry_wait=0.01, **kw)


MSG = [{"role": "user", "content": "hello"}]


def test_retries_after_rate_limit(scripted, tmp_path):
    double = scripted(rate_limited_then(answer(a=1, b="x"), failures=2))
    reply = client(tmp_path).call(MSG, Pair)
    assert len(double.calls) == 3
    assert reply.answer == Pair(a=1, b="x")


def test_retries_after_rate_limit_async(scripted, tmp_path):
    double = scripted(rate_limited_then(answer(a=2, b="y"), failures=1))
    c = client(tmp_path)
    reply = asyncio.run(c.acall(MSG, Pair))
    assert len(double.calls) == 2 and reply.answer.a == 2
    assert c.cost.calls == 1  # one successful call is counted; failed attempts cost nothing


def test_gives_up_after_max_retries_with_clear_error(scripted, tmp_path):
    double = scripted(rate_limited_then("never", failures=100))
    with pytest.raises(LLMError, match="RateLimitError after 2 retries"):
        client(tmp_path, max_retries=2).call(MSG, Pair)
    assert len(double.calls) == 3


def test_server_error_is_retried_but_bad_request_is_not(scripted, tmp_path):
    errors = iter([litellm.InternalServerError(message="boom", llm_provider="scripted", model="judge")])
    double = scripted(lambda m, p: next(errors, answer(a=3, b="z")))
    assert client(tmp_path).call(MSG, Pair).answer.a == 3 and len(double.calls) == 2
    double = scripted(lambda m, p: litellm.BadRequestError(message="no", llm_provider="scripted", model="judge"))
    with pytest.raises(LLMError, match="BadRequestError"):
        client(tmp_path, cache=False).call(MSG, Pair)
    assert len(double.calls) == 1


def test_attribution_after_rate_limit(scripted, tmp_path, trace):
    double = scripted(rate_limited_then(answer(agent="searcher", step=2, mode="A.2", reason="x"), failures=1))
    result = attributors.get("all_at_once", model="scripted/judge", cache_dir=str(tmp_path), retry_wait=0.01).attribute(trace)
    assert result.status == AttributionStatus.ok and result.step == 2
    assert len(double.calls) == 2 and result.cost.calls == 1


def test_model_failure_is_status_error(scripted, tmp_path, trace):
    scripted(lambda m, p: litellm.AuthenticationError(message="bad key", llm_provider="scripted", model="judge"))
    result = attributors.get("all_at_once", model="scripted/judge", cache_dir=str(tmp_path)).attribute(trace)
    assert result.status == AttributionStatus.error and "AuthenticationError" in result.error and result.step is None


def test_cache_second_run_makes_zero_calls(scripted, tmp_path, trace):
    double = scripted(lambda m, p: answer(decisive=True, mode="A.2", reason="x"))
    first = attributors.get("step_by_step", model="scripted/judge", cache_dir=str(tmp_path / "c")).attribute(trace)
    n = len(double.calls)
    assert n == 1 and first.cost.calls == 1
    second = attributors.get("step_by_step", model="scripted/judge", cache_dir=str(tmp_path / "c")).attribute(trace)
    assert len(double.calls) == n  # nothing reached the model
    assert second.cost.calls == 0 and second.details["cached_calls"] == 1
    assert (second.step, second.mode, second.raw) == (first.step, first.mode, first.raw)
    assert (tmp_path / "c" / "llm.sqlite").exists()
    # A different parameter is a different request.
    attributors.get("step_by_step", model="scripted/judge", cache_dir=str(tmp_path / "c"), temperature=0.5).attribute(trace)
    assert len(double.calls) == n + 1


def test_cache_can_be_disabled(scripted, tmp_path):
    double = scripted(lambda m, p: answer(a=1, b="x"))
    c = client(tmp_path, cache=False)
    c.call(MSG, Pair)
    c.call(MSG, Pair)
    assert len(double.calls) == 2


def test_budget_in_calls_stops_cleanly(scripted, tmp_path):
    double = scripted(lambda m, p: answer(decisive=False, mode=None, reason="fine"))
    from .conftest import numbered_trace

    result = attributors.get("step_by_step", model="scripted/judge", cache_dir=str(tmp_path), max_calls=3).attribute(numbered_trace(10, 9))
    assert result.status == AttributionStatus.error
    assert "call budget used up: 3 of 3 calls" in result.error
    assert len(double.calls) == 3 and result.cost.calls == 3 and len(result.raw) == 3


def test_budget_in_usd_stops_cleanly(tmp_path):
    # litellm's mock_response prices a known model from its local cost map.
    c = LLMClient(model="openai/gpt-4o-mini", cache_dir=tmp_path, budget_usd=1e-9, extra={"mock_response": answer(a=1, b="x")})
    reply = c.call(MSG, Pair)
    assert reply.cost.usd > 0 and not c.cost_notes
    with pytest.raises(BudgetExceeded, match="USD budget used up"):
        c.call([{"role": "user", "content": "another"}], Pair)
    assert c.cost.calls == 1


def test_budget_usd_in_attribution(tmp_path, trace):
    from .conftest import numbered_trace

    method = attributors.get("step_by_step", model="openai/gpt-4o-mini", cache_dir=str(tmp_path), budget_usd=1e-9,
                             mock_response=answer(decisive=False, mode=None, reason="fine"))
    result = method.attribute(numbered_trace(5, 4))
    assert result.status == AttributionStatus.error and "USD budget" in result.error
    assert result.cost.calls == 1 and result.cost.usd > 0 and result.cost.input_tokens > 0


def test_concurrency_limit(scripted, tmp_path):
    import threading

    live, peak, lock = [0], [0], threading.Lock()

    class Slow(BaseModel):
        a: int

    c = client(tmp_path, concurrency=2, cache=False)

    async def main():
        async def one(i):
            return await c.acall([{"role": "user", "content": f"q{i}"}], Slow)

        original = litellm.acompletion

        async def counting(**kw):
            with lock:
                live[0] += 1
                peak[0] = max(peak[0], live[0])
            await asyncio.sleep(0.05)
            with lock:
                live[0] -= 1
            return await original(**kw)

        litellm.acompletion = counting
        try:
            return await asyncio.gather(*(one(i) for i in range(6)))
        finally:
            litellm.acompletion = original

    scripted(lambda m, p: answer(a=1))
    replies = asyncio.run(main())
    assert len(replies) == 6 and peak[0] == 2


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1, "b": "x"}', Pair(a=1, b="x")),
        ('```json\n{"a": 1, "b": "x"}\n```', Pair(a=1, b="x")),
        ('The answer is {"a": 1, "b": "x",} as requested.', Pair(a=1, b="x")),
        ('{"note": "braces } inside strings", "a": 1, "b": "}"}', Pair(a=1, b="}")),
    ],
)
def test_parse_answer_tolerates_wrapping(text, expected):
    assert parse_answer(text, Pair) == expected


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("no json here", "no JSON object"),
        ('{"a": 1, "b": ', "no JSON object"),
        ("{'a': 1, 'b': 'x'}", "not valid JSON"),
        ('{"a": "one", "b": "x"}', "field 'a'"),
        ('{"b": "x"}', "field 'a'"),
    ],
)
def test_parse_answer_rejects_what_it_cannot_read(text, complaint):
    with pytest.raises(ParseError, match=complaint):
        parse_answer(text, Pair)


def test_extract_json_prefers_fenced_block():
    assert extract_json('{"x": 0} then ```json {"x": 1}```') == {"x": 1}


def test_context_budget_from_litellm_or_stated_fallback():
    from faultlens.attributors.llm import FALLBACK_CONTEXT_TOKENS, context_tokens

    tokens, source = context_tokens("openai/gpt-4o-mini")
    assert tokens == litellm.get_model_info("openai/gpt-4o-mini")["max_input_tokens"] and "model info" in source
    tokens, source = context_tokens("openai/no-such-model-xyz")
    assert tokens == FALLBACK_CONTEXT_TOKENS and "fallback" in source


def test_parse_answer_accepts_raw_newlines_inside_strings():
    assert parse_answer('{"a": 1, "b": "line one\nline two"}', Pair).b == "line one\nline two"
