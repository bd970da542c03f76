"""A running Phoenix over its REST API: the official `arize-phoenix-client`, with retries and faultlens's errors.

    phoenix = PhoenixClient("http://127.0.0.1:6006", api_key=None)
    project = phoenix.project("default")                  # ProjectNotFound names the projects there are
    page = phoenix.span_page("default", cursor=None)      # spans in insertion order, and the next page's cursor
    phoenix.annotate_spans([...])                         # POST /v1/span_annotations, upserted by identifier

Every request is retried (tenacity, exponential backoff) on a connection
error, a timeout or a 5xx answer; what still fails becomes a
`PhoenixUnavailable`. A 401/403 is `PhoenixAuthError` (the key), a URL that
answers but is no Phoenix is `PhoenixURLError`, an unknown project
`ProjectNotFound`: each says what to fix, and none is retried. An answer
of the wrong shape (`data` not a list, a `next_cursor` that is no string)
is `PhoenixAnswerError`; a paging loop given a cursor it already followed
stops with `PhoenixPagingError` (`CursorTrail`) instead of reading the same
page forever.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from faultlens.middleware.errors import ConfigError, FaultlensError, MissingExtra, NotFound

from .records import json_type

# Phoenix's own upper bound on a page of spans or annotations.
MAX_PAGE = 1000
_IDS_PER_REQUEST = 100  # span or trace ids per annotation look-up (the official client sends 100 at most too)


class PhoenixError(FaultlensError):
    """Something about the Phoenix server: every error this module raises derives from it."""


class PhoenixUnavailable(PhoenixError):
    """Phoenix did not answer (connection refused, timeout, 5xx) after the retries."""


class PhoenixAuthError(PhoenixError, ConfigError):
    """Phoenix refused the API key (or wants one)."""


class PhoenixURLError(PhoenixError, ConfigError):
    """The URL answers, but not as Phoenix's REST API does."""


class ProjectNotFound(PhoenixError, NotFound):
    """No project of that name or id on this Phoenix."""


class PhoenixAnswerError(PhoenixError):
    """Phoenix answered in JSON, but a field of the answer has the wrong shape."""


class PhoenixPagingError(PhoenixError):
    """Phoenix's paging does not advance: it gave a `next_cursor` already followed."""


class CursorTrail:
    """The cursors one paging loop has followed; `follow` refuses one given again (it would page forever).

    start: the cursor the loop's first request uses (a page that names it as the next one repeats too)."""

    def __init__(self, url: str, what: str, start: str | None = None):
        self.url, self.what = url, what
        self.seen: set[str] = {start} if start else set()
        self.pages = 0

    def follow(self, cursor: str | None) -> str | None:
        self.pages += 1
        if cursor is None:
            return None
        if cursor in self.seen:
            raise PhoenixPagingError(
                f"Phoenix at {self.url} gave next_cursor {cursor!r} for {self.what} again after {self.pages} page(s): its paging does not "
                "advance, so reading stopped; check that nothing between faultlens and Phoenix (a proxy) drops the `cursor` "
                "parameter, restart or upgrade Phoenix, then run again")
        self.seen.add(cursor)
        return cursor


@dataclass
class SpanPage:
    """One page of `GET /v1/projects/{p}/spans` in insertion order."""

    spans: list[dict[str, Any]]
    next_cursor: str | None


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):  # refused, reset, timed out
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code >= 500


def _official_client(http: httpx.Client) -> Any:
    try:
        from phoenix.client import Client
    except ImportError as exc:
        raise MissingExtra("phoenix", "reading a Phoenix server", "arize-phoenix-client") from exc
    return Client(http_client=http)


