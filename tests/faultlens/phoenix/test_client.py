"""`faultlens.phoenix.client`: retries on 5xx and connection errors, and a clear error for a wrong URL, key or project.

Phoenix's answers are played by an httpx MockTransport here; tests/faultlens/phoenix/test_real_phoenix.py runs the real server.
"""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("phoenix.client", reason="needs the phoenix extra: pip install 'faultlens[phoenix]'")

from faultlens.middleware.errors import ConfigError, FaultlensError, NotFound  # noqa: E402
from faultlens.phoenix.client import PhoenixAuthError, PhoenixClient, PhoenixUnavailable, PhoenixURLError, ProjectNotFound  # noqa: E402

PROJECTS = {"data": [{"name": "agents", "description": "", "id": "UHJvamVjdDoy"}], "next_cursor": None}


def client(handler, **options) -> PhoenixClient:
    return PhoenixClient("http://phoenix.test", transport=httpx.MockTransport(handler), backoff=0, **options)


def test_5xx_and_connection_errors_are_retried_then_succeed():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(calls) == 2:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json={"data": [{"id": "U3Bhbjox", "context": {"trace_id": "a" * 32, "span_id": "b" * 16}}], "next_cursor": "U3Bhbjoy"})

    page = client(handler).span_page("agents", limit=1)
    assert len(calls) == 3
    assert page.next_cursor == "U3Bhbjoy" and page.spans[0]["id"] == "U3Bhbjox"


def test_pages_in_insertion_order_from_the_cursor_with_the_window():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": [], "next_cursor": None})

    from datetime import datetime, timezone

    client(handler).span_page("agents", cursor="U3Bhbjo1", limit=5000, start=datetime(2026, 12, 1, tzinfo=timezone.utc))
    params = seen[0].url.params
    assert seen[0].url.path == "/v1/projects/agents/spans"
    assert (params["sort"], params["order"], params["cursor"], params["limit"]) == ("id", "asc", "U3Bhbjo1", "1000")
    assert params["start_time"] == "2026-12-01T00:00:00+00:00"


def test_a_phoenix_that_stays_down_is_unavailable_after_the_retries():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(PhoenixUnavailable, match=r"phoenix.test did not answer \(the span list, 3 attempts\)"):
        client(handler, retries=3).span_page("agents")
    assert len(calls) == 3


def test_a_5xx_that_persists_names_the_status():
    with pytest.raises(PhoenixUnavailable, match="HTTP 502 after 2 attempts"):
        client(lambda r: httpx.Response(502, text="bad gateway"), retries=2).span_page("agents")


def test_a_refused_key_is_an_auth_error_and_not_retried():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers.get("authorization"))
        return httpx.Response(401, text="Invalid token")

    with pytest.raises(PhoenixAuthError, match="give a valid API key") as caught:
        client(handler, api_key="wrong").project("agents")
    assert calls == ["Bearer wrong"]
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, FaultlensError)
    assert "wrong" not in str(caught.value)  # the key is never echoed


def test_an_unknown_project_lists_the_projects_there_are():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/projects":
            return httpx.Response(200, json=PROJECTS)
        return httpx.Response(404, text="Project with name nope not found")

    with pytest.raises(ProjectNotFound, match="no project 'nope' on Phoenix at http://phoenix.test; projects there: agents") as caught:
        client(handler).project("nope")
    assert isinstance(caught.value, NotFound)


def test_a_url_that_is_not_phoenix_says_so():
    # Phoenix's web UI answers unknown paths with its HTML page: a wrong base URL looks like that
    html = client(lambda r: httpx.Response(200, text="<html>hello</html>"))
    with pytest.raises(PhoenixURLError, match="is this a Phoenix server's base URL"):
        html.span_page("agents")
    with pytest.raises(PhoenixURLError, match="answered the project list with HTTP 404: is this a Phoenix"):
        client(lambda r: httpx.Response(404, text="Not Found")).project_names()
    with pytest.raises(PhoenixURLError, match="not a Phoenix URL"):
        PhoenixClient("127.0.0.1:6006")


def test_annotations_are_written_synchronously_and_their_ids_returned():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        bodies.append((request.url.params.get("sync"), json.loads(request.content)))
        return httpx.Response(200, json={"data": [{"id": "U3BhbkFubm90YXRpb246MQ=="}]})

    annotation = {"span_id": "b" * 16, "name": "faultlens.decisive_error", "annotator_kind": "CODE", "result": {"label": "R.2"}, "identifier": "faultlens"}
    assert client(handler).annotate_spans([annotation]) == ["U3BhbkFubm90YXRpb246MQ=="]
    assert bodies[0][0] == "true" and bodies[0][1]["data"][0]["identifier"] == "faultlens"
    assert client(handler).annotate_spans([]) == []
