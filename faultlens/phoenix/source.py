"""The trace source `phoenix:URL`: the runs of a Phoenix project, for `faultlens traces import` and `load_traces`.

    phoenix:http://127.0.0.1:6006                                  the `default` project
    phoenix:http://127.0.0.1:6006?project=agents&since=2026-12-01T00:00:00+00:00&until=...
    phoenix:https://phoenix.example.com?project=agents&api_key_env=MY_PHOENIX_KEY

The API key is never part of the spec (specs end up in logs): it is read from
the environment variable `api_key_env` names, `PHOENIX_API_KEY` by default.
Spans are read in pages through Phoenix's REST API and mapped by the same
span mapping as OTLP ingest (`middleware.spans.traces_from_records`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit, urlunsplit

from faultlens.middleware.errors import InputError
from faultlens.middleware.model.trace import Trace
from faultlens.middleware.spans.record import SpanRecord
from faultlens.middleware.spans.traces import traces_from_records

from .client import CursorTrail, PhoenixClient
from .records import span_record

OPTIONS = ("project", "since", "until", "api_key_env")


@dataclass
class PhoenixSpec:
    url: str
    project: str = "default"
    since: datetime | None = None
    until: datetime | None = None
    api_key_env: str = "PHOENIX_API_KEY"

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


def parse_time(text: str, where: str, field: str) -> datetime:
    """An ISO 8601 time; one without a zone is UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(where, None, field, f"not an ISO 8601 time: {text!r} (e.g. 2026-12-01T00:00:00+00:00)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def parse_spec(arg: str) -> PhoenixSpec:
    where = f"phoenix:{arg}"
    parts = urlsplit(arg)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(where, None, None, "write the source as phoenix:http://HOST:PORT[?project=P&since=ISO&until=ISO&api_key_env=VAR]")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(OPTIONS))
    if unknown:
        raise InputError(where, None, unknown[0], f"unknown option; known: {', '.join(OPTIONS)} (the API key goes in an environment variable, not the spec)")
    one = {key: values[-1] for key, values in query.items()}
    spec = PhoenixSpec(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/"), project=one.get("project") or "default",
                       api_key_env=one.get("api_key_env") or "PHOENIX_API_KEY")
    if one.get("since"):
        spec.since = parse_time(one["since"], where, "since")
    if one.get("until"):
        spec.until = parse_time(one["until"], where, "until")
    return spec


def read_records(phoenix: PhoenixClient, project: str, *, since: datetime | None = None, until: datetime | None = None,
                 page_size: int = 500) -> Iterator[SpanRecord]:
    """Every span of the project in [since, until), as `SpanRecord`s, page by page."""
    phoenix.project(project)
    cursor, trail = None, CursorTrail(phoenix.url, "the span list")
    while True:
        page = phoenix.span_page(project, cursor=cursor, limit=page_size, start=since, end=until)
        for span in page.spans:
            yield span_record(span, source=f"phoenix:{phoenix.url}", project=project)
        cursor = trail.follow(page.next_cursor)
        if cursor is None:
            return


def load_phoenix_spec(arg: str) -> list[Trace]:
    """The `faultlens.sources` entry point: the runs of the project the spec names (see the module docstring)."""
    spec = parse_spec(arg)
    with PhoenixClient(spec.url, api_key=spec.api_key) as phoenix:
        records = list(read_records(phoenix, spec.project, since=spec.since, until=spec.until))
    return traces_from_records(records, source=f"phoenix:{spec.url}")
