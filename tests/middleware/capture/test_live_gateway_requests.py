"""What a client's request may make the gateway do: only the OpenAI chat parameters reach the configured upstream.

Two local HTTP servers stand in for the world: the configured upstream (answers
like an OpenAI-compatible API and records every request) and a bystander (an
address a client might name to steal the gateway's key; it records anything
that reaches it). Everything else is real: litellm, the gateway over HTTP, the
SQLite store.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultlens.middleware.capture.live_gateway import Gateway
from faultlens.middleware.capture.upstream import LiteLLMUpstream
from faultlens.middleware.replay.chat_request import FORWARDED, REFUSED, RequestRefused, check_chat_request, safe_message
from faultlens.middleware.store import open_store
from faultlens.server.gateway_routes import create_gateway_app
from faultlens.server.run import ServerThread
from tests.http_double import JsonDouble

KEY = "sk-gateway-upstream-key-0123456789"
BODY = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}


class Recorder(JsonDouble):
    """A local server that records each request (path, headers, body) and answers with a chat completion."""

    def __init__(self, status: int = 200, delay: float = 0.0):
        self.status = status
        self.delay = delay
        super().__init__(_answer)

    @property
    def url(self) -> str:
        return self.root


def _answer(server: JsonDouble, body: dict, handler) -> tuple[int, dict]:
    server.requests.append({"path": handler.path, "auth": handler.headers.get("authorization"), "body": body})
    time.sleep(server.delay)
    if server.status != 200:
        return server.status, {"error": {"message": "upstream is down", "type": "server_error"}}
    return 200, {"id": "c1", "object": "chat.completion", "created": 1, "model": "up",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


@pytest.fixture(scope="module")
def world():
    upstream, bystander = Recorder(), Recorder()
    yield upstream, bystander
    upstream.shutdown()
    bystander.shutdown()


@pytest.fixture(scope="module")
def served(world, tmp_path_factory):
    upstream, _ = world
    store = open_store(tmp_path_factory.mktemp("gw") / "runs.db")
    gateway = Gateway(LiteLLMUpstream("openai/up", api_base=f"{upstream.url}/v1", api_key=KEY), store)
    with ServerThread(create_gateway_app(gateway)) as server:
        yield server, gateway, store
    gateway.close()


def post(server, body, agent: str = "solver", **kwargs) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(f"{server.url}/agent/{agent}/v1/chat/completions", content=content,
                      headers={"content-type": "application/json", **kwargs.pop("headers", {})}, timeout=30, **kwargs)


@pytest.mark.parametrize("field,value", [
    ("base_url", "BYSTANDER/v1"), ("api_base", "BYSTANDER/v1"), ("api_key", "sk-other"), ("custom_llm_provider", "ollama"),
    ("extra_headers", {"x": "1"}), ("headers", {"x": "1"}), ("mock_response", "forged"), ("num_retries", 6), ("timeout", 1),
    ("api_version", "2024-01-01"), ("extra_body", {"api_base": "BYSTANDER"}),
])
def test_a_routing_or_credential_field_gets_400_naming_it_and_nothing_is_sent(world, served, field, value):
    upstream, bystander = world
    server, gateway, _ = served
    before = len(upstream.requests)
    value = json.loads(json.dumps(value).replace("BYSTANDER", bystander.url))
    answer = post(server, {**BODY, field: value})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == field and field in answer.json()["error"]["message"]
    assert bystander.requests == [] and len(upstream.requests) == before


def test_an_allowed_request_reaches_only_the_configured_upstream_with_its_key(world, served):
    upstream, bystander = world
    server, gateway, store = served
    answer = post(server, {**BODY, "temperature": 0.2, "seed": 7, "x_unknown": "left out"}, headers={"X-Faultlens-Run": "allowed"})
    assert answer.status_code == 200, answer.text
    sent = upstream.requests[-1]
    assert sent["auth"] == f"Bearer {KEY}" and sent["body"]["temperature"] == 0.2 and sent["body"]["seed"] == 7
    assert "x_unknown" not in sent["body"] and bystander.requests == []
    assert gateway.flush(10)
    step = store.get_trace("allowed").steps[0]
    assert step.metadata["dropped_fields"] == ["x_unknown"] and "x_unknown" not in step.metadata["request"]


def test_an_upstream_error_is_one_request_not_retried(tmp_path):
    failing = Recorder(status=500)
    gateway = Gateway(LiteLLMUpstream("openai/up", api_base=f"{failing.url}/v1", api_key=KEY), None)
    with ServerThread(create_gateway_app(gateway)) as server:
        answer = post(server, BODY)
    failing.shutdown()
    assert answer.status_code == 500 and len(failing.requests) == 1


def test_a_hanging_upstream_times_out_with_504():
    hanging = Recorder(delay=20)
    gateway = Gateway(LiteLLMUpstream("openai/up", api_base=f"{hanging.url}/v1", api_key=KEY, timeout=1.0), None)
    started = time.monotonic()
    with ServerThread(create_gateway_app(gateway)) as server:
        answer = post(server, BODY)
    took = time.monotonic() - started
    hanging.shutdown()
    assert answer.status_code == 504 and answer.json()["error"]["type"] == "upstream_timeout"
    assert took < 15 and len(hanging.requests) == 1


def test_an_agent_name_cannot_pick_the_provider_or_a_path(world):
    upstream, bystander = world
    gateway = Gateway(LiteLLMUpstream("openai/{agent}", api_base=f"{upstream.url}/v1", api_key=KEY), None)
    with ServerThread(create_gateway_app(gateway)) as server:
        for name in ("ollama/x", "../x", "a b", "x?y=1"):
            answer = httpx.post(f"{server.url}/v1/chat/completions", json=BODY, headers={"X-Faultlens-Agent": name})
            assert answer.status_code == 400, (name, answer.text)
            assert answer.json()["error"]["param"] == "agent"
        fine = httpx.post(f"{server.url}/v1/chat/completions", json=BODY, headers={"X-Faultlens-Agent": "solver-1.b_2"}, timeout=30)
    assert fine.status_code == 200 and upstream.requests[-1]["body"]["model"] == "solver-1.b_2"
    assert bystander.requests == []


def test_a_lone_surrogate_gets_400_and_recording_goes_on(tmp_path, world):
    upstream, _ = world
    store = open_store(tmp_path / "runs.db")
    gateway = Gateway(LiteLLMUpstream("openai/up", api_base=f"{upstream.url}/v1", api_key=KEY), store, max_pending=20)
    with ServerThread(create_gateway_app(gateway)) as server:
        raw = '{"model": "m", "user": "\\ud800", "messages": [{"role": "user", "content": "hi"}]}'
        bad = post(server, raw, headers={"X-Faultlens-Run": "sur"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "user"
        for _ in range(30):
            assert post(server, BODY, headers={"X-Faultlens-Run": "sur"}).status_code == 200
        assert gateway.flush(20)
    gateway.close()
    assert len(store.get_trace("sur").steps) == 30 and gateway.status()["dropped"] == 0


@pytest.mark.parametrize("body,param", [
    ({"model": "m", "messages": ["not an object"]}, "messages[0]"),
    ({"model": "m", "messages": [{"content": "no role"}]}, "messages[0].role"),
    ({"model": "m", "messages": "hi"}, "messages"),
    ({"model": "m"}, "messages"),
    ({**BODY, "stream_options": "yes"}, "stream_options"),
    ({**BODY, "stream": "yes"}, "stream"),
    ({**BODY, "temperature": "hot"}, "temperature"),
    ({**BODY, "tools": {"type": "function"}}, "tools"),
    ({**BODY, "stop": 5}, "stop"),
    ({"model": "m", "messages": [{"role": "assistant", "tool_calls": True}]}, "messages[0].tool_calls"),
    ({"model": "m", "messages": [{"role": "developer", "name": "x"}]}, "messages[0]"),
    ({"model": "m", "messages": [{"role": "tool", "content": "42"}]}, "messages[0]"),
    ({"model": "m", "messages": [{"role": "user", "content": "hi", "tool_calls": []}]}, "messages[0]"),
    ({"model": "m", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
    ({"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content"),
])
def test_a_malformed_body_gets_400_naming_the_field(served, body, param):
    server, _, _ = served
    answer = post(server, body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


def test_deep_nesting_and_non_objects_get_400(served):
    server, _, _ = served
    deep = '{"model": "m", "messages": [{"role": "user", "content": "x"}], "metadata": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
    for raw in (deep, "[1, 2]", '"text"', "null", "{"):
        answer = post(server, raw)
        assert answer.status_code == 400, (raw[:40], answer.text)
    # the connection still serves the next request
    assert post(server, BODY).status_code == 200


def test_safe_message_drops_tracebacks_and_paths():
    message = 'litellm.BadRequestError: bad tools at /srv/app/.venv/lib/python3.11/site-packages/litellm/main.py", line 12\nTraceback (most recent call last):\n  File "/x/y.py"'
    safe = safe_message(message)
    assert "Traceback" not in safe and ".py" not in safe and "bad tools" in safe


_names = st.one_of(st.sampled_from(sorted(REFUSED | FORWARDED)), st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12))
_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=False), st.just("BYSTANDER"),
                                 st.just("BYSTANDER/v1"), st.text(max_size=8)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=6)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(_names, _values, min_size=1, max_size=4))
def test_property_random_extra_fields_never_reach_another_address(world, served, extra):
    upstream, bystander = world
    server, _, _ = served
    extra = json.loads(json.dumps(extra).replace("BYSTANDER", bystander.url))
    extra.pop("messages", None)
    before = len(upstream.requests)
    answer = post(server, {**BODY, **extra})
    assert answer.status_code < 500 or answer.status_code == 502, answer.text
    assert "Traceback" not in answer.text and ".py" not in answer.text
    assert bystander.requests == []
    for sent in upstream.requests[before:]:
        assert sent["auth"] == f"Bearer {KEY}" and set(sent["body"]) <= FORWARDED
    if any(name in REFUSED for name in extra):
        assert answer.status_code == 400 and len(upstream.requests) == before


def test_check_chat_request_is_the_one_rule():
    with pytest.raises(RequestRefused) as refused:
        check_chat_request({**BODY, "api_key": "x"})
    assert refused.value.field == "api_key"
    assert check_chat_request(dict(BODY)) == BODY
