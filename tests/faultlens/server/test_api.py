"""The REST API over a real server: outcomes queue attribution, runs, attributions, lessons, filters, OpenAPI."""

from __future__ import annotations

import time


from faultlens.middleware.model.trace import Lesson, Outcome, Step, Task, Trace
from faultlens.server import create_app

from .conftest import HTTP, wait_for


def _trace(query="q", agent="solver", created_at=None, outcome=None) -> Trace:
    return Trace(
        task=Task(query=query),
        steps=[
            Step(index=0, agent="planner", content="plan"),
            Step(index=1, agent=agent, kind="tool_call", tool_name="calculator", tool_arguments={"x": "17*32"}, span_id="aa" * 8),
            Step(index=2, agent=agent, kind="final_answer", content="544"),
        ],
        outcome=outcome,
        **({"created_at": created_at} if created_at else {}),
    )


def test_failed_outcome_queues_on_failure_and_the_attribution_is_served(live, store):
    trace = _trace()
    store.save_trace(trace)
    r = HTTP.post(f"{live.url}/api/runs/{trace.id}/outcome", json={"success": False, "score": 0.0, "detail": "expected 391"})
    assert r.status_code == 200 and r.json()["queued"] is True

    stored = HTTP.get(f"{live.url}/api/runs/{trace.id}").json()
    assert stored["outcome"] == {"success": False, "score": 0.0, "detail": "expected 391", "evaluator": "api"}
    body = wait_for(lambda: (b := HTTP.get(f"{live.url}/api/runs/{trace.id}/attribution").json())["latest"] and b["job"]["state"] == "done" and b)
    assert body["latest"]["method"] == "test-double"
    assert (body["latest"]["agent"], body["latest"]["step"], body["latest"]["mode"]) == ("solver", 1, "A.2")
    assert body["job"]["state"] == "done"
    assert HTTP.get(live.url + "/api/worker").json()["processed"] == 1


def test_success_outcome_queues_nothing(live, store):
    trace = _trace()
    store.save_trace(trace)
    r = HTTP.post(f"{live.url}/api/runs/{trace.id}/outcome", json={"success": True, "score": 1.0})
    assert r.json()["queued"] is False
    assert HTTP.get(f"{live.url}/api/runs/{trace.id}/attribution").json() == {"trace_id": trace.id, "job": None, "latest": None, "attributions": []}


def test_errors_of_on_failure_are_visible(store, serve):
    def broken(trace_id):
        raise RuntimeError("no model configured")

    server = serve(create_app(store, on_failure=broken))
    trace = _trace()
    store.save_trace(trace)
    HTTP.post(f"{server.url}/api/runs/{trace.id}/outcome", json={"success": False})
    job = wait_for(lambda: (j := HTTP.get(f"{server.url}/api/runs/{trace.id}/attribution").json()["job"]) and j["state"] == "error" and j)
    assert "no model configured" in job["error"]
    # Once fixed, the run can be queued again.
    assert HTTP.post(f"{server.url}/api/runs/{trace.id}/attribute").json()["queued"] is True


def test_unknown_runs_and_bad_requests(live, store):
    assert HTTP.get(live.url + "/api/runs/nope").status_code == 404
    assert HTTP.get(live.url + "/api/runs/nope/attribution").status_code == 404
    trace = _trace()
    store.save_trace(trace)
    assert HTTP.post(f"{live.url}/api/runs/{trace.id}/outcome", json={"score": 1}).status_code == 422
    assert HTTP.post(f"{live.url}/api/runs/{trace.id}/attribute").status_code == 409  # not failed
    assert HTTP.get(live.url + "/api/runs?status=broken").status_code == 400
    assert HTTP.get(live.url + "/api/runs?since=yesterday").status_code == 400


def test_run_filters(live, store):
    now = time.time()
    failed = _trace("failed one", agent="solver", outcome=Outcome(success=False))
    ok = _trace("ok one", agent="checker", outcome=Outcome(success=True))
    pending = _trace("pending one", agent="solver")
    store.save_traces([failed, ok, pending])

    def ids(query):
        return {r["id"] for r in HTTP.get(live.url + "/api/runs" + query).json()}

    assert ids("") == {failed.id, ok.id, pending.id}
    assert ids("?status=failed") == {failed.id}
    assert ids("?status=succeeded") == {ok.id}
    assert ids("?status=unknown") == {pending.id}
    assert ids("?agent=checker") == {ok.id}
    assert ids("?status=failed&agent=checker") == set()
    assert ids(f"?since={now - 60}") == {failed.id, ok.id, pending.id}
    assert ids(f"?since={now + 3600}") == set()
    assert ids("?since=2000-01-01T00:00:00Z") == {failed.id, ok.id, pending.id}


