"""Issue 43 finding 8: a malformed answer from Phoenix never ends in a traceback.

A span of the wrong shape is skipped and reported by its id, and the sync goes
on past it (the next sync does not stop on it again); a `data` or
`next_cursor` of the wrong shape is a `PhoenixAnswerError` naming the field; a
cursor Phoenix gives again ends the sync with `PhoenixPagingError` after a
bounded number of requests, not the server's patience.
"""

from __future__ import annotations

import copy
import json
import traceback

import httpx
import pytest
from click.testing import CliRunner

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.store import open_store
from faultlens.phoenix.client import PhoenixAnswerError, PhoenixPagingError, PhoenixURLError, SpanPage
from faultlens.phoenix.source import read_records
from faultlens.phoenix.state import SyncState
from faultlens.phoenix.sync import PhoenixSync, SkippedSpan

from .test_sync import MemoryPhoenix, add_run

URL = "http://phoenix.test"


class RawPhoenix(MemoryPhoenix):
    """`MemoryPhoenix` whose spans may be any JSON value (no id for what is no object), and whose next cursor can be forced."""

    def __init__(self, next_cursor=None):
        super().__init__()
        self.forced_cursor = next_cursor  # a function (request number) -> the next_cursor to answer, or None for honest paging

    def add_raw(self, value, with_id: bool = True) -> None:
        if isinstance(value, dict) and with_id:
            value["id"] = f"Span:{len(self.spans) + 1}"
        self.spans.append(value)

    def span_page(self, project, *, cursor=None, limit=100, start=None, end=None):
        self.pages += 1
        ids = [s.get("id") if isinstance(s, dict) else None for s in self.spans]
        first = 0 if cursor is None else ids.index(cursor)
        page = self.spans[first:first + limit + 1]
        honest = ids[first + limit] if len(page) > limit else None
        return SpanPage(page[:limit], honest if self.forced_cursor is None else self.forced_cursor(self.pages))


def good_span(span_id: str = "00000000000000ff", **fields) -> dict:
    span = {"name": "note", "context": {"trace_id": "c" * 32, "span_id": span_id}, "span_kind": "LLM", "parent_id": None,
            "start_time": "2026-12-03T05:09:00+00:00", "end_time": "2026-12-03T05:09:01+00:00", "status_code": "OK",
            "status_message": "", "attributes": {"session.id": "chat-9"}, "events": []}
    return span | fields


# (the malformed value, whether Phoenix gave it an id, the id it is reported by)
MALFORMED = {
    "span null": (None, False, None),
    "span a number": (7, False, None),
    "context a string": (good_span(context="0000000000000bad"), True, "Span:4"),
    "attributes a list": (good_span("0000000000000bad", attributes=["session.id", "chat-9"]), True, "0000000000000bad"),
    "events a string": (good_span("0000000000000bad", events="boom"), True, "0000000000000bad"),
    "an event a string": (good_span("0000000000000bad", events=["boom"]), True, "0000000000000bad"),
}


def sync_of(phoenix, tmp_path, **options) -> PhoenixSync:
    state = SyncState.load(tmp_path / "state.json", url=phoenix.url, project="agents")
    return PhoenixSync(phoenix, open_store(str(tmp_path / "faultlens.db")), "agents", state=state, method="heuristic", **options)


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_span_is_skipped_by_its_id_and_the_sync_goes_past_it(tmp_path, name):
    value, with_id, reported = copy.deepcopy(MALFORMED[name])
    phoenix = RawPhoenix()
    add_run(phoenix, "a" * 32, "chat-1", 1)
    phoenix.add_raw(value, with_id)  # the fourth span, in the middle of the second page
    add_run(phoenix, "b" * 32, "chat-2", 2)
    sync = sync_of(phoenix, tmp_path, page_size=2)

    first = sync.run_once()
    assert [s.id for s in first.skipped] == [reported]
    assert isinstance(first.skipped[0], SkippedSpan) and "span" in first.skipped[0].reason
    # every span but the bad one is stored, both runs are judged and attributed
    assert (first.spans, first.runs_seen, first.failed, first.attributed) == (6, 2, 2, 2)
    assert sync.state.spans == 6 and sync.state.last_span == "Span:7"

    # The next sync does not stop on it, nor report it again: it starts after the last span.
    again = sync.run_once()
    assert (again.spans, again.skipped) == (0, [])
    add_run(phoenix, "d" * 32, "chat-3", 3)
    later = sync.run_once()
    assert (later.spans, later.failed, later.skipped) == (3, 1, [])


