"""`faultlens gateway`: the server's rules (loopback, token), the runs API's outcome queueing a failed gateway run for attribution."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.gateway_cli import build_gateway_app
from faultlens.middleware.capture.upstream import CallableUpstream
from faultlens.middleware.store import open_store
from faultlens.server.run import ServerThread
from tests.middleware.capture.test_live_gateway_requests import Recorder

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_up(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else proc.returncode
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError("the gateway did not start")


class _BusyStore:
    """Holds the store's tables locked from another connection, so every step waits in the gateway's queue."""

    def __init__(self, target: str):
        if target.startswith("postgresql"):
            import psycopg

            self.conn = psycopg.connect(target)
            self.conn.execute("LOCK TABLE traces, steps IN ACCESS EXCLUSIVE MODE")
        else:
            self.conn = sqlite3.connect(target, timeout=30)
            self.conn.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_gateway_writes_every_step_it_answered(store_target, sig):
    """SIGTERM (uvicorn re-raises it after shutdown) and SIGINT both write the queued steps before the process ends."""
    upstream = Recorder()
    db = store_target
    open_store(db).close()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from faultlens.cli import cli; cli()", "gateway", "--upstream", "openai/up",
                             "--api-base", f"{upstream.url}/v1", "--db", str(db), "--port", str(port), "--workers", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OPENAI_API_KEY": "sk-test", "FAULTLENS_TOKEN": ""})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url, proc)
        busy = _BusyStore(db)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        answered = sum(httpx.post(f"{url}/run/kill/agent/a/v1/chat/completions", json=body, timeout=30).status_code == 200
                       for _ in range(25))
        proc.send_signal(sig)
        time.sleep(1.5)
        busy.release()  # the store comes back while the gateway is stopping
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
        upstream.shutdown()
    assert answered == 25
    assert len(open_store(db).get_trace("kill").steps) == 25


def test_a_hanging_upstream_leaves_the_server_answering(tmp_path):
    """Calls held by a hanging upstream use the gateway's own threads: health, the API and other agents still answer."""
    release = threading.Event()

    def hang_or_reply(agent: str, request: dict) -> dict:
        if agent == "slow":
            release.wait(60)
        return reply(agent, request)

    store = open_store(tmp_path / "runs.db")
    app, gateway = build_gateway_app(store, CallableUpstream(hang_or_reply), method="heuristic", workers=0, max_upstream_calls=4)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with ServerThread(app) as server:
        def held():
            try:
                httpx.post(f"{server.url}/agent/slow/v1/chat/completions", json=body, timeout=0.5)
            except httpx.HTTPError:
                pass  # the client gives up: its call is freed

        clients = [threading.Thread(target=held, daemon=True) for _ in range(50)]
        for client in clients:
            client.start()
        for client in clients:
            client.join(10)
        assert httpx.get(f"{server.url}/api/health", timeout=5).status_code == 200
        assert httpx.get(f"{server.url}/api/runs", timeout=5).status_code == 200
        time.sleep(1.0)  # the gateway notices the clients that left
        fast = httpx.post(f"{server.url}/agent/writer/v1/chat/completions", json=body, timeout=5)
        assert fast.status_code == 200, fast.text
        release.set()
    gateway.close()
