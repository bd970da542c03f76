"""The server's gatekeeping, as ASGI middleware: who may talk to it, from which origin, how often they may guess, and the headers every answer carries.

- Both modes: a state-changing request that a browser marks as coming from
  another origin is refused (a page on evil.example, or on another port of
  127.0.0.1, which SameSite cookies do not tell apart, could otherwise POST).
- No token: only requests addressed to a loopback name are answered.
- A token: every request needs it (header or the login cookie), and a client
  that presents a wrong one too often is told to wait (429). The right token
  is never refused, so a guesser cannot lock out the clients that hold it.
- Every response carries a strict Content-Security-Policy, X-Frame-Options and
  nosniff; media files get a CSP that forbids everything (`sandbox`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import TOKEN_COOKIE, host_name, is_loopback, token_matches

# Paths open without a token: the login form itself (it only sets a cookie).
OPEN_PATHS = {"/login"}
_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# Inline style attributes carry the per-agent colours; scripts come only from /static.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: https: http:; media-src 'self' data: https: http:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# FastAPI's /docs and /redoc pages load Swagger UI / ReDoc from a CDN and start
# them with an inline script; they show the API's schema, never stored data.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; font-src https://fonts.gstatic.com; "
    "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly; worker-src blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = ("/docs", "/redoc")
# A media file is shown inside an <img>/<video>; opened on its own it may do nothing.
MEDIA_CSP = "default-src 'none'; img-src 'self'; media-src 'self'; sandbox; frame-ancestors 'none'"
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


class FailedLogins:
    """At most `limit` wrong tokens per client address in any `window` seconds (the right token is never counted or refused)."""

    def __init__(self, limit: int = 10, window: float = 60.0):
        self.limit = limit
        self.window = window
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(client, deque())
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures

    def retry_after(self, client: str) -> float:
        """Seconds `client` must wait before trying again (0: it may try now)."""
        now = time.monotonic()
        with self._lock:
            failures = self._recent(client, now)
            if len(failures) < self.limit:
                return 0.0
            return max(failures[0] + self.window - now, 0.0)

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            failures = self._recent(client, now)
            if len(failures) < self.limit:  # more would only grow the list: the client waits for the oldest to expire
                failures.append(now)
            if len(self._failures) > 10_000:  # forget the oldest clients rather than grow without bound
                self._failures.pop(next(iter(self._failures)))


def client_of(request: Request) -> str:
    return request.client.host if request.client else "?"


def too_many(retry_after: float) -> JSONResponse:
    return JSONResponse(
        {"detail": f"too many wrong tokens from this address; try again in {retry_after:.0f} s"},
        status_code=429,
        headers={"Retry-After": str(max(int(retry_after + 0.999), 1))},
    )


def cross_origin(request: Request) -> bool:
    """True if a browser says this request comes from a page of another origin."""
    if request.headers.get("sec-fetch-site", "") in ("cross-site", "same-site"):
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False  # not sent by a browser's cross-origin fetch or form (SDK exporters send none)
    if origin == "null":
        return True  # sandboxed frames, data: pages, redirects across origins
    return urlsplit(origin).netloc.lower() != (request.headers.get("host") or "").lower()


def refusal(request: Request, token: str | None, logins: FailedLogins) -> Response | None:
    """The answer that refuses `request`, or None if it may go on to the app."""
    # A token does not make a browser's cross-origin write safe: the login cookie goes along with
    # a form another port of 127.0.0.1 submits (SameSite compares sites, not ports).
    if request.method not in _SAFE_METHODS and cross_origin(request):
        return JSONResponse(
            {"detail": "cross-origin request refused: this server only accepts changes from its own pages and from non-browser clients"},
            status_code=403,
        )
    if not token:
        # Without a token the server trusts whoever can reach it, i.e. this
        # machine. A web page that rebinds its own DNS name to 127.0.0.1
        # could reach it too; its requests carry that name as Host.
        if not is_loopback(host_name(request.headers.get("host"))):
            return JSONResponse(
                {"detail": "this server has no token, so it only answers requests addressed to 127.0.0.1, ::1 or localhost"},
                status_code=403,
            )
        return None
    path = request.url.path
    if path in OPEN_PATHS or path.startswith("/static/"):
        return None
    authorization = request.headers.get("authorization")
    cookie = request.cookies.get(TOKEN_COOKIE)
    # The right token first: the limit slows guesses, it must never refuse the clients that hold
    # the token (every local process shares 127.0.0.1, the OTLP exporter included).
    if token_matches(token, authorization, cookie):
        return None
    if authorization or cookie:  # a wrong token is a guess; a missing one is not
        client = client_of(request)
        wait = logins.retry_after(client)
        if wait:
            return too_many(wait)
        logins.failed(client)
    wants_html = "text/html" in request.headers.get("accept", "") and request.method == "GET"
    if wants_html and not path.startswith(("/api/", "/v1/")):
        return RedirectResponse(f"/login?next={path}", status_code=303)
    return JSONResponse(
        {"detail": "missing or wrong token: send 'Authorization: Bearer <FAULTLENS_TOKEN>'"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


class Gatekeeper:
    """Pure ASGI middleware: refuses what `refusal` refuses, and adds the security headers to every answer.

    Plain ASGI rather than `@app.middleware("http")`: each of those wraps the
    request and response in streams and a task group, which cost the OTLP
    ingest path more CPU per request than the HTTP server itself.
    """

    def __init__(self, app: ASGIApp, token: str | None, logins: FailedLogins):
        self.app = app
        self.token = token
        self.logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = DOCS_CSP if scope["path"].startswith(DOCS_PATHS) else PAGE_CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                headers.setdefault("Content-Security-Policy", csp)
            await send(message)

        refused = refusal(Request(scope), self.token, self.logins)
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)


def install(app: FastAPI, token: str | None, logins: FailedLogins) -> None:
    """Add the gatekeeping middleware to `app` (outside every middleware added before it)."""
    app.add_middleware(Gatekeeper, token=token, logins=logins)
