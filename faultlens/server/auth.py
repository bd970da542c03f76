"""Who may talk to the server: loopback-only by default, a bearer token otherwise."""

from __future__ import annotations

import hmac
import ipaddress
import os

from faultlens.middleware.errors import FaultlensError

TOKEN_ENV = "FAULTLENS_TOKEN"
# Browsers cannot add an Authorization header to a link or an <img>; the UI's
# login form puts the same token in this cookie instead.
TOKEN_COOKIE = "faultlens_token"


class UnsafeBind(FaultlensError):
    """Refusal to listen beyond loopback without a token."""


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        # A hostname we cannot judge without resolving it: treat it as public.
        return False


def resolve_token(token: str | None) -> str | None:
    """The token given explicitly, else $FAULTLENS_TOKEN, else None. Empty means none."""
    value = token if token is not None else os.environ.get(TOKEN_ENV)
    return value or None


def check_bind(host: str, token: str | None) -> None:
    """Raise `UnsafeBind` unless `host` is loopback or a token is set."""
    if not is_loopback(host) and not token:
        raise UnsafeBind(
            f"refusing to listen on {host!r} without a token: anyone who can reach it could read your traces. "
            f"Set {TOKEN_ENV} (or pass --token), or bind to 127.0.0.1."
        )


def token_matches(expected: str, authorization: str | None, cookie: str | None = None) -> bool:
    """Constant-time check of `Authorization: Bearer <token>` (or the UI cookie)."""
    candidates = []
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            candidates.append(value.strip())
    if cookie:
        candidates.append(cookie)
    ok = False
    for candidate in candidates:
        # compare_digest on bytes: its time does not depend on where the strings differ.
        ok |= hmac.compare_digest(candidate.encode(), expected.encode())
    return ok


def host_name(host_header: str | None) -> str:
    """The host part of a Host header: 'example.org:4318' → 'example.org', '[::1]:4318' → '::1'."""
    value = (host_header or "").strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value
