"""The four LLM methods against a scripted litellm test double: good, malformed
and out-of-range answers, call counts, windowing, vision parts, reference use."""

from __future__ import annotations

import json
import math
import re

import pytest

from faultlens import attributors
from faultlens.middleware.model.trace import AttributionStatus, Media, Trace

from .conftest import answer, numbered_trace, shown_steps, team_trace, user_text


def get(name, tmp_path, **kw):
    return attributors.get(name, model="scripted/judge", cache_dir=str(tmp_path / "cache"), retry_wait=0.01, **kw)


def verdict_for(step, agent, mode="A.2"):
    return lambda messages, params: answer(agent=agent, step=step, mode=mode, reason="misspelt name", confidence=0.8)


def test_all_at_once_good_answer(scripted, tmp_path, trace):
    double = scripted(verdict_for(2, "searcher"))
    result = get("all_at_once", tmp_path).attribute(trace)
    assert result.status == AttributionStatus.ok
    assert (result.agent, result.step, result.mode, result.confidence) == ("searcher", 2, "A.2", 0.8)
    assert len(double.calls) == 1 and result.cost.calls == 1
    assert result.cost.input_tokens == 100 and result.cost.output_tokens == 20
    assert result.backend == "litellm" and result.prompt_version == "all_at_once/v1"
    assert result.raw == [double.calls and verdict_for(2, "searcher")(None, None)]
    prompt = user_text(double.calls[0]["messages"])
    # Every step is numbered and shows its agent and kind; the taxonomy is in the system prompt.
    assert shown_steps(double.calls[0]["messages"]) == list(range(len(trace.steps)))
    assert "[step 2] agent=searcher kind=tool_call" in prompt
    assert "A.2 wrong tool parameters" in double.calls[0]["messages"][0]["content"]
    # Unknown model: no price, so USD is 0 and the attribution says so.
    assert result.cost.usd == 0 and "no price" in result.details["cost_notes"][0]


@pytest.mark.parametrize(
    "reply, complaint",
    [
        ("I think it was the searcher at step 2.", "no JSON object"),
        ('{"agent": "searcher", "step": 2, "mode": "A.2"', "no JSON object"),
        (answer(agent="searcher", step=99, mode="A.2", reason="x"), "step 99 is outside"),
        (answer(agent="searcher", step=-1, mode="A.2", reason="x"), "step -1 is outside"),
        (answer(agent="librarian", step=2, mode="A.2", reason="x"), "unknown agent 'librarian'"),
        (answer(agent="searcher", step=2, mode="Z.9", reason="x"), "unknown failure mode 'Z.9'"),
        (answer(agent="searcher", step="two", mode="A.2", reason="x"), "field 'step'"),
        (answer(agent="searcher", mode="A.2", reason="x"), "field 'step'"),
    ],
)
def test_bad_answers_are_unparsed_never_guessed(scripted, tmp_path, trace, reply, complaint):
    scripted(lambda m, p: reply)
    result = get("all_at_once", tmp_path).attribute(trace)
    assert result.status == AttributionStatus.unparsed
    assert complaint in result.error
    assert result.step is None and result.agent is None and result.mode is None
    assert result.raw == [reply]
    assert result.cost.calls == 1


@pytest.mark.parametrize(
    "reply",
    [
        "Here is my verdict:\n```json\n" + answer(agent="Searcher", step=2, mode="a.2", reason="x") + "\n```",
        'Sure! {"agent": "searcher", "step": 2, "mode": "A.2 wrong tool parameters", "reason": "x",}',
        answer(agent="searcher", step=2, mode="wrong tool parameters", reason="x"),
    ],
)
def test_tolerant_parser_reads_wrapped_answers(scripted, tmp_path, trace, reply):
    scripted(lambda m, p: reply)
    result = get("all_at_once", tmp_path, structured="text").attribute(trace)
    assert result.status == AttributionStatus.ok, result.error
    assert (result.agent, result.step, result.mode) == ("searcher", 2, "A.2")