def test_a_malformed_last_span_is_not_read_again(tmp_path):
    phoenix = RawPhoenix()
    add_run(phoenix, "a" * 32, "chat-1", 1)
    phoenix.add_raw(good_span("0000000000000bad", attributes="oops"))
    sync = sync_of(phoenix, tmp_path, page_size=10)

    first = sync.run_once()
    assert (first.spans, [s.id for s in first.skipped]) == (3, ["0000000000000bad"])
    assert "field 'attributes'" in first.skipped[0].reason
    assert sync.state.last_span == "Span:4"  # past the bad span, though it was not stored
    assert sync.run_once().skipped == []
    assert SyncState.load(tmp_path / "state.json", url=phoenix.url, project="agents").last_span == "Span:4"


def test_a_span_whose_attributes_cannot_be_mapped_is_skipped_and_its_page_stored(tmp_path):
    # Readable as a span, but not as a step (an unknown step kind): ingest refuses the whole batch, the sync skips just it.
    phoenix = RawPhoenix()
    add_run(phoenix, "a" * 32, "chat-1", 1)
    phoenix.add_raw(good_span("0000000000000bad", attributes={"session.id": "chat-9", "faultlens.step.kind": "dance"}))
    first = sync_of(phoenix, tmp_path, page_size=10).run_once()
    assert [s.id for s in first.skipped] == ["0000000000000bad"]
    assert (first.spans, first.failed, first.attributed) == (3, 1, 1)


@pytest.mark.parametrize("cursors", [lambda n: "Span:1", lambda n: "Span:2" if n % 2 else "Span:1"], ids=["the same", "a cycle"])
def test_a_cursor_given_again_ends_the_sync_after_a_few_requests(tmp_path, cursors):
    phoenix = RawPhoenix(next_cursor=cursors)
    add_run(phoenix, "a" * 32, "chat-1", 1)
    sync = sync_of(phoenix, tmp_path, page_size=2)
    with pytest.raises(PhoenixPagingError, match=r"gave next_cursor 'Span:\d' for the span list again .*then run again") as caught:
        sync.run_once()
    assert isinstance(caught.value, FaultlensError)
    assert phoenix.pages <= 3
    assert "\n" not in str(caught.value)
    # what was read is stored and counted; the cursor is where paging last advanced
    saved = SyncState.load(tmp_path / "state.json", url=phoenix.url, project="agents")
    assert saved.spans == sync.state.spans > 0 and saved.cursor in (None, "Span:1", "Span:2")


def test_the_trace_source_stops_on_a_repeated_cursor_too():
    phoenix = RawPhoenix(next_cursor=lambda n: "Span:1")
    add_run(phoenix, "a" * 32, "chat-1", 1)
    with pytest.raises(PhoenixPagingError):
        list(read_records(phoenix, "agents", page_size=2))
    assert phoenix.pages <= 3


# -- the HTTP client: the answer's own shape ----------------------------------------------------------------------

