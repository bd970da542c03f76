"""`faultlens serve`: the server wired to a real attributor, reflection and lesson memory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.serve import serve
from faultlens.wiring import build_app
from faultlens.server import ServerThread
from faultlens.middleware.store import open_store

HTTP = httpx.Client(timeout=60)


def _send_failed_run(endpoint: str, query: str = "Convert 3 km to metres") -> dict:
    """A two-agent run sent with the SDK's OTLP/HTTP exporter; the tool step errors."""
    provider = TracerProvider(resource=Resource.create({"service.name": "unit-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("tests.feedback.serve")
    ids = {}
    with tracer.start_as_current_span("invoke_workflow converter", attributes={"gen_ai.operation.name": "invoke_workflow", "faultlens.task": json.dumps({"query": query})}) as root:
        ids["trace_id"] = format(root.get_span_context().trace_id, "032x")
        with tracer.start_as_current_span("chat planner", attributes={"gen_ai.operation.name": "chat", "gen_ai.agent.name": "planner", "faultlens.content": "Use the converter tool on 3 km."}):
            pass
        with tracer.start_as_current_span(
            "execute_tool converter",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.agent.name": "worker", "gen_ai.tool.name": "converter", "gen_ai.tool.call.arguments": json.dumps({"value": 3, "unit": "kg"})},
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "ValueError: unknown unit 'kg' for a length"))
            ids["tool_span"] = format(tool.get_span_context().span_id, "016x")
        with tracer.start_as_current_span("chat worker", attributes={"gen_ai.operation.name": "chat", "gen_ai.agent.name": "worker", "faultlens.content": "3 km is 3 metres.", "faultlens.step.kind": "final_answer"}):
            pass
    provider.shutdown()
    return ids


def _wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_failed_run_is_attributed_and_becomes_a_lesson(tmp_path):
    store = open_store(tmp_path / "serve.db")
    with ServerThread(build_app(store, method="heuristic")) as server:
        ids = _send_failed_run(server.url + "/v1/traces")
        trace_id = ids["trace_id"]
        trace = HTTP.get(f"{server.url}/api/runs/{trace_id}").json()
        assert [s["agent"] for s in trace["steps"]] == ["planner", "worker", "worker"]
        assert trace["steps"][1]["error"].startswith("ValueError")

        r = HTTP.post(f"{server.url}/api/runs/{trace_id}/outcome", json={"success": False, "score": 0.0, "detail": "expected 3000 metres"})
        assert r.status_code == 200 and r.json()["queued"] in (True, False)  # may already be queued by the span status path

        body = _wait(lambda: (b := HTTP.get(f"{server.url}/api/runs/{trace_id}/attribution").json())["latest"] and b["job"]["state"] == "done" and b)
        latest = body["latest"]
        assert latest["method"] == "heuristic" and latest["status"] == "ok"
        # The heuristic blames the first step that errored: the converter call.
        assert (latest["agent"], latest["step"]) == ("worker", 1)

        lessons = _wait(lambda: HTTP.get(f"{server.url}/api/lessons").json())
        (lesson,) = [l for l in lessons if l["trace_id"] == trace_id]
        assert (lesson["agent"], lesson["step"], lesson["attribution_id"]) == ("worker", 1, latest["id"])
        # An agent in another process asks for its lessons before a similar task (feedback's retrieval)...
        got = HTTP.get(f"{server.url}/api/lessons/for", params={"agent": "worker", "task": "Convert 5 km to metres"}).json()
        assert [l["id"] for l in got] == [lesson["id"]]
        # ...and an unrelated task gets none.
        assert HTTP.get(f"{server.url}/api/lessons/for", params={"agent": "worker", "task": "Write a poem about cats"}).json() == []

        # A person overrules the verdict (the planner's instruction was the decisive step): the lesson follows the label.
        r = HTTP.put(f"{server.url}/api/runs/{trace_id}/label", json={"step": 0, "mode": "PL.1", "reason": "asked for the wrong unit"})
        assert r.status_code == 200
        active = [l for l in HTTP.get(f"{server.url}/api/lessons").json() if l["trace_id"] == trace_id]
        assert [(l["agent"], l["step"], l["mode"]) for l in active] == [("planner", 0, "PL.1")]
        assert HTTP.get(f"{server.url}/api/runs/{trace_id}/attribution").json()["latest"]["method"] == "label"
    store.close()


def test_counterfactual_method_with_options_on_a_run_it_cannot_rerun(tmp_path):
    store = open_store(tmp_path / "cf.db")
    with ServerThread(build_app(store, method="counterfactual", method_options={"base": "heuristic", "k": 2})) as server:
        trace_id = _send_failed_run(server.url + "/v1/traces")["trace_id"]
        HTTP.post(f"{server.url}/api/runs/{trace_id}/outcome", json={"success": False})
        body = _wait(lambda: (b := HTTP.get(f"{server.url}/api/runs/{trace_id}/attribution").json())["latest"] and b["job"]["state"] == "done" and b)
        latest = body["latest"]
        # an OTLP run from another program has no rerunner here: the base's verdict, saying it is not verified
        assert (latest["method"], latest["agent"], latest["step"]) == ("counterfactual", "worker", 1)
        assert latest["details"]["verified"] is False and "no rerunner" in latest["details"]["fallback"]
    store.close()


def test_export_otlp_sends_the_attribution_to_another_otlp_receiver(tmp_path):
    from faultlens.server import create_app

    receiver_store = open_store(tmp_path / "receiver.db")
    store = open_store(tmp_path / "serve.db")
    with ServerThread(create_app(receiver_store)) as receiver, ServerThread(build_app(store, export_endpoint=receiver.url + "/v1/traces")) as server:
        ids = _send_failed_run(server.url + "/v1/traces")
        HTTP.post(f"{server.url}/api/runs/{ids['trace_id']}/outcome", json={"success": False})
        # The evaluation span arrives in the run's own OpenTelemetry trace.
        _wait(lambda: receiver_store.has_trace(ids["trace_id"]))
        # The job is marked done after the export returns, a moment after the receiver committed.
        _wait(lambda: HTTP.get(f"{server.url}/api/runs/{ids['trace_id']}/attribution").json()["job"]["state"] == "done")
    store.close()
    receiver_store.close()


def test_success_outcome_credits_the_lessons_the_run_was_shown(tmp_path):
    from faultlens.middleware.model.trace import Lesson, Step, Task, Trace

    store = open_store(tmp_path / "serve.db")
    lesson = Lesson(agent="worker", situation="unit conversion", mistake="wrong unit", advice="check the unit")
    store.save_lesson(lesson)
    trace = Trace(task=Task(query="convert"), steps=[Step(index=0, agent="worker", content="3000 m", lessons=[lesson.id])])
    store.save_trace(trace)
    with ServerThread(build_app(store)) as server:
        assert HTTP.post(f"{server.url}/api/runs/{trace.id}/outcome", json={"success": True}).status_code == 200
    updated = store.get_lesson(lesson.id)
    assert (updated.shown, updated.helped, updated.failed) == (1, 1, 0)
    store.close()


def test_serve_refuses_a_public_bind_without_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv("FAULTLENS_TOKEN", raising=False)
    result = CliRunner().invoke(serve, ["--host", "0.0.0.0", "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0
    assert "refusing to listen on '0.0.0.0'" in (result.output + str(result.exception))
    assert not (tmp_path / "x.db").exists()  # refused before opening anything


def _served_tokens(monkeypatch) -> list:
    """Stand-in for run_server: records the token `serve` would listen with, and listens on nothing."""
    seen: list = []
    monkeypatch.setattr("faultlens.serve.run_server", lambda app, *, host, port, token: seen.append(token))
    return seen


def test_serve_takes_its_token_from_a_file_or_the_environment_and_warns_when_it_is_an_argument(tmp_path, monkeypatch):
    """Issue #33: a token on the command line is visible in `ps`; a file or the environment is not."""
    monkeypatch.delenv("FAULTLENS_TOKEN", raising=False)
    seen = _served_tokens(monkeypatch)
    token = "file-token-of-24-chars-ok"
    (tmp_path / "token").write_text(token + "\n")
    runner = CliRunner()
    by_file = runner.invoke(serve, ["--host", "0.0.0.0", "--token-file", str(tmp_path / "token"), "--db", str(tmp_path / "a.db"), "--workers", "0"])
    assert by_file.exit_code == 0, by_file.output
    monkeypatch.setenv("FAULTLENS_TOKEN", "env-token-of-24-chars-okay")
    by_env = runner.invoke(serve, ["--host", "0.0.0.0", "--db", str(tmp_path / "b.db"), "--workers", "0"])
    assert by_env.exit_code == 0, by_env.output
    assert seen == [token, "env-token-of-24-chars-okay"]
    assert "WARNING" not in by_file.output + by_env.output
    by_argument = runner.invoke(serve, ["--token", "argument-token-24-chars", "--db", str(tmp_path / "c.db"), "--workers", "0"])
    assert by_argument.exit_code == 0 and seen[-1] == "argument-token-24-chars"
    assert "WARNING: --token" in by_argument.output and "ps" in by_argument.output and "--token-file" in by_argument.output
    both = runner.invoke(serve, ["--token", "x" * 20, "--token-file", str(tmp_path / "token"), "--db", str(tmp_path / "d.db")])
    assert both.exit_code != 0 and "not both" in both.output
    (tmp_path / "empty").write_text("")
    empty = runner.invoke(serve, ["--host", "0.0.0.0", "--token-file", str(tmp_path / "empty"), "--db", str(tmp_path / "e.db")])
    assert empty.exit_code != 0 and "is empty" in empty.output + str(empty.exception) and len(seen) == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_faultlens_serve_command_serves(tmp_path):
    port = _free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "FAULTLENS_TOKEN": "cli-test-token-0123"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "faultlens.cli", "serve", "--host", "0.0.0.0", "--port", str(port), "--db", str(tmp_path / "cli.db")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        auth = {"Authorization": "Bearer cli-test-token-0123"}
        url = f"http://127.0.0.1:{port}"

        def up():
            try:
                return HTTP.get(url + "/api/health", headers=auth).status_code == 200
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                return False

        _wait(up, timeout=120)
        assert HTTP.get(url + "/api/runs").status_code == 401
        assert HTTP.get(url + "/api/worker", headers=auth).json()["enabled"] is True
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.slow
@pytest.mark.browser
def test_the_ui_shows_the_heuristic_blame_and_the_lesson(tmp_path):
    """The whole service in a browser: spans in, failure recorded, heuristic blame highlighted, lesson listed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.faultlens.server.browser import chrome, save_for_docs

    driver = chrome(tmp_path)
    store = open_store(tmp_path / "serve.db")
    try:
        with ServerThread(build_app(store)) as server:
            ids = _send_failed_run(server.url + "/v1/traces")
            HTTP.post(f"{server.url}/api/runs/{ids['trace_id']}/outcome", json={"success": False, "score": 0.0, "detail": "expected 3000 metres"})
            wait = WebDriverWait(driver, 60)
            driver.get(server.url + "/?status=failed")
            wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, f'tr.run[data-run="{ids["trace_id"]}"] a.run-link'))).click()
            blamed = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "li.step.blamed")))
            assert blamed.get_attribute("data-step") == "1"
            assert "converter" in blamed.text and "A.2" in blamed.text
            assert DEFAULT_METHOD in driver.find_element(By.ID, "attribution").text
            driver.execute_script("window.scrollTo(0, 0)")
            shot = tmp_path / "ui-trace.png"
            driver.save_screenshot(str(shot))
            save_for_docs(shot, "ui-trace.png")

            # Confirming the verdict is one click: the label form starts at the blamed step.
            form = driver.find_element(By.CSS_SELECTOR, "form.label-form")
            form.find_element(By.NAME, "reason").send_keys("asked for kg, not km")
            form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            gold_line = wait.until(EC.presence_of_element_located((By.ID, "gold-line")))
            assert "worker" in gold_line.text and "asked for kg, not km" in gold_line.text
            gold = store.get_trace(ids["trace_id"]).gold
            assert (gold.step, gold.agent, gold.mode, gold.reason) == (1, "worker", "A.2", "asked for kg, not km")

            driver.get(server.url + "/lessons")
            row = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#lessons tbody tr")))
            assert "worker" in row.text and "A.2" in row.text
            driver.save_screenshot(str(tmp_path / "ui-lessons.png"))
            save_for_docs(tmp_path / "ui-lessons.png", "ui-lessons.png")
    finally:
        driver.quit()
        store.close()