def test_lessons_and_lessons_for(live, store):
    a = Lesson(agent="solver", mode="A.2", situation="multiplying two numbers with the calculator", mistake="swapped digits", advice="copy operands exactly", helped=3)
    b = Lesson(agent="solver", mode="R.1", situation="citing sources", mistake="made one up", advice="only cite what you read", failed=2)
    c = Lesson(agent="planner", situation="planning", mistake="m", advice="plan less")
    for lesson in (a, b, c):
        store.save_lesson(lesson)
    all_ids = [l["id"] for l in HTTP.get(live.url + "/api/lessons").json()]
    assert set(all_ids) == {a.id, b.id, c.id}
    assert [l["id"] for l in HTTP.get(live.url + "/api/lessons?agent=planner").json()] == [c.id]
    # Without the feedback package's retrieval injected: the agent's lessons, best track record first.
    got = HTTP.get(live.url + "/api/lessons/for", params={"agent": "solver", "task": "what is 17 * 23?"}).json()
    assert [l["id"] for l in got] == [a.id, b.id]
    assert HTTP.get(live.url + "/api/lessons/for").status_code == 422  # agent is required


def test_injected_lesson_retrieval_is_used(store, serve):
    calls = []
    lesson = Lesson(agent="solver", situation="s", mistake="m", advice="a")

    def lessons_for(agent, task, k):
        calls.append((agent, task, k))
        return [lesson]

    server = serve(create_app(store, lessons_for=lessons_for))
    got = HTTP.get(server.url + "/api/lessons/for", params={"agent": "solver", "task": "17 * 23", "k": 3}).json()
    assert [l["id"] for l in got] == [lesson.id]
    assert calls == [("solver", "17 * 23", 3)]


def test_openapi_docs(live):
    assert HTTP.get(live.url + "/docs").status_code == 200
    spec = HTTP.get(live.url + "/openapi.json").json()
    for path in ("/v1/traces", "/api/runs", "/api/runs/{trace_id}", "/api/runs/{trace_id}/outcome", "/api/runs/{trace_id}/attribution", "/api/lessons", "/api/lessons/for"):
        assert path in spec["paths"], path


def test_outcomes_set_by_spans_reach_on_outcome(store, serve):
    from .conftest import run_team, sdk_provider

    seen = []
    server = serve(create_app(store, on_outcome=lambda trace_id, outcome: seen.append((trace_id, outcome.success, outcome.evaluator))))
    provider = sdk_provider(server.url + "/v1/traces")
    ok = run_team(provider)
    failed = run_team(provider, fail=True)
    # Only the run whose root span ended with ERROR got an outcome from its spans.
    assert seen == [(failed["trace_id"], False, "span status")]
    HTTP.post(f"{server.url}/api/runs/{ok['trace_id']}/outcome", json={"success": True})
    assert seen[-1] == (ok["trace_id"], True, "api")
    # No on_failure configured: the failed run is recorded as dropped, not silently ignored.
    assert HTTP.get(f"{server.url}/api/runs/{failed['trace_id']}/attribution").json()["job"]["state"] == "dropped"


def test_an_outcome_before_the_spans_waits_for_them(live, store):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .conftest import run_team

    # An agent reports its failure before its span processor has exported anything.
    held = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(held))
    trace_id = run_team(provider, fail=True, root_error=False)["trace_id"]
    assert not store.has_trace(trace_id)

    r = HTTP.post(f"{live.url}/api/runs/{trace_id}/outcome", json={"success": False, "detail": "answered 544"})
    assert r.status_code == 200 and r.json()["worker"]["state"] == "waiting"
    assert HTTP.get(f"{live.url}/api/runs/{trace_id}/attribution").json()["job"]["state"] == "waiting"

    assert OTLPSpanExporter(endpoint=live.url + "/v1/traces").export(held.get_finished_spans()).name == "SUCCESS"
    body = wait_for(lambda: (b := HTTP.get(f"{live.url}/api/runs/{trace_id}/attribution").json())["latest"] and b["job"]["state"] == "done" and b)
    assert body["latest"]["step"] == 1 and body["job"]["state"] == "done"
    run = HTTP.get(f"{live.url}/api/runs/{trace_id}").json()
    assert run["outcome"]["detail"] == "answered 544"  # kept when the root span's header arrived
    assert run["task"]["query"] == "What is 17 * 23?" and len(run["steps"]) == 3


