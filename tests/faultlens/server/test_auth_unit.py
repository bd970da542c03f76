"""Bind and token rules, without a server."""

from __future__ import annotations

import pytest

from faultlens.server.auth import UnsafeBind, check_bind, is_loopback, resolve_token, token_matches


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_hosts(host):
    assert is_loopback(host)
    check_bind(host, None)  # no token needed


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.org"])
def test_other_hosts_need_a_token(host):
    assert not is_loopback(host)
    with pytest.raises(UnsafeBind, match="FAULTLENS_TOKEN"):
        check_bind(host, None)
    check_bind(host, "s3cret-token-of-24-chars")


def test_token_from_environment(monkeypatch):
    monkeypatch.setenv("FAULTLENS_TOKEN", "from-env")
    assert resolve_token(None) == "from-env"
    assert resolve_token("explicit") == "explicit"
    monkeypatch.setenv("FAULTLENS_TOKEN", "")
    assert resolve_token(None) is None


def test_token_matching():
    assert token_matches("abc123", "Bearer abc123")
    assert token_matches("abc123", "bearer abc123")
    assert not token_matches("abc123", "Bearer abc124")
    assert not token_matches("abc123", "Basic abc123")
    assert not token_matches("abc123", None)
    assert not token_matches("abc123", "Bearer ")
    assert token_matches("abc123", None, cookie="abc123")
    assert not token_matches("abc123", None, cookie="nope")


@pytest.mark.parametrize(
    "header, name",
    [("127.0.0.1:4318", "127.0.0.1"), ("localhost", "localhost"), ("[::1]:4318", "::1"), ("[::1]", "::1"), ("Example.org:80", "example.org"), (None, "")],
)
def test_host_name(header, name):
    from faultlens.server.auth import host_name

    assert host_name(header) == name