class HttpPhoenix:
    """Phoenix's REST API over an httpx MockTransport: `spans` answers the span list (a body, or a function of the request)."""

    def __init__(self, spans):
        self.spans, self.span_requests = spans, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/projects/agents":
            return httpx.Response(200, json={"data": {"id": "UHJvamVjdDoy", "name": "agents", "description": ""}})
        if path == "/v1/projects/agents/spans":
            self.span_requests += 1
            body = self.spans(request) if callable(self.spans) else self.spans
            return httpx.Response(200, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
        if path == "/v1/span_annotations":
            return httpx.Response(200, json={"data": [{"id": f"SpanAnnotation:{i}"} for i, _ in enumerate(json.loads(request.content)["data"])]})
        return httpx.Response(200, json={"data": [], "next_cursor": None})  # the annotation look-ups: none


def http_client(handler):
    pytest.importorskip("phoenix.client", reason="needs the phoenix extra: pip install 'faultlens[phoenix]'")
    from faultlens.phoenix.client import PhoenixClient

    return PhoenixClient(URL, transport=httpx.MockTransport(handler), backoff=0, retries=1)


@pytest.mark.parametrize("body, error, field", [
    ({"data": "nope"}, PhoenixAnswerError, "field 'data' a JSON string, not a list"),
    ({"data": None}, PhoenixAnswerError, "field 'data' a JSON null, not a list"),
    ({"data": {"id": "Span:1"}}, PhoenixAnswerError, "field 'data' a JSON object, not a list"),
    ({"data": [], "next_cursor": 5}, PhoenixAnswerError, "field 'next_cursor' a JSON number"),
    ([], PhoenixURLError, "a JSON list without the field 'data'"),
    ("spans", PhoenixURLError, "a JSON string without the field 'data'"),
], ids=["data a string", "data null", "data an object", "next_cursor a number", "page a list", "page a string"])
def test_an_answer_of_the_wrong_shape_names_the_field(tmp_path, body, error, field):
    phoenix = HttpPhoenix(body)
    sync = sync_of(http_client(phoenix), tmp_path)
    with pytest.raises(error, match=field) as caught:
        sync.run_once()
    assert isinstance(caught.value, FaultlensError) and phoenix.span_requests == 1  # (a shape is not retried)


# -- the command -------------------------------------------------------------------------------------------------

def paged(spans: list) -> callable:
    """Honest paging over `spans` (any JSON values; a dict's `id` is its cursor), two per page."""
    def answer(request: httpx.Request) -> dict:
        ids = [s.get("id") if isinstance(s, dict) else None for s in spans]
        cursor = request.url.params.get("cursor")
        first = 0 if cursor is None else ids.index(cursor)
        page = spans[first:first + 3]
        return {"data": page[:2], "next_cursor": ids[first + 2] if len(page) > 2 else None}
    return answer


def run_cli(monkeypatch, tmp_path, handler):
    from faultlens.cli import cli

    made = http_client(handler)
    monkeypatch.setattr("faultlens.phoenix.cli.PhoenixClient", lambda url, **options: made)
    result = CliRunner().invoke(cli, ["phoenix", "sync", URL, "--project", "agents", "--db", str(tmp_path / "faultlens.db"),
                                      "--method", "heuristic", "--state", str(tmp_path / "state.json")], catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        pytest.fail("".join(traceback.format_exception(result.exception)))
    return result


def test_the_command_reports_the_skipped_spans_by_id(monkeypatch, tmp_path):
    memory = RawPhoenix()
    add_run(memory, "a" * 32, "chat-1", 1)
    memory.add_raw(good_span("0000000000000bad", events="boom"))
    memory.add_raw(good_span("0000000000000bae", context="x"))
    memory.add_raw(None)
    result = run_cli(monkeypatch, tmp_path, HttpPhoenix(paged(memory.spans)))
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "3 malformed span(s) skipped" in output
    assert "0000000000000bad, Span:5, (no id)" in output and "field 'events'" in output
    assert "spans skipped (malformed) │ 3" in output


def test_the_command_ends_a_repeating_cursor_with_one_line(monkeypatch, tmp_path):
    memory = RawPhoenix()
    add_run(memory, "a" * 32, "chat-1", 1)
    phoenix = HttpPhoenix(lambda request: {"data": memory.spans[:2], "next_cursor": "Span:3"})
    result = run_cli(monkeypatch, tmp_path, phoenix)
    assert result.exit_code != 0 and phoenix.span_requests <= 3
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: Phoenix at http://phoenix.test gave next_cursor 'Span:3'"), result.output
    assert "Traceback" not in result.output