def test_a_run_id_holding_slashes_is_reachable_on_every_route(live, store):
    """A run id is the caller's conversation id (`gen_ai.conversation.id`, `session.id`) and may hold '/'."""
    trace = _trace().model_copy(update={"id": "team/2026-12-01/run 7"})
    store.save_trace(trace)
    assert HTTP.get(f"{live.url}/api/runs/{trace.id}").json()["id"] == trace.id
    r = HTTP.post(f"{live.url}/api/runs/{trace.id}/outcome", json={"success": False, "score": 0.0})
    assert r.status_code == 200 and r.json()["queued"] is True
    body = wait_for(lambda: (b := HTTP.get(f"{live.url}/api/runs/{trace.id}/attribution").json())["latest"] and b)
    assert body["trace_id"] == trace.id and body["latest"]["step"] == 1
    assert HTTP.post(f"{live.url}/api/runs/{trace.id}/attribute").status_code == 200
    page = HTTP.get(f"{live.url}/runs/{trace.id}")
    assert page.status_code == 200 and "team/2026-12-01/run 7" in page.text
    assert HTTP.put(f"{live.url}/api/runs/{trace.id}/label", json={"step": 1}).json()["label"]["step"] == 1
    form = HTTP.post(f"{live.url}/runs/{trace.id}/label", data={"step": "0"}, follow_redirects=False)
    assert form.status_code == 303 and store.get_trace(trace.id).gold.step == 0
    assert HTTP.get(f"{live.url}{form.headers['location']}").status_code == 200
    assert HTTP.delete(f"{live.url}/api/runs/{trace.id}/label").status_code == 200
    assert HTTP.get(f"{live.url}/api/runs/team/no-such-run").status_code == 404


def test_a_run_is_labelled_and_unlabelled(live, store):
    trace = _trace(outcome=Outcome(success=False))
    store.save_trace(trace)
    url = f"{live.url}/api/runs/{trace.id}/label"
    r = HTTP.put(url, json={"step": 1, "mode": "a.2", "reason": "multiplied the wrong numbers"})
    assert r.status_code == 200 and r.json()["label"]["agent"] == "solver" and r.json()["label"]["mode"] == "A.2"
    assert HTTP.get(f"{live.url}/api/runs/{trace.id}").json()["gold"]["step"] == 1

    bad = HTTP.put(url, json={"step": 7})
    assert bad.status_code == 422 and "no step 7" in bad.json()["detail"]
    assert HTTP.put(url, json={"step": 1, "mode": "Q.9"}).status_code == 422
    assert HTTP.put(url, json={"step": "one"}).status_code == 422
    assert store.get_trace(trace.id).gold.step == 1  # refused labels change nothing

    assert HTTP.delete(url).json() == {"trace_id": trace.id, "label": None}
    assert store.get_trace(trace.id).gold is None
    assert HTTP.put(f"{live.url}/api/runs/no-such-run/label", json={"step": 0}).status_code == 404


def test_runs_are_filtered_by_label(live, store):
    labelled, other = _trace(outcome=Outcome(success=False)), _trace(outcome=Outcome(success=False))
    store.save_traces([labelled, other])
    HTTP.put(f"{live.url}/api/runs/{labelled.id}/label", json={"step": 1})
    rows = HTTP.get(f"{live.url}/api/runs", params={"labelled": "true"}).json()
    assert [(r["id"], r["labelled"]) for r in rows] == [(labelled.id, True)]
    assert [r["id"] for r in HTTP.get(f"{live.url}/api/runs", params={"labelled": "false"}).json()] == [other.id]
    page = HTTP.get(f"{live.url}/", params={"labelled": "yes"}).text
    assert labelled.id in page and other.id not in page and ">labelled</span>" in page
    assert HTTP.get(f"{live.url}/", params={"labelled": "maybe"}).status_code == 400
