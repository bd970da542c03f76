"""`faultlens gateway`: the server's rules (loopback, token), the runs API's outcome queueing a failed gateway run for attribution."""

from __future__ import annotations

import time

import httpx
from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.gateway import build_gateway_app
from faultlens.middleware.capture.upstream import CallableUpstream
from faultlens.middleware.store.sqlite import open_store
from faultlens.server.run import ServerThread

TOKEN = "a-token-long-enough-for-tests-0123"


def reply(agent: str, request: dict) -> dict:
    text = "The combined population is 5364 thousand." if agent == "writer" else "Rome 2761, Milan 2103."
    return {"object": "chat.completion", "model": "double", "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}


def test_a_public_bind_without_a_token_is_refused():
    result = CliRunner().invoke(cli, ["gateway", "--upstream", "openai/gpt-4o-mini", "--host", "0.0.0.0"], env={"FAULTLENS_TOKEN": ""})
    assert result.exit_code != 0 and "without a token" in result.output


def test_the_gateway_on_the_server_needs_the_token_and_a_failed_run_is_attributed(tmp_path):
    store = open_store(tmp_path / "runs.db")
    app, gateway = build_gateway_app(store, CallableUpstream(reply), lessons_for=["writer"], token=TOKEN, method="heuristic", workers=1)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"model": "m", "messages": [{"role": "user", "content": "What is the combined population of Rome and Milan?"}]}
    with ServerThread(app, token=TOKEN) as server:
        refused = httpx.post(f"{server.url}/run/r1/agent/researcher/v1/chat/completions", json=body)
        assert refused.status_code == 401 and gateway.status()["calls"] == 0
        for agent in ("researcher", "writer"):
            ok = httpx.post(f"{server.url}/run/r1/agent/{agent}/v1/chat/completions", json=body, headers=auth)
            assert ok.status_code == 200, ok.text
        assert gateway.flush(10)
        posted = httpx.post(f"{server.url}/api/runs/r1/outcome", json={"success": False, "detail": "expected 4864"}, headers=auth)
        assert posted.status_code == 200, posted.text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = httpx.get(f"{server.url}/api/runs/r1/attribution", headers=auth).json()
            if state["latest"] is not None:
                break
            time.sleep(0.1)
    latest = state["latest"]
    assert latest is not None and latest["method"] == "heuristic" and latest["agent"] in ("researcher", "writer")
    assert [s.agent for s in store.get_trace("r1").steps] == ["researcher", "writer"]
    gateway.close()