def test_schema_sent_when_provider_supports_it_else_in_prompt(scripted, tmp_path, trace):
    double = scripted(verdict_for(2, "searcher"))
    get("all_at_once", tmp_path, structured="schema").attribute(trace)
    fmt = double.calls[0]["params"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["properties"]["step"]["type"] == "integer"
    double = scripted(verdict_for(2, "searcher"))
    result = get("all_at_once", tmp_path, structured="auto", cache=False).attribute(trace)
    # litellm knows no schema support for the unknown "scripted" provider: the schema goes in the prompt.
    assert "response_format" not in double.calls[0]["params"]
    assert "JSON schema" in user_text(double.calls[0]["messages"])
    assert result.details["structured_output"] == ["text"]


def test_reference_answer_only_with_reference(scripted, tmp_path, trace):
    double = scripted(verdict_for(2, "searcher"))
    get("all_at_once", tmp_path, with_reference=False).attribute(trace)
    get("all_at_once", tmp_path, with_reference=True).attribute(trace)
    without, with_ref = (user_text(c["messages"]) for c in double.calls)
    assert "52" not in without and "REFERENCE ANSWER (the correct final answer): 52" in with_ref
    assert "expected 52" in with_ref  # the evaluator's note could leak the answer, so it is shown only with the reference


def test_secrets_are_redacted_before_sending(scripted, tmp_path):
    trace = team_trace()
    trace.steps[2].tool_arguments = {"query": "Marla Voss", "api_key": "sk-abcdefghijklmnopqrstuvwxyz123456"}
    double = scripted(verdict_for(2, "searcher"))
    get("all_at_once", tmp_path).attribute(trace)
    sent = json.dumps(double.calls[0]["messages"])
    assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in sent and "[REDACTED]" in sent


def judge_marker(messages, params):
    """A scripted judge that finds the WRONGSTEP marker like an oracle reading the prompt."""
    text = user_text(messages)
    question = text.rsplit("QUESTION:", 1)[1]
    marked = [int(n) for n in re.findall(r"^\[step (\d+)\][^\n]*\n[^\[]*WRONGSTEP", text, re.M)]
    if '"half"' in question:
        lo, mid, hi = map(int, re.search(r"FIRST half \(steps (\d+) to (\d+)\) or the SECOND half \(steps \d+ to (\d+)\)", question).groups())
        target = marked[0] if marked else hi
        return answer(half="first" if target <= mid else "second", reason="marker")
    if '"decisive"' in question:
        step = int(re.search(r"Look at \[step (\d+)\]", question).group(1))
        return answer(decisive=step in marked, mode="R.1" if step in marked else None, reason="checked")
    if "identified as the decisive error" in question:
        return answer(mode="R.1", reason="invented value", confidence=0.9)
    shown = shown_steps(messages)
    pick = marked[0] if marked else shown[-1]
    agent = re.search(rf"^\[step {pick}\] agent=(\S+)", text, re.M).group(1)
    return answer(agent=agent, step=pick, mode="R.1", reason="invented value", confidence=0.9 if marked else 0.1)


@pytest.mark.parametrize("method", ["all_at_once", "step_by_step", "binary_search", "hybrid"])
def test_each_method_finds_the_marked_step(scripted, tmp_path, method):
    trace = numbered_trace(12, marker_at=7)
    double = scripted(judge_marker)
    result = get(method, tmp_path).attribute(trace)
    assert result.status == AttributionStatus.ok, result.error
    assert (result.step, result.agent, result.mode) == (7, "agent1", "R.1")
    assert result.cost.calls == len(double.calls)
    assert result.method == method


@pytest.mark.parametrize("n_steps", [1, 2, 3, 5, 8, 13, 32, 100])
def test_binary_search_call_bound(scripted, tmp_path, n_steps):
    for marker in {0, n_steps // 2, n_steps - 1}:
        trace = numbered_trace(n_steps, marker_at=marker, trace_id=f"b{n_steps}-{marker}", words=1)
        double = scripted(judge_marker)
        result = get("binary_search", tmp_path, cache=False).attribute(trace)
        assert result.step == marker
        assert len(double.calls) <= math.ceil(math.log2(n_steps)) + 2


def test_step_by_step_stops_at_first_decisive_step(scripted, tmp_path):
    double = scripted(judge_marker)
    result = get("step_by_step", tmp_path).attribute(numbered_trace(10, marker_at=4))
    assert result.step == 4 and len(double.calls) == 5
    assert [t["decisive"] for t in result.details["trials"]] == [False] * 4 + [True]


def test_step_by_step_with_no_decisive_step_is_unparsed(scripted, tmp_path):
    scripted(lambda m, p: answer(decisive=False, mode=None, reason="fine"))
    result = get("step_by_step", tmp_path).attribute(numbered_trace(4, marker_at=0))
    assert result.status == AttributionStatus.unparsed and result.step is None
    assert "none of the 4 steps" in result.error and len(result.raw) == 4


def test_hybrid_walks_only_the_named_agents_steps(scripted, tmp_path):
    double = scripted(judge_marker)
    trace = numbered_trace(10, marker_at=5)
    result = get("hybrid", tmp_path).attribute(trace)
    judged = [t["step"] for t in result.details["trials"]]
    assert all(trace.steps[s].agent == "agent1" for s in judged)
    assert judged == [1, 3, 5] and result.step == 5
    assert len(double.calls) == 1 + 3


def test_windowing_keeps_the_decisive_step_reachable(scripted, tmp_path):
    trace = numbered_trace(60, marker_at=41, words=40)
    double = scripted(judge_marker)
    # A context far too small for 60 steps forces windows.
    result = get("all_at_once", tmp_path, context_tokens=2000, max_tokens=100).attribute(trace)
    windows = result.details["windows"]
    assert len(windows) > 2
    covered = set()
    for lo, hi in windows:
        covered.update(range(lo, hi + 1))
    assert covered == set(range(60))
    assert any(b[0] <= a[1] for a, b in zip(windows, windows[1:]))  # windows overlap
    assert result.status == AttributionStatus.ok and result.step == 41
    # One call per window, then the picks among differing window winners (in groups when they do not fit one prompt).
    assert 1 <= result.details["pick_calls"] < len(windows)
    assert len(double.calls) == len(windows) + result.details["pick_calls"]
    # No single request carried the whole trace.
    assert all(len(shown_steps(c["messages"])) < 60 for c in double.calls)
    assert 41 in shown_steps(double.calls[-1]["messages"])


def vision_trace() -> Trace:
    trace = team_trace()
    trace.steps[4].media = [Media(mime_type="image/png", data="iVBORw0KGgo=", caption="chart")]
    return trace


def test_image_parts_only_for_vision_models(scripted, tmp_path, monkeypatch):
    import faultlens.attributors.llm as llm

    double = scripted(verdict_for(2, "searcher"))
    get("all_at_once", tmp_path).attribute(vision_trace())
    content = double.calls[0]["messages"][1]["content"]
    assert isinstance(content, str) and "[image not shown: image/png" in content

    monkeypatch.setattr(llm.LLMClient, "supports_vision", lambda self: True)
    double = scripted(verdict_for(2, "searcher"))
    get("all_at_once", tmp_path).attribute(vision_trace())
    content = double.calls[0]["messages"][1]["content"]
    assert isinstance(content, list)
    images = [p for p in content if p["type"] == "image_url"]
    assert images == [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]


def test_vision_capability_comes_from_litellm(tmp_path):
    from faultlens.attributors.llm import LLMClient

    assert LLMClient(model="openai/gpt-4o", cache=False).supports_vision()
    assert not LLMClient(model="openai/gpt-3.5-turbo", cache=False).supports_vision()


def test_empty_trace_is_an_error(scripted, tmp_path):
    from faultlens.middleware.model.trace import Outcome, Task

    double = scripted(verdict_for(0, "x"))
    result = get("all_at_once", tmp_path).attribute(Trace(task=Task(query="q"), outcome=Outcome(success=False)))
    assert result.status == AttributionStatus.error and not double.calls


def test_sync_attribute_works_inside_a_running_event_loop(scripted, tmp_path, trace):
    import asyncio

    scripted(verdict_for(2, "searcher"))
    method = get("all_at_once", tmp_path)

    async def inside():
        return method.attribute(trace)  # e.g. from an async web handler

    assert asyncio.run(inside()).step == 2


def test_async_entry_point_and_concurrent_traces(scripted, tmp_path):
    import asyncio

    double = scripted(judge_marker)
    method = get("all_at_once", tmp_path)
    traces = [numbered_trace(6, marker_at=i, trace_id=f"c{i}") for i in range(6)]

    async def main():
        return await asyncio.gather(*(method.aattribute(t) for t in traces))

    results = asyncio.run(main())
    assert [r.step for r in results] == list(range(6))
    assert all(r.cost.calls == 1 for r in results) and len(double.calls) == 6
