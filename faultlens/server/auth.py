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


def resolve_token(token: str | None, *, file: str | os.PathLike[str] | None = None) -> str | None:
    """The token given explicitly, else the one in `file`, else $FAULTLENS_TOKEN, else None. Empty means none."""
    if token is None and file is not None:
        token = read_token_file(file)
    value = token if token is not None else os.environ.get(TOKEN_ENV)
    return value or None


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token kept in a file (its first line, without the line break): a token that `ps` does not show."""
    try:
        with open(path, encoding="utf-8") as handle:
            line = handle.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnsafeBind(f"cannot read the token file {os.fspath(path)}: {getattr(exc, 'strerror', None) or exc}") from None
    token = line.rstrip("\r\n")
    if not token:
        raise UnsafeBind(f"the token file {os.fspath(path)} is empty; put the token on its first line")
    return token


# Said on stderr whenever a token comes from the command line (`--token`, `--export-token`).
TOKEN_ARGUMENT_WARNING = (
    "WARNING: {option} puts the token on the command line, where every user of this machine can read it "
    "(`ps`, /proc/PID/cmdline) and your shell history keeps it. Use {env} or {option}-file instead."
)


# A token guards everything a public server holds; shorter ones can be guessed
# (the failed-login limit slows guessing, it does not make a short token long).
MIN_PUBLIC_TOKEN = 16


def check_bind(host: str, token: str | None) -> None:
    """Raise `UnsafeBind` unless `host` is loopback or a good enough token is set.

    A token with whitespace is refused anywhere (an HTTP header cannot carry it
    intact); on a public interface it must also be at least MIN_PUBLIC_TOKEN characters.
    """
    if token is not None and token != "" and (not token.strip() or any(c.isspace() for c in token)):
        raise UnsafeBind(f"the token contains whitespace, which an 'Authorization: Bearer' header cannot carry; choose another ({TOKEN_ENV} or --token)")
    if is_loopback(host):
        return
    if not token:
        raise UnsafeBind(
            f"refusing to listen on {host!r} without a token: anyone who can reach it could read your traces. "
            f"Set {TOKEN_ENV} (or pass --token), or bind to 127.0.0.1."
        )
    if len(token) < MIN_PUBLIC_TOKEN:
        raise UnsafeBind(
            f"refusing to listen on {host!r} with a {len(token)}-character token: use at least {MIN_PUBLIC_TOKEN} characters "
            f"(e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))'), or bind to 127.0.0.1."
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