class PhoenixClient:
    """One Phoenix server. url: its base URL (the web UI's); api_key: sent as a bearer token when given.

    retries: attempts per request before `PhoenixUnavailable`; backoff: the first wait in seconds (doubling, at most 10 s).
    transport: an httpx transport in place of the network (tests).
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 30.0, retries: int = 5, backoff: float = 0.5,
                 transport: httpx.BaseTransport | None = None):
        if not url.startswith(("http://", "https://")):
            raise PhoenixURLError(f"{url!r} is not a Phoenix URL: give its base URL, e.g. http://127.0.0.1:6006")
        self.url = url.rstrip("/")
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self.client = _official_client(self.http)
        self.retries, self.backoff = max(1, retries), backoff

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> PhoenixClient:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    # -- the one way every request goes --------------------------------------
    def _call(self, what: str, fn: Any, *, project: str | None = None) -> Any:
        retrying = Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.retries),
            wait=wait_exponential(multiplier=self.backoff, max=10),
            reraise=True,
        )
        try:
            return retrying(fn)
        except httpx.TransportError as exc:
            raise PhoenixUnavailable(f"Phoenix at {self.url} did not answer ({what}, {self.retries} attempts): {type(exc).__name__}: {exc}") from None
        except httpx.HTTPStatusError as exc:
            raise self._status_error(what, exc.response, project) from None
        except ValueError as exc:  # an answer that is not JSON: not Phoenix's API
            raise PhoenixURLError(f"{self.url} answered {what} with something that is not Phoenix's JSON ({exc}); is this a Phoenix server's base URL?") from None

    def _status_error(self, what: str, response: httpx.Response, project: str | None) -> PhoenixError:
        code = response.status_code
        detail = response.text[:200].strip()
        if code >= 500:
            return PhoenixUnavailable(f"Phoenix at {self.url} failed {what} with HTTP {code} after {self.retries} attempts: {detail}")
        if code in (401, 403):
            return PhoenixAuthError(f"Phoenix at {self.url} refused {what} (HTTP {code}): give a valid API key (--api-key or $PHOENIX_API_KEY)")
        if code == 404 and project is not None and "project" in detail.lower():
            return ProjectNotFound(f"no project {project!r} on Phoenix at {self.url}; projects there: {', '.join(self.project_names()) or 'none'}")
        if code == 404:
            return PhoenixURLError(f"{self.url} answered {what} with HTTP 404: is this a Phoenix server's base URL?")
        return PhoenixError(f"Phoenix at {self.url} rejected {what} (HTTP {code}): {detail}")

    def _get(self, path: str, what: str, params: Any = None, *, project: str | None = None) -> dict[str, Any]:
        def fetch() -> dict[str, Any]:
            response = self.http.get(path, params=params, headers={"accept": "application/json"})
            response.raise_for_status()
            body = response.json()
            if not isinstance(body, dict) or "data" not in body:
                shape = f"a JSON {json_type(body)}" if not isinstance(body, dict) else "an object"
                raise ValueError(f"{shape} without the field 'data'")
            self._check_shape(what, body)
            return body

        return self._call(what, fetch, project=project)

    def _check_shape(self, what: str, body: dict[str, Any]) -> None:
        """A paged answer's `data` is a list and its `next_cursor` a string or null (anything else would be read wrongly later)."""
        data, cursor = body["data"], body.get("next_cursor")
        if not isinstance(data, list):
            raise PhoenixAnswerError(f"Phoenix at {self.url} answered {what} with field 'data' a JSON {json_type(data)}, not a list; "
                                     "check that the URL is a Phoenix server's base URL and nothing in between rewrites its answers")
        if cursor is not None and not isinstance(cursor, str):
            raise PhoenixAnswerError(f"Phoenix at {self.url} answered {what} with field 'next_cursor' a JSON {json_type(cursor)}, "
                                     "not a string or null; check that the URL is a Phoenix server's base URL")

    # -- projects -----------------------------------------------------------
    def project_names(self) -> list[str]:
        body = self._get("v1/projects", "the project list", {"limit": MAX_PAGE})
        return [str(p.get("name")) for p in body["data"] if isinstance(p, dict)]

    def project(self, name: str) -> dict[str, Any]:
        """The project named (or with the id) `name`; `ProjectNotFound` lists the ones there are."""
        return self._call("the project", lambda: self.client.projects.get(project_name=name), project=name)

    # -- spans --------------------------------------------------------------
    def span_page(self, project: str, *, cursor: str | None = None, limit: int = 100, start: datetime | None = None,
                  end: datetime | None = None, trace_ids: Sequence[str] = ()) -> SpanPage:
        """One page of the project's spans, oldest inserted first.

        (`client.spans.get_spans` pages internally and hides the cursor; a resumable
        sync needs it, so this reads the same endpoint through the client's HTTP client.)"""
        params: dict[str, Any] = {"limit": min(limit, MAX_PAGE), "sort": "id", "order": "asc"}
        if cursor:
            params["cursor"] = cursor
        if start is not None:
            params["start_time"] = start.isoformat()
        if end is not None:
            params["end_time"] = end.isoformat()
        if trace_ids:
            params["trace_id"] = list(trace_ids)
        body = self._get(f"v1/projects/{project}/spans", "the span list", params, project=project)
        # (an empty cursor would read as "from the start" on the next request: it means no next page)
        return SpanPage(list(body["data"]), body.get("next_cursor") or None)

    # -- annotations --------------------------------------------------------
    def span_annotations(self, project: str, span_ids: Iterable[str], names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        ids = sorted(set(span_ids))
        if not ids:
            return []
        return self._call("the span annotations", lambda: self.client.spans.get_span_annotations(
            span_ids=ids, project_identifier=project, include_annotation_names=list(names) if names else None), project=project)

    def trace_annotations(self, project: str, trace_ids: Iterable[str], names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Annotations on whole traces (the official client has no reader for these: the REST endpoint, paged)."""
        ids = sorted(set(trace_ids))
        found: list[dict[str, Any]] = []
        for i in range(0, len(ids), _IDS_PER_REQUEST):
            cursor, trail = None, CursorTrail(self.url, "the trace annotations")
            while True:
                params: dict[str, Any] = {"trace_ids": ids[i:i + _IDS_PER_REQUEST], "limit": MAX_PAGE}
                if names:
                    params["include_annotation_names"] = list(names)
                if cursor:
                    params["cursor"] = cursor
                body = self._get(f"v1/projects/{project}/trace_annotations", "the trace annotations", params, project=project)
                found.extend(body["data"])
                cursor = trail.follow(body.get("next_cursor") or None)
                if not cursor:
                    break
        return found

    def annotate_spans(self, annotations: list[dict[str, Any]]) -> list[str]:
        """Write span annotations (each: span_id, name, annotator_kind, result, metadata, identifier); their ids.

        Phoenix upserts on (name, span, identifier), so writing the same annotation twice updates it."""
        if not annotations:
            return []
        inserted = self._call("writing span annotations", lambda: self.client.spans.log_span_annotations(span_annotations=annotations, sync=True))
        return [str(row["id"]) for row in inserted or []]
