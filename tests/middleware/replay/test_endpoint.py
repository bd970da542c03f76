"""The record/replay/inject proxy, driven by the OpenAI Python SDK and by curl, streaming included.

The upstream model is a test double (`scripted_upstream`): a deterministic
function that answers like a chat model, with a tool call when tools are
offered. Everything around it is real: the HTTP server, the OpenAI client's
parsing, SSE streaming, the recording on disk, drift detection, injection.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import httpx
import openai
import pytest

from faultlens.injectors.proxy_mistakes import NoErrorForMode, chat_error
from faultlens.middleware.replay.endpoint import ChatProxy, litellm_upstream, sse_chunks
from faultlens.middleware.replay.session import Recording
from faultlens.server.proxy_app import create_proxy_app
from faultlens.server.run import ServerThread

TOOLS = [{"type": "function", "function": {"name": "lookup_population", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def scripted_upstream(agent: str, request: dict) -> dict:
    """Test double for a model: a tool call for the first question, then an answer with a number."""
    messages = request["messages"]
    last = messages[-1]
    if request.get("tools") and last["role"] == "user":
        message = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "lookup_population", "arguments": json.dumps({"city": "Rome"})}}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": f"Rome has 2761 thousand people (turn {len(messages)})."}
        finish = "stop"
    return {"id": "chatcmpl-random", "object": "chat.completion", "created": 1234, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def run_agent(base_url: str, stream: bool = False) -> list[str]:
    """A tiny tool-using agent on the OpenAI SDK: ask, call the tool, answer."""
    client = openai.OpenAI(base_url=base_url, api_key="not-used", max_retries=0)
    messages = [{"role": "user", "content": "How many people live in Rome?"}]
    first = client.chat.completions.create(model="any", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": '{"population_thousands": 2761}'}]
    if stream:
        chunks = client.chat.completions.create(model="any", messages=messages, stream=True,
                                                stream_options={"include_usage": True})
        answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        answer = client.chat.completions.create(model="any", messages=messages).choices[0].message.content
    return [call.function.name, call.function.arguments, answer]


def serve(proxy: ChatProxy) -> ServerThread:
    return ServerThread(create_proxy_app(proxy))


@pytest.mark.parametrize("stream", [False, True])
def test_record_then_replay_with_the_openai_sdk(tmp_path, stream):
    path = tmp_path / "run.json"
    recorder = ChatProxy.recorder(scripted_upstream, save_to=path)
    with serve(recorder) as server:
        recorded = run_agent(server.url + "/agent/researcher/v1", stream)
    assert recorded[0] == "lookup_population" and "2761" in recorded[2]
    recording = Recording.loads(path.read_text())
    assert [c.agent for c in recording.calls] == ["researcher", "researcher"]
    # Ids and clocks are derived from the request, so two recordings of one run are the same bytes.
    assert recording[0].response["id"] != "chatcmpl-random" and recording[0].response["created"] == 0

    replayer = ChatProxy.replayer(recording)
    with serve(replayer) as server:
        assert run_agent(server.url + "/agent/researcher/v1", stream) == recorded
        status = httpx.get(server.url + "/proxy/status").json()
    assert status == {"mode": "replay", "calls": 2, "replayed": 2, "live": 0, "overridden": 0, "drift": []}


def test_replay_reports_drift_when_the_program_asks_something_else(tmp_path):
    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        run_agent(server.url + "/v1")
    with serve(ChatProxy.replayer(recorder.session.recorded)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model="any", messages=[{"role": "user", "content": "How many people live in Paris?"}], tools=TOOLS)
        assert err.value.status_code == 409
        status = httpx.get(server.url + "/proxy/status").json()
    assert len(status["drift"]) == 1 and status["drift"][0]["index"] == 0 and "Paris" in status["drift"][0]["reason"]


def test_curl_records_and_replays_byte_exact_streaming_included(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}], "stream": True})

    def curl(url: str) -> bytes:
        return subprocess.run(["curl", "-sS", "-N", "-H", "content-type: application/json", "-d", body, url + "/v1/chat/completions"],
                              check=True, capture_output=True, timeout=30).stdout

    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        live = curl(server.url)
    with serve(ChatProxy.replayer(recorder.session.recorded)) as server:
        replayed = curl(server.url)
    assert live == replayed
    assert live.startswith(b"data: {") and live.endswith(b"data: [DONE]\n\n")

    injector = ChatProxy.injector(recorder.session.recorded, at=0, override=chat_error("R.3"), upstream=scripted_upstream)
    with serve(injector) as server:
        injected = curl(server.url)
    assert injected != live and b"2761" in live and b"2761" not in injected


@pytest.mark.parametrize("stream", [False, True])
def test_inject_replays_the_prefix_injects_at_t_then_runs_live(tmp_path, stream):
    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        original = run_agent(server.url + "/agent/researcher/v1", stream)
    override = chat_error("R.3", seed=1)
    live_calls: list[dict] = []

    def upstream(agent: str, request: dict) -> dict:
        live_calls.append(request)
        return scripted_upstream(agent, request)

    injector = ChatProxy.injector(recorder.session.recorded, at=1, override=override, upstream=upstream, save_to=tmp_path / "inj.json")
    with serve(injector) as server:
        injected = run_agent(server.url + "/agent/researcher/v1", stream)
        status = httpx.get(server.url + "/proxy/status").json()
    assert injected[:2] == original[:2]  # call 0 replayed exactly
    assert injected[2] != original[2] and "2761" not in injected[2]  # R.3: the number is stated wrongly
    assert status["replayed"] == 1 and status["overridden"] == 1 and live_calls == []
    assert override.injected == [{"index": 1, "agent": "researcher", "mode": "R.3", "reason": override.injected[0]["reason"]}]
    assert "2761" in override.injected[0]["reason"]
    saved = Recording.loads((tmp_path / "inj.json").read_text())
    assert saved[1].meta == {"overridden": True}


def test_inject_rewrites_a_tool_call_argument():
    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        run_agent(server.url + "/v1")
    override = chat_error("A.2", seed=0, distractors=[["Rome", "Paris", "Munich"]])
    response = override(recorder.session.recorded[0])
    call = response["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "lookup_population"
    assert json.loads(call["arguments"])["city"] in ("Paris", "Munich")
    assert override.injected[0]["reason"].startswith("calls lookup_population with")


def test_inject_says_when_no_rule_of_the_mode_applies():
    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        run_agent(server.url + "/v1")
    with pytest.raises(NoErrorForMode, match="no R.3 rule applies to call 0"):
        chat_error("R.3")(recorder.session.recorded[0])  # a tool call holds no number to restate


def test_inject_refuses_a_call_outside_the_recording():
    with pytest.raises(ValueError, match="outside the recording"):
        ChatProxy.injector(Recording(), at=0, override=chat_error("R.3"), upstream=scripted_upstream)


def test_bad_bodies_get_a_400_and_no_call_is_recorded():
    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        assert httpx.post(server.url + "/v1/chat/completions", content=b"{not json").status_code == 400
        assert httpx.post(server.url + "/v1/chat/completions", json={"model": "m"}).status_code == 400
        assert httpx.get(server.url + "/v1/models").json()["data"][0]["object"] == "model"
    assert len(recorder.session.calls) == 0


def test_litellm_upstream_goes_through_litellm(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    upstream = litellm_upstream("openai/gpt-4o-mini", mock_response="Paris.")  # litellm's own test double
    response = upstream("geographer", {"model": "ignored", "messages": [{"role": "user", "content": "Capital of France?"}], "stream": True})
    assert response["choices"][0]["message"]["content"] == "Paris."
    assert response["object"] == "chat.completion"


def test_sse_chunks_carry_tool_calls_and_usage():
    completion = scripted_upstream("a", {"messages": [{"role": "user", "content": "q"}], "tools": TOOLS})
    lines = list(sse_chunks(completion, include_usage=True))
    payloads = [json.loads(line[6:]) for line in lines[:-1]]
    assert payloads[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "lookup_population"
    assert payloads[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert payloads[2]["usage"]["total_tokens"] == 15 and lines[-1] == "data: [DONE]\n\n"


def test_an_injection_that_cannot_be_made_is_a_500_that_says_why():
    recorder = ChatProxy.recorder(scripted_upstream)
    with serve(recorder) as server:
        run_agent(server.url + "/v1")
    injector = ChatProxy.injector(recorder.session.recorded, at=0, override=chat_error("R.3"), upstream=scripted_upstream)
    with serve(injector) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError, match="no R.3 rule applies"):
            client.chat.completions.create(model="any", messages=[{"role": "user", "content": "How many people live in Rome?"}], tools=TOOLS)
