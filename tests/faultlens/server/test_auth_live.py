"""Token rules on a real server bound beyond loopback."""

from __future__ import annotations

import socket

import httpx
import pytest

from faultlens.server import ServerThread, UnsafeBind, create_app

from .conftest import HTTP, run_team, sdk_provider

TOKEN = "test-token-5f2b9c1e"


def test_refuses_to_start_on_all_interfaces_without_a_token(store, monkeypatch):
    monkeypatch.delenv("FAULTLENS_TOKEN", raising=False)
    with pytest.raises(UnsafeBind, match="refusing to listen on '0.0.0.0'"):
        ServerThread(create_app(store), host="0.0.0.0", port=0)


def _non_loopback_address() -> str | None:
    # The address this machine would use to reach the outside; no packet is sent.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_every_request_needs_the_bearer_token(store, serve):
    server = serve(create_app(store, token=TOKEN), host="0.0.0.0", token=TOKEN)
    base = f"http://127.0.0.1:{server.port}"
    hosts = [base]
    other = _non_loopback_address()
    if other:
        hosts.append(f"http://{other}:{server.port}")
    for url in hosts:
        for path in ("/api/runs", "/api/lessons", "/openapi.json", "/docs"):
            assert HTTP.get(url + path).status_code == 401, path
            assert HTTP.get(url + path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
            assert HTTP.get(url + path, headers={"Authorization": TOKEN}).status_code == 401, path  # no scheme
            assert HTTP.get(url + path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200, path
        r = HTTP.post(url + "/v1/traces", json={"resourceSpans": []})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    # A browser without the token is sent to the login form, which sets a cookie.
    r = HTTP.get(base + "/", headers={"Accept": "text/html"})
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert HTTP.post(base + "/login", content=b"token=wrong&next=/", headers={"Content-Type": "application/x-www-form-urlencoded"}).status_code == 200
    with httpx.Client(base_url=base) as browser:
        r = browser.post("/login", content=f"token={TOKEN}&next=/lessons".encode(), headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert r.status_code == 303 and r.headers["location"] == "/lessons"
        assert browser.get("/lessons").status_code == 200


def test_sdk_exporter_with_the_token_header(store, serve):
    server = serve(create_app(store, token=TOKEN), host="0.0.0.0", token=TOKEN)
    url = f"http://127.0.0.1:{server.port}/v1/traces"
    ids = run_team(sdk_provider(url, token=TOKEN))
    assert store.has_trace(ids["trace_id"])
    store_before = store.count_traces()
    run_team(sdk_provider(url, token="not-the-token"))
    assert store.count_traces() == store_before  # rejected spans are not stored


def test_without_a_token_only_loopback_host_names_are_answered(live):
    # DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends Host: evil.example.
    for host in (f"127.0.0.1:{live.port}", f"localhost:{live.port}", "localhost"):
        assert HTTP.get(live.url + "/api/runs", headers={"Host": host}).status_code == 200, host
    for host in (f"evil.example:{live.port}", "evil.example", f"10.0.0.5:{live.port}"):
        r = HTTP.get(live.url + "/api/runs", headers={"Host": host})
        assert r.status_code == 403 and "127.0.0.1" in r.json()["detail"], host
