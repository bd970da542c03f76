"""Fuzzing POST /v1/traces: whatever the body, the answer is 200, 400, 413 or 415, and a refused body stores nothing.

Bodies are OTLP exports built field by field where each field is, now and
then, replaced by an arbitrary JSON value (wrong types, huge numbers, lone
surrogates, deep nesting), then encoded as JSON or protobuf-looking bytes,
sometimes cut, padded or compressed (one or several gzip members, trailing
bytes). An accepted body must leave every page of its runs readable.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import zlib

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultlens.middleware.store import SQLiteStore
from faultlens.server import create_app

EXAMPLES = 1000
ALLOWED = {200, 400, 413, 415}

# Any JSON value, including the ones that broke the server before: lone
# surrogates, numbers beyond int64 and datetime, floats where ints belong.
wild_text = st.one_of(st.text(max_size=12), st.sampled_from(["\ud800", "x\udfffy", "", "ERROR", "9" * 400, "1.5e30"]))
wild_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.5e30, 2**64, -1, 2**63, 0]),
    wild_text,
)
wild = st.recursive(wild_scalar, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(wild_text, inner, max_size=3)), max_leaves=8)


def sometimes(valid: st.SearchStrategy, odds: int = 25) -> st.SearchStrategy:
    """A valid value, or once in about `odds` draws anything (a body has dozens of fields, so most bodies still get one)."""
    return st.integers(0, odds - 1).flatmap(lambda n: wild if n == 0 else valid)


hex_id = lambda n: st.binary(min_size=n, max_size=n).map(bytes.hex)  # noqa: E731
nanos = st.one_of(st.integers(min_value=0, max_value=2**64 - 1).map(str), st.integers(min_value=1_600_000_000 * 10**9, max_value=1_800_000_000 * 10**9))
json_text = st.one_of(
    st.just('[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'),
    st.just('{"query": "q"}'),
    st.just("{not json"),
    st.just("[1, 2]"),
    st.just('[{"parts": 3}]'),
    st.just('[{"mime_type": "text/html", "path": "/etc/passwd"}]'),
    wild.map(lambda v: json.dumps(v)),
)
known_keys = st.sampled_from(
    [
        "gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.conversation.id", "gen_ai.input.messages",
        "gen_ai.output.messages", "faultlens.content", "faultlens.step.kind", "faultlens.media", "faultlens.lessons",
        "faultlens.metadata", "faultlens.task", "faultlens.agents", "faultlens.outcome", "faultlens.source",
        "faultlens.gold", "faultlens.trace.metadata", "faultlens.cost_usd", "gen_ai.usage.input_tokens",
        "faultlens.step.index", "faultlens.no_start", "llm.input_messages.0.message.role", "llm.input_messages.0.message",
        "openinference.span.kind", "service.name", "tool.name", "input.value",
    ]
)
operation = st.sampled_from(["invoke_workflow", "invoke_agent", "chat", "execute_tool", "step", "LLM", "TOOL", "AGENT"])
any_value = st.one_of(
    operation.map(lambda v: {"stringValue": v}),
    json_text.map(lambda v: {"stringValue": v}),
    wild_text.map(lambda v: {"stringValue": v}),
    st.integers(min_value=-(2**64), max_value=2**64).map(lambda v: {"intValue": str(v)}),
    st.floats(allow_nan=False).map(lambda v: {"doubleValue": v}),
    st.booleans().map(lambda v: {"boolValue": v}),
    st.lists(wild_text.map(lambda v: {"stringValue": v}), max_size=3).map(lambda vs: {"arrayValue": {"values": vs}}),
)
attribute = st.fixed_dictionaries({"key": sometimes(st.one_of(known_keys, st.text(max_size=8))), "value": sometimes(any_value)})
attributes = sometimes(st.lists(attribute, max_size=6))
status = sometimes(st.fixed_dictionaries({"code": sometimes(st.sampled_from([0, 1, 2])), "message": sometimes(st.text(max_size=10))}))
event = st.fixed_dictionaries({"name": sometimes(st.text(max_size=8)), "timeUnixNano": sometimes(nanos), "attributes": attributes})
# Few trace ids so that spans of one request (and of successive requests) share runs.
trace_ids = st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "5b8efff798038103d269b633813fc60c", "00000000000000000000000000000001"])
span = st.fixed_dictionaries(
    {
        "traceId": sometimes(trace_ids),
        "spanId": sometimes(hex_id(8)),
        "name": sometimes(st.sampled_from(["chat m", "invoke_workflow run", "execute_tool calc", "invoke_agent a", "x"])),
        "kind": sometimes(st.integers(min_value=0, max_value=5)),
        "startTimeUnixNano": sometimes(nanos),
        "endTimeUnixNano": sometimes(nanos),
        "attributes": st.lists(attribute, min_size=1, max_size=6).map(lambda a: [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}, *a]),
        "status": status,
        "events": sometimes(st.lists(event, max_size=2)),
    },
    optional={"parentSpanId": sometimes(hex_id(8))},
)
export = st.fixed_dictionaries(
    {
        "resourceSpans": sometimes(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "resource": sometimes(st.fixed_dictionaries({"attributes": attributes})),
                        "scopeSpans": sometimes(st.lists(st.fixed_dictionaries({"spans": sometimes(st.lists(span, min_size=1, max_size=4))}), max_size=2)),
                    }
                ),
                max_size=2,
            )
        )
    }
)


def _gzip_members(data: bytes, cut: int) -> bytes:
    cut = cut % (len(data) + 1)
    return gzip.compress(data[:cut]) + gzip.compress(data[cut:])


@st.composite
def request_body(draw) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(draw(export)).encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(["none"] * 12 + ["truncate", "append", "flip", "pad"]))
    if mangle == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif mangle == "append":
        raw += draw(st.binary(min_size=1, max_size=8))
    elif mangle == "pad":
        raw += b" " * 40_000  # still valid JSON, but past the fixture's body limit
    elif mangle == "flip":
        at = draw(st.integers(0, max(len(raw) - 1, 0)))
        raw = raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    headers = {"content-type": draw(st.sampled_from(["application/json"] * 16 + ["application/x-protobuf", "text/plain", "application/json; charset=utf-8"]))}
    encoding = draw(st.sampled_from(["identity"] * 10 + ["gzip", "gzip-members", "gzip-members", "gzip-trailing", "deflate", "br"]))
    if encoding == "gzip":
        raw = gzip.compress(raw)
    elif encoding == "gzip-members":
        raw = _gzip_members(raw, draw(st.integers(0, 10_000)))
    elif encoding == "gzip-trailing":
        raw = gzip.compress(raw) + draw(st.binary(min_size=1, max_size=4))
    elif encoding == "deflate":
        raw = zlib.compress(raw)
    if encoding != "identity":
        headers["content-encoding"] = encoding.split("-")[0]
    return raw, headers


def snapshot(path: str) -> tuple:
    with sqlite3.connect(path) as db:
        return (
            db.execute("SELECT COUNT(*), TOTAL(LENGTH(outcome)), TOTAL(LENGTH(task)) FROM traces").fetchone(),
            db.execute("SELECT COUNT(*), TOTAL(LENGTH(data)) FROM steps").fetchone(),
        )


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fuzz") / "fuzz.db")
    store = SQLiteStore(path)
    # A small body limit so that some generated bodies are 413s too.
    client = TestClient(create_app(store, max_body_bytes=32768), base_url="http://127.0.0.1")
    return client, store, path


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(request_body())
def test_any_body_is_answered_cleanly_and_a_refused_one_stores_nothing(fuzz_client, body):
    client, store, path = fuzz_client
    raw, headers = body
    before = snapshot(path)
    response = client.post("/v1/traces", content=raw, headers=headers)
    assert response.status_code in ALLOWED, response.text
    if response.status_code != 200:
        assert snapshot(path) == before, f"a {response.status_code} stored something: {response.text}"
        if response.status_code == 400:
            assert response.json()["detail"], "a 400 must say what is wrong"
        return
    for summary in store.list_traces(limit=None):
        assert client.get(f"/api/runs/{summary.id}").status_code == 200
        assert client.get(f"/runs/{summary.id}").status_code == 200


def test_the_runs_page_still_renders_after_the_fuzzing(fuzz_client):
    client, store, _ = fuzz_client
    assert client.get("/").status_code == 200
