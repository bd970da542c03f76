"""litellm instrumentation: every completion (sync, async, streaming, failing) is a chat step.

Model calls go to litellm's `mock_response` (a test double for a provider);
what is checked is what the tracer records around them.
"""

import litellm
import pytest

from faultlens.middleware import StepKind, Tracer
from faultlens.middleware.capture.instrument.litellm import openai_to_genai

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.fixture
def tracer(tmp_path):
    t = Tracer(db=tmp_path / "l.db")
    t.instrument_litellm()
    yield t
    t.shutdown()


def chat_steps(tracer, run_id):
    return [s for s in tracer.store.get_trace(run_id).steps if s.kind is StepKind.llm_call]


def test_sync_and_streaming_calls(tracer):
    @tracer.agent(name="talker")
    def talker() -> None:
        litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="hello there")
        for _ in litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="streamed reply", stream=True):
            pass

    with tracer.run(task="chat") as run:
        talker()
    steps = chat_steps(tracer, run.id)
    assert [s.content for s in steps] == ["hello there", "streamed reply"]
    assert all(s.agent == "talker" and s.error is None for s in steps)
    assert steps[0].metadata["input_messages"][0] == {"role": "system", "parts": [{"type": "text", "content": "be brief"}]}


async def test_async_and_async_streaming_calls(tracer):
    @tracer.agent(name="async_talker")
    async def talker() -> None:
        await litellm.acompletion(model="gpt-4o-mini", messages=MESSAGES, mock_response="async hello")
        stream = await litellm.acompletion(model="gpt-4o-mini", messages=MESSAGES, mock_response="async stream", stream=True)
        async for _ in stream:
            pass

    async with tracer.run(task="chat") as run:
        await talker()
    steps = chat_steps(tracer, run.id)
    assert sorted(s.content for s in steps) == ["async hello", "async stream"]
    assert all(s.agent == "async_talker" for s in steps)


def test_failed_call_is_an_error_step(tracer):
    with tracer.run(task="fail") as run:
        with pytest.raises(Exception):
            litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response=Exception("provider down"))
    [step] = chat_steps(tracer, run.id)
    assert step.failed and "provider down" in step.error and step.agent == "main"


def test_calls_outside_a_run_are_not_stored(tracer):
    litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="unobserved")
    assert tracer.store.count_traces() == 0


def test_openai_messages_become_genai_parts():
    converted = openai_to_genai(
        [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "http://x/a.png"}}]},
        ]
    )
    assert converted[0]["parts"] == [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}]
    assert converted[1]["parts"] == [{"type": "tool_call_response", "id": "c1", "response": "42"}]
    assert converted[2]["parts"][1] == {"type": "uri", "modality": "image", "uri": "http://x/a.png"}


def test_lessons_shown_to_an_agent_are_on_its_model_calls(tracer):
    @tracer.agent(name="student")
    def student() -> None:
        tracer.set_lessons(["lesson-7"])
        litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="ok")

    with tracer.run(task="learn") as run:
        student()
    [step] = chat_steps(tracer, run.id)
    assert step.lessons == ["lesson-7"] and step.agent == "student"
