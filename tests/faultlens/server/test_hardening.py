"""The cases of issue #20 that concern the server, one test each (items 1-4, 8 and 11).

In-process (TestClient addressed as 127.0.0.1) except where a real bind matters.
"""

from __future__ import annotations

import gzip
import json
import sqlite3

import pytest
from fastapi.testclient import TestClient

from faultlens.middleware.model.trace import Media, Source, Step, StepKind, Task, Trace
from faultlens.middleware.store import SQLiteStore
from faultlens.server import create_app
from faultlens.server.auth import UnsafeBind, check_bind

TRACE = "0af7651916cd43dd8448eb211c80319c"
JSON_HEADERS = {"content-type": "application/json"}


def attrs(**values) -> list[dict]:
    out = []
    for key, value in values.items():
        key = key.replace("__", ".")
        out.append({"key": key, "value": value if isinstance(value, dict) else {"stringValue": value}})
    return out


def span(span_id: str = "b7ad6b7169203331", **fields) -> dict:
    base = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": "chat m",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": attrs(gen_ai__operation__name="chat", gen_ai__agent__name="solver", faultlens__content="hello"),
    }
    base.update(fields)
    return base


def workflow(*extra: dict) -> dict:
    return span("c7ad6b7169203331", name="invoke_workflow run", attributes=attrs(gen_ai__operation__name="invoke_workflow") + list(extra))


def export(*spans: dict) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": attrs(service__name="agent")}, "scopeSpans": [{"spans": list(spans)}]}]}


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "h.db")


@pytest.fixture
def store(db):
    return SQLiteStore(db)


@pytest.fixture
def client(store):
    return TestClient(create_app(store), base_url="http://127.0.0.1")


def counts(path: str) -> tuple[int, int]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM traces").fetchone()[0], conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]


def post(client, body, headers=JSON_HEADERS):
    return client.post("/v1/traces", content=body if isinstance(body, bytes) else json.dumps(body), headers=headers)


# -- 1. one accepted span must not break the UI --------------------------------
def test_1_a_time_beyond_what_a_datetime_holds_is_a_400_naming_the_field(client, db):
    response = post(client, export(span(startTimeUnixNano=1.5e30)))
    assert response.status_code == 400
    assert response.json()["field"] == "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano"
    assert counts(db) == (0, 0)
    assert client.get("/").status_code == 200


def test_1_the_latest_time_accepted_still_renders_every_page(client, store):
    assert post(client, export(span(startTimeUnixNano=str(2**64 - 1), endTimeUnixNano=str(2**64 - 1)))).status_code == 200
    (run,) = store.list_traces()
    for path in ("/", f"/runs/{run.id}", f"/api/runs/{run.id}", "/api/runs"):
        assert client.get(path).status_code == 200, path


# -- 2. a lone surrogate in a later span: 400, nothing stored ------------------
@pytest.mark.parametrize("key", ["faultlens.content", "gen_ai.agent.name"])
def test_2_a_lone_surrogate_in_the_second_span_stores_nothing(client, db, key):
    bad = span("b7ad6b7169203332", attributes=attrs(gen_ai__operation__name="chat") + [{"key": key, "value": {"stringValue": "\ud800"}}])
    response = post(client, json.dumps(export(span(), bad)).encode())
    assert response.status_code == 400
    assert "spans[1].attributes[1].value" in response.json()["detail"]
    assert "surrogate" in response.json()["detail"]
    assert counts(db) == (0, 0)


