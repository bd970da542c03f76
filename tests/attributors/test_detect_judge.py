"""`faultlens detect --judge MODEL`: the LLM judge through litellm (its `mock_response`, a test double: no network, no key)."""

from __future__ import annotations

import json

import litellm
import pytest
from click.testing import CliRunner

from faultlens.attributors.detect.judge import JudgeReplyError, LLMJudge, judge_prompt
from faultlens.attributors.llm import LLMClient
from faultlens.middleware.model.trace import GoldLabel, Media, Outcome, Source, Step, StepKind, Task, Trace

MODEL = "openai/gpt-4o-mini"


def _run(i: int = 1, n_steps: int = 3, pad: str = "") -> Trace:
    steps = [Step(index=k, agent="searcher" if k % 2 else "planner", kind=StepKind.message, content=f"step {k} of item {i}{pad}")
             for k in range(n_steps)]
    return Trace(id=f"run-{i}", task=Task(query=f"What is the price of item {i}?", reference_answer="SECRET-ANSWER-4711"),
                 steps=steps, outcome=Outcome(success=False, detail="EVALUATOR-NOTE"), source=Source(benchmark="BENCH-NAME"),
                 gold=GoldLabel(agent="searcher", step=1, mode="R.1", reason="GOLD-REASON"),
                 metadata={"answer_key": "KEY-9931"})


@pytest.fixture()
def sent(monkeypatch) -> list[dict]:
    """Every litellm.completion call's arguments (the calls themselves still go through litellm, answered by mock_response)."""
    calls: list[dict] = []
    original = litellm.completion

    def recording(**kwargs):
        calls.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(litellm, "completion", recording)
    return calls


def judge(reply: str) -> LLMJudge:
    return LLMJudge(MODEL, client=LLMClient(model=MODEL, cache=False, max_retries=1, structured="text", extra={"mock_response": reply}))


def test_the_judge_reads_a_probability_from_the_reply(sent):
    found = judge('{"p_failed": 0.83, "reason": "the answer states a price no step gave"}').score_one(_run())
    assert (found.trace_id, found.p_failed, found.reason) == ("run-1", 0.83, None)
    assert len(sent) == 1 and sent[0]["model"] == MODEL
    # a reply with prose around the object is read too
    assert judge('Sure. {"p_failed": 0.1, "reason": "fine"} Done.').score_one(_run(2)).p_failed == 0.1


def test_the_prompt_holds_no_answer_key_gold_outcome_or_source(sent):
    judge('{"p_failed": 0.5, "reason": "unsure"}').score_one(_run())
    text = json.dumps(sent[0]["messages"])
    assert "What is the price of item 1?" in text and "step 2 of item 1" in text  # the run itself is there
    for secret in ("SECRET-ANSWER-4711", "EVALUATOR-NOTE", "BENCH-NAME", "GOLD-REASON", "KEY-9931", "OUTCOME"):
        assert secret not in text, secret
    assert judge_prompt(_run(), 10_000) == sent[0]["messages"][:2]  # what judge_prompt shows is what was sent


@pytest.mark.parametrize("reply, why", [("I think it probably failed.", "JSON"), ('{"p_failed": 1.7, "reason": "x"}', "p_failed"),
                                        ('{"p_failed": "high"}', "p_failed")])
def test_a_malformed_reply_is_an_error_naming_the_run(reply, why):
    with pytest.raises(JudgeReplyError, match=r"run run-7: the judge \(openai/gpt-4o-mini\) did not give a probability") as info:
        judge(reply).score_one(_run(7))
    assert why in str(info.value)


def test_odd_runs_get_p_failed_or_a_reason_without_a_call(sent):
    empty = Trace(id="empty", task=Task(query="q"), steps=[])
    image, video = _run(3), _run(4)
    image.steps[0].media.append(Media(mime_type="image/png", data="iVBORw0KGgo="))
    video.steps[0].media.append(Media(mime_type="video/mp4", uri="file:///tmp/clip.mp4"))
    long = _run(5, n_steps=3000, pad=" and some more text" * 10)  # more than the model's context holds
    found = {d.trace_id: d for d in judge('{"p_failed": 0.4, "reason": "r"}').score([empty, image, video, long])}
    assert found["empty"].p_failed is None and "no steps" in found["empty"].reason
    assert all(found[t].p_failed == 0.4 for t in ("run-3", "run-4", "run-5"))
    assert len(sent) == 3  # the run with no steps costs no call
    long_prompt = sent[-1]["messages"][1]["content"]
    assert "step 2999 of item 5" in long_prompt and "omitted to fit the context" in long_prompt  # the latest steps kept


def test_cli_judge_writes_the_same_predictions(tmp_path, monkeypatch):
    from faultlens.cli import cli

    original = litellm.completion
    monkeypatch.setattr(litellm, "completion", lambda **kw: original(**kw, mock_response='{"p_failed": 0.9, "reason": "r"}'))
    monkeypatch.setenv("FAULTLENS_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "runs.jsonl"
    path.write_text(_run(1).model_dump_json() + "\n" + Trace(id="no-steps", task=Task(query="q")).model_dump_json() + "\n")
    result = CliRunner().invoke(cli, ["detect", "--dataset", f"jsonl:{path}", "--out", str(tmp_path / "out"), "--judge", MODEL, "--quiet"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert rows[0] == {"trace_id": "run-1", "p_failed": 0.9} and rows[1]["p_failed"] is None and rows[1]["reason"]

    monkeypatch.setattr(litellm, "completion", lambda **kw: original(**kw, mock_response="no idea"))
    bad = CliRunner().invoke(cli, ["detect", "--dataset", f"jsonl:{path}", "--out", str(tmp_path / "bad"), "--judge", "openai/other-model", "--quiet"])
    assert bad.exit_code != 0 and "run run-1" in bad.output and "Traceback" not in bad.output