# -- 3. malformed bodies: 400 naming the field, never 500, never 200 ----------
MALFORMED = {
    "status as a string": export(span(status="ERROR")),
    "status as a list": export(span(status=[2])),
    "status as an object of junk": export(span(status={"code": {"x": 1}})),
    "status code as a list": export(span(status={"code": [2]})),
    "status code unknown": export(span(status={"code": 7})),
    "kind as a list": export(span(kind=[1])),
    "kind as an object": export(span(kind={})),
    "kind out of range": export(span(kind=9)),
    "attribute key a number": export(span(attributes=[{"key": 5, "value": {"stringValue": "x"}}])),
    "attribute key a list": export(span(attributes=[{"key": [1], "value": {"stringValue": "x"}}])),
    "attribute without key": export(span(attributes=[{"value": {"stringValue": "x"}}])),
    "attributes a string": export(span(attributes="x")),
    "value two kinds": export(span(attributes=[{"key": "k", "value": {"stringValue": "x", "intValue": "1"}}])),
    "intValue beyond int64": export(span(attributes=[{"key": "k", "value": {"intValue": str(2**63)}}])),
    "doubleValue a string": export(span(attributes=[{"key": "k", "value": {"doubleValue": "NaN"}}])),
    "boolValue a string": export(span(attributes=[{"key": "k", "value": {"boolValue": "yes"}}])),
    "scopeSpans a string": {"resourceSpans": [{"scopeSpans": "abc"}]},
    "resourceSpans of a number": {"resourceSpans": [1]},
    "resourceSpans of a list": {"resourceSpans": [[]]},
    "resourceSpans an object": {"resourceSpans": {}},
    "no resourceSpans": {"spans": []},
    "spans a number": {"resourceSpans": [{"scopeSpans": [{"spans": 3}]}]},
    "span a string": {"resourceSpans": [{"scopeSpans": [{"spans": ["x"]}]}]},
    "events a string": export(span(events="x")),
    "event time negative": export(span(events=[{"name": "e", "timeUnixNano": -1}])),
    "a 400-digit time": export(span(startTimeUnixNano="9" * 400)),
    "a fractional time": export(span(startTimeUnixNano=1.5)),
    "a boolean time": export(span(endTimeUnixNano=True)),
    "traceId too short": export(span(traceId="abc")),
    "traceId a number": export(span(traceId=12)),
    "spanId missing": export({k: v for k, v in span().items() if k != "spanId"}),
    "name missing": export({k: v for k, v in span().items() if k != "name"}),
    "name a number": export(span(name=3)),
    "links a string": export(span(links="x")),
    "1,000 nested arrayValues": json.dumps(export(span(attributes=[{"key": "k", "value": "NESTED"}]))).replace('"NESTED"', '{"arrayValue":{"values":[' * 1000 + "]}}" * 1000).encode(),
    "40 nested arrayValues": export(span(attributes=[{"key": "k", "value": json.loads('{"arrayValue":{"values":[' * 40 + "]}}" * 40)}])),
    "invalid JSON in gen_ai.input.messages on a workflow span": export(workflow(*attrs(gen_ai__input__messages="{not json"))),
    "invalid JSON in faultlens.trace.metadata on a workflow span": export(workflow(*attrs(faultlens__trace__metadata="{not json"))),
    "trace metadata not an object": export(workflow(*attrs(faultlens__trace__metadata="[1]"))),
    "task not an object": export(workflow(*attrs(faultlens__task="[1]"))),
    "message parts not a list": export(span(attributes=attrs(gen_ai__operation__name="chat", gen_ai__output__messages='[{"parts": 3}]'))),
    "clashing OpenInference keys": export(span(attributes=attrs(openinference__span__kind="LLM", **{"llm__input_messages__0__message": "x", "llm__input_messages__0__message__role": "user"}))),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_3_a_malformed_body_is_a_400_that_names_the_field_and_stores_nothing(client, db, name):
    response = post(client, MALFORMED[name])
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["detail"]
    assert body.get("field"), f"the answer should name the field: {body}"
    assert counts(db) == (0, 0)


def test_3_a_1000_deep_json_document_is_a_400(client, db):
    assert post(client, b"[" * 1000 + b"]" * 1000).status_code == 400
    assert post(client, b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}").status_code == 400
    assert counts(db) == (0, 0)


def test_3_nan_is_not_json(client, db):
    assert post(client, b'{"resourceSpans": [], "x": NaN}').status_code == 400


def test_3_trailing_garbage_after_a_gzip_stream_is_a_400(client, db):
    response = post(client, gzip.compress(json.dumps(export(span())).encode()) + b"garbage", {**JSON_HEADERS, "content-encoding": "gzip"})
    assert response.status_code == 400
    assert "trailing" in response.json()["detail"]
    assert counts(db) == (0, 0)


# -- 4. multi-member gzip is read in full ---------------------------------------
def test_4_every_member_of_a_multi_member_gzip_body_is_stored(client, store):
    raw = json.dumps(export(span("b7ad6b7169203331"), span("b7ad6b7169203332"))).encode()
    half = len(raw) // 2  # split inside the second span: a reader of the first member only gets invalid JSON
    body = gzip.compress(raw[:half]) + gzip.compress(raw[half:])
    assert gzip.decompress(body) == raw
    response = post(client, body, {**JSON_HEADERS, "content-encoding": "gzip"})
    assert response.status_code == 200, response.text
    (run,) = store.list_traces()
    assert run.n_steps == 2


# -- 8. media only as pictures and video, never in the UI's origin as a page ---
@pytest.fixture
def media_client(tmp_path, store):
    root = tmp_path / "media"
    root.mkdir()
    (root / "evil.html").write_text("<script>fetch('/api/runs')</script>")
    (root / "evil.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>")
    (root / "ok.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    media = [
        Media(mime_type="text/html", path=str(root / "evil.html")),
        Media(mime_type="image/svg+xml", path=str(root / "evil.svg")),
        Media(mime_type="image/png", path=str(root / "ok.png")),
        Media(mime_type="image/png", path=str(root / "evil.html")),
    ]
    store.save_trace(Trace(id="m", task=Task(query="q"), source=Source(format="native"), steps=[Step(index=0, agent="a", kind=StepKind.message, content="c", media=media)]))
    return TestClient(create_app(store, media_root=root), base_url="http://127.0.0.1")


def test_8_media_of_a_type_a_browser_would_run_is_not_served(media_client):
    assert media_client.get("/media/m/0/0").status_code == 415  # text/html
    assert media_client.get("/media/m/0/1").status_code == 415  # SVG can hold script


def test_8_served_media_is_an_image_with_nosniff_and_a_sandbox_csp(media_client):
    for position in (2, 3):  # a real PNG, and HTML that claims to be one
        response = media_client.get(f"/media/m/0/{position}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "image/png"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in response.headers["content-security-policy"]
        assert "default-src 'none'" in response.headers["content-security-policy"]


def test_8_the_run_page_links_only_servable_media(media_client):
    page = media_client.get("/runs/m").text
    assert "/media/m/0/0" not in page and "/media/m/0/1" not in page
    assert "/media/m/0/2" in page


# -- 11. origins, tokens, login limits, headers ---------------------------------
def test_11_without_a_token_a_cross_origin_post_is_refused(client, store):
    store.save_trace(Trace(id="r", task=Task(query="q"), source=Source(format="native"), steps=[Step(index=0, agent="a", kind=StepKind.message, content="c")]))
    client.post("/api/runs/r/outcome", json={"success": False})
    evil = client.post("/api/runs/r/attribute", headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    assert client.post("/api/runs/r/attribute", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.post("/v1/traces", content=json.dumps(export(span())), headers={**JSON_HEADERS, "Origin": "null"}).status_code == 403
    assert client.post("/api/runs/r/attribute", headers={"Origin": "http://127.0.0.1"}).status_code == 200  # its own pages
    assert client.post("/api/runs/r/attribute").status_code == 200  # SDKs and curl send no Origin
    assert client.get("/api/runs", headers={"Origin": "http://evil.example"}).status_code == 200  # reads are guarded by CORS
    # A label trains `learned` and rewrites lessons: another site's page may not set one, by form or by fetch.
    assert client.post("/runs/r/label", data={"step": "0"}, headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.put("/api/runs/r/label", json={"step": 0}, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.delete("/api/runs/r/label", headers={"Origin": "http://evil.example"}).status_code == 403
    assert store.get_trace("r").gold is None
    assert client.post("/runs/r/label", data={"step": "0"}, headers={"Origin": "http://127.0.0.1"}, follow_redirects=False).status_code == 303


@pytest.mark.parametrize("token", [" ", "  \t", "a b" * 10, "x", "short-token"])
def test_11_blank_whitespace_or_short_tokens_are_refused_on_a_public_bind(token):
    with pytest.raises(UnsafeBind):
        check_bind("0.0.0.0", token)


def test_11_a_long_token_is_accepted_on_a_public_bind_and_whitespace_nowhere():
    check_bind("0.0.0.0", "x" * 16)
    check_bind("127.0.0.1", "short")
    with pytest.raises(UnsafeBind):
        check_bind("127.0.0.1", "has space")


def test_11_failed_logins_are_limited(store):
    client = TestClient(create_app(store, token="t" * 20, failed_login_limit=3, failed_login_window=60), base_url="http://127.0.0.1")
    for _ in range(3):
        assert client.post("/login", data={"token": "wrong", "next": "/"}, follow_redirects=False).status_code == 200  # the form again
    assert client.post("/login", data={"token": "wrong"}, follow_redirects=False).status_code == 429
    # Bearer-token guesses from the same address wait too; the right token never does (issue #33: the
    # limit must not lock out the exporter or the user who holds the token).
    limited = client.get("/api/runs", headers={"Authorization": "Bearer nope"})
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert client.post("/login", data={"token": "t" * 20}, follow_redirects=False).status_code == 303
    assert client.get("/api/runs", headers={"Authorization": "Bearer " + "t" * 20}).status_code == 200


def test_11_wrong_bearer_tokens_count_but_missing_ones_do_not(store):
    client = TestClient(create_app(store, token="t" * 20, failed_login_limit=2), base_url="http://127.0.0.1")
    for _ in range(5):
        assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer " + "t" * 20}).status_code == 200
    for _ in range(2):
        assert client.get("/api/runs", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer nope"}).status_code == 429


def test_33_wrong_tokens_never_lock_out_a_client_that_has_the_right_one(store):
    """Ten wrong tokens from one local process: every client holding the token, the OTLP exporter included, goes on."""
    token = "t" * 20
    app = create_app(store, token=token)
    guesser = TestClient(app, base_url="http://127.0.0.1")
    for _ in range(10):
        assert guesser.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guesser.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 429
    exporter = TestClient(app, base_url="http://127.0.0.1")  # the same address, as every local client has
    ok = exporter.post("/v1/traces", content=json.dumps(export(span())), headers={**JSON_HEADERS, "Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and store.has_trace(TRACE)
    assert exporter.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    browser = TestClient(app, base_url="http://127.0.0.1")
    assert browser.get("/", headers={"Accept": "text/html"}, follow_redirects=False).status_code == 303  # to the login form, not a 429
    assert browser.post("/login", data={"token": token, "next": "/"}, follow_redirects=False).status_code == 303
    assert browser.get("/").status_code == 200  # the login cookie
    assert guesser.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 429  # the guesser still waits


def test_33_with_a_token_a_cross_origin_change_is_refused_too(store):
    """SameSite=Strict does not separate ports of 127.0.0.1: a page on another port must not write, even with the cookie."""
    token = "t" * 20
    store.save_trace(Trace(id="r", task=Task(query="q"), source=Source(format="native"), steps=[Step(index=0, agent="a", kind=StepKind.message, content="c")]))
    client = TestClient(create_app(store, token=token), base_url="http://127.0.0.1")
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.post("/api/runs/r/outcome", json={"success": False}, headers=bearer).status_code == 200
    client.cookies.set("faultlens_token", token)
    other_port = {"Origin": "http://127.0.0.1:8000"}
    assert client.post("/runs/r/label", data={"step": "0"}, headers=other_port).status_code == 403
    assert client.post("/api/runs/r/attribute", headers=other_port).status_code == 403
    assert client.post("/api/runs/r/attribute", headers={**bearer, "Sec-Fetch-Site": "same-site"}).status_code == 403
    assert client.put("/api/runs/r/label", json={"step": 0}, headers={"Origin": "null"}).status_code == 403
    assert client.delete("/api/runs/r/label", headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/runs/r/outcome", json={"success": True}, headers=other_port).status_code == 403
    assert client.post("/v1/traces", content=json.dumps(export(span())), headers={**JSON_HEADERS, **bearer, **other_port}).status_code == 403
    assert client.post("/login", data={"token": token}, headers=other_port, follow_redirects=False).status_code == 403
    assert store.get_trace("r").gold is None and store.get_trace("r").failed
    # Its own pages, and clients that send no Origin (SDKs, curl), still may; reads are guarded by CORS.
    assert client.post("/runs/r/label", data={"step": "0"}, headers={"Origin": "http://127.0.0.1"}, follow_redirects=False).status_code == 303
    assert client.post("/api/runs/r/attribute", headers=bearer).status_code == 200
    assert client.get("/api/runs", headers=other_port).status_code == 200


@pytest.mark.parametrize("path", ["/", "/lessons", "/reports", "/api/runs", "/api/health", "/does-not-exist"])
def test_11_every_page_has_csp_frame_and_nosniff_headers(client, path):
    response = client.get(path)
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_11_the_api_docs_page_may_load_swagger_ui_but_nothing_else_is_relaxed(client):
    docs = client.get("/docs")
    assert docs.status_code == 200 and "https://cdn.jsdelivr.net" in docs.headers["content-security-policy"]
    assert "cdn.jsdelivr.net" not in client.get("/").headers["content-security-policy"]
    assert docs.headers["x-frame-options"] == "DENY"


def test_11_a_refused_request_has_the_headers_too(store):
    client = TestClient(create_app(store, token="t" * 20), base_url="http://127.0.0.1")
    response = client.get("/api/runs")
    assert response.status_code == 401
    assert response.headers["x-frame-options"] == "DENY"


# -- 6. secrets never stored, ids included --------------------------------------
SECRET_VALUES = {
    "sk": "sk-abc123def",
    "bearer": "Bearer xyzzy",
    "pwd": "pwd=abc12",
    "json password": '{"password": "open sesame"}',
    "aws": "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "url": "https://user:hunter2@host.example/x",
    "pem": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
}
LEAKS = ["abc123def", "xyzzy", "abc12", "open sesame", "wJalrXUtnFEMI", "dozjgNryP4J3", "hunter2", "MIIEvQIBADAN"]


def test_6_secrets_in_any_span_field_are_not_stored_or_exported(client, store, db):
    text = " | ".join(SECRET_VALUES.values())
    step = span(
        attributes=attrs(
            gen_ai__operation__name="chat",
            gen_ai__conversation__id="conv sk-abc123def",
            gen_ai__agent__name="agent Bearer xyzzy",
            faultlens__content=text,
            gen_ai__tool__call__arguments='{"q": "pwd=abc12"}',
        ),
        status={"code": 2, "message": "failed with https://user:hunter2@host.example/x"},
    )
    body = export(step)
    body["resourceSpans"][0]["resource"]["attributes"] = attrs(service__name="svc pwd=abc12")
    assert post(client, body).status_code == 200
    second = span("b7ad6b7169203332", attributes=attrs(gen_ai__operation__name="chat", gen_ai__conversation__id="conv sk-abc123def", faultlens__content="again"))
    assert post(client, export(second)).status_code == 200

    with sqlite3.connect(db) as conn:
        dump = "\n".join(str(row) for table in ("traces", "steps") for row in conn.execute(f"SELECT * FROM {table}"))
    for leak in LEAKS:
        assert leak not in dump, leak
    (run,) = store.list_traces()  # both requests landed in one run, under the hashed conversation id
    assert run.id.startswith("redacted-") and run.n_steps == 2
    assert run.framework is not None and "abc12" not in run.framework
    exported = client.get(f"/api/runs/{run.id}").text + client.get(f"/runs/{run.id}").text
    for leak in LEAKS:
        assert leak not in exported, leak


@pytest.mark.parametrize("args", [["--token", " "], ["--token", "x", "--host", "0.0.0.0"], ["--token", "a b c d e f g h i j", "--host", "0.0.0.0"]])
def test_11_faultlens_serve_refuses_such_tokens_before_listening(tmp_path, args):
    from click.testing import CliRunner

    from faultlens.cli import cli

    result = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path / "s.db"), *args])
    assert result.exit_code != 0
    assert "token" in result.output and "Traceback" not in result.output


def test_1_a_stored_time_no_datetime_holds_does_not_break_the_pages(client, store):
    # Not through OTLP (the schema refuses it) but through a native file import or an older store.
    store.save_trace(Trace(id="old", task=Task(query="q"), source=Source(format="native"), created_at=1.5e21,
                           steps=[Step(index=0, agent="a", kind=StepKind.message, content="c", started_at=1.5e21)]))
    for path in ("/", "/runs/old", "/api/runs/old"):
        assert client.get(path).status_code == 200, path
    assert "not a date" in client.get("/runs/old").text


# -- the OTLP fast path keeps the gate and the headers (issue #17) ---------------
def _export_body() -> bytes:
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                           {"key": "gen_ai.agent.name", "value": {"stringValue": "a"}}]}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def test_otlp_fast_path_answers_with_the_route_s_code_behind_the_same_gate(store, monkeypatch):
    from faultlens.server import routes_otlp

    calls = []
    export = routes_otlp.export_traces

    async def counting(services, request):
        calls.append(request.url.path)
        return await export(services, request)

    monkeypatch.setattr(routes_otlp, "export_traces", counting)
    headers = {"Content-Type": "application/json"}
    app = create_app(store)
    # The fast path runs inside the gate (user_middleware lists the outermost first).
    assert [m.cls.__name__ for m in app.user_middleware] == ["Gatekeeper", "OtlpFastPath"]
    open_client = TestClient(app, base_url="http://127.0.0.1")
    ok = open_client.post("/v1/traces", content=_export_body(), headers=headers)
    assert ok.status_code == 200 and ok.headers["x-faultlens-spans"] == "1"
    assert ok.headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in ok.headers["content-security-policy"]
    assert calls == ["/v1/traces"]
    # Refused before the body is read: another origin, another host name, a missing token.
    assert open_client.post("/v1/traces", content=_export_body(), headers={**headers, "Origin": "https://evil.example"}).status_code == 403
    assert TestClient(create_app(store), base_url="http://evil.example").post("/v1/traces", content=_export_body(), headers=headers).status_code == 403
    locked = TestClient(create_app(store, token="t" * 20), base_url="http://127.0.0.1")
    refused = locked.post("/v1/traces", content=_export_body(), headers=headers)
    assert refused.status_code == 401 and refused.headers["x-frame-options"] == "DENY"
    assert locked.post("/v1/traces", content=_export_body(), headers={**headers, "Authorization": "Bearer " + "t" * 20}).status_code == 200
    assert calls == ["/v1/traces"] * 2
    # Errors keep the route's bodies.
    bad = open_client.post("/v1/traces", content=b"{not json", headers=headers)
    assert bad.status_code == 400 and bad.json()["field"] == "body"


def test_33_a_run_id_holding_a_newline_is_reachable_on_every_run_route(client, store):
    from urllib.parse import quote

    run = "conv\nline two/part"
    store.save_trace(Trace(id=run, task=Task(query="q"), source=Source(format="native"), steps=[Step(index=0, agent="a", kind=StepKind.message, content="c")]))
    path = quote(run, safe="")
    assert client.post(f"/api/runs/{path}/outcome", json={"success": False}).status_code == 200
    assert store.get_trace(run).failed
    assert client.get(f"/api/runs/{path}").json()["id"] == run
    assert client.get(f"/api/runs/{path}/attribution").json()["trace_id"] == run
    assert client.post(f"/api/runs/{path}/attribute").status_code == 200
    assert client.put(f"/api/runs/{path}/label", json={"step": 0}).status_code == 200
    assert client.delete(f"/api/runs/{path}/label").status_code == 200
    assert client.get(f"/runs/{path}").status_code == 200
    assert client.post(f"/runs/{path}/label", data={"step": "0"}, follow_redirects=False).status_code == 303
    assert store.get_trace(run).gold is not None


def test_33_github_fine_grained_tokens_and_x_api_key_headers_are_not_stored_or_exported(client, store, db):
    from faultlens.middleware.otlp.convert import trace_to_otlp

    pat = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"
    step = span(attributes=attrs(gen_ai__operation__name="chat", gen_ai__agent__name=f"agent {pat}",
                                 faultlens__content="curl -H 'x-api-key: 0123456789abcdef0123' https://api.example"),
                status={"code": 2, "message": f"push failed with {pat}"})
    assert post(client, export(step)).status_code == 200
    leaks = ["abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456", "0123456789abcdef0123"]
    with sqlite3.connect(db) as conn:
        dump = "\n".join(str(row) for table in ("traces", "steps", "span_links") for row in conn.execute(f"SELECT * FROM {table}"))
    (run,) = store.list_traces()
    exported = json.dumps(trace_to_otlp(store.get_trace(run.id))) + client.get(f"/api/runs/{run.id}").text + client.get(f"/runs/{run.id}").text
    for leak in leaks:
        assert leak not in dump and leak not in exported, leak


@pytest.mark.parametrize("field", ["detail", "evaluator"])
def test_an_outcome_with_a_lone_surrogate_is_refused_naming_the_field_and_stores_nothing(store, field):
    """Issue 43, finding 7: "\\ud800" answered 500 and left a placeholder run; now 4xx naming the field, nothing stored."""
    client = TestClient(create_app(store, workers=0), base_url="http://127.0.0.1")
    raw = '{"success": false, "%s": "bad \\ud800 text"}' % field
    answer = client.post("/api/runs/never-seen/outcome", content=raw, headers=JSON_HEADERS)
    assert answer.status_code == 422 and field in answer.text and "Traceback" not in answer.text
    assert not store.has_trace("never-seen")
    label = client.put("/api/runs/never-seen/label", content='{"step": 0, "reason": "\\udfff"}', headers=JSON_HEADERS)
    assert label.status_code == 422 and "reason" in label.text
