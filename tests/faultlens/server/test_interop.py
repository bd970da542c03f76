"""Attributions exported back over OTLP as gen_ai.evaluation.result events on the blamed span."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from faultlens.middleware.model.trace import Attribution, Outcome, Step, Task, Trace
from faultlens.server import EVENT_NAME, EvaluationExporter, create_app, otlp_http_exporter

from .conftest import HTTP, blame_tool_step, run_team, sdk_provider, wait_for

BLAMED_SPAN = "1f" * 8


def _stored_run() -> Trace:
    return Trace(
        id="ab" * 16,  # a run keyed by its OpenTelemetry trace id
        task=Task(query="17 * 23"),
        steps=[Step(index=0, agent="planner", span_id="0e" * 8), Step(index=1, agent="solver", kind="tool_call", tool_name="calc", span_id=BLAMED_SPAN)],
        outcome=Outcome(success=False),
    )


def test_event_on_a_child_of_the_blamed_span():
    memory = InMemorySpanExporter()
    exporter = EvaluationExporter(memory)
    trace = _stored_run()
    attribution = Attribution(trace_id=trace.id, method="heuristic", agent="solver", step=1, mode="A.2", reason="wrong operand", confidence=0.75)
    assert exporter.export(trace, attribution)
    (span,) = memory.get_finished_spans()
    assert format(span.context.trace_id, "032x") == trace.id
    assert format(span.parent.span_id, "016x") == BLAMED_SPAN
    (event,) = span.events
    assert event.name == EVENT_NAME == "gen_ai.evaluation.result"
    assert event.attributes["gen_ai.evaluation.name"] == "faultlens.heuristic"
    assert event.attributes["gen_ai.evaluation.score.label"] == "A.2"
    assert event.attributes["gen_ai.evaluation.score.value"] == 0.75
    assert event.attributes["gen_ai.evaluation.explanation"] == "wrong operand"
    assert event.attributes["faultlens.attribution.agent"] == "solver"
    assert event.attributes["faultlens.attribution.step"] == 1


def test_no_span_to_hang_it_on():
    memory = InMemorySpanExporter()
    exporter = EvaluationExporter(memory)
    trace = _stored_run()
    trace.steps[1].span_id = None
    assert not exporter.export(trace, Attribution(trace_id=trace.id, method="m", step=1))
    assert not exporter.export(trace, Attribution(trace_id=trace.id, method="m", step=None))
    assert memory.get_finished_spans() == ()


def test_server_exports_each_new_attribution_over_otlp_to_another_receiver(store, serve, tmp_path):
    # The receiver is a second faultlens server: a real OTLP/HTTP endpoint.
    from faultlens.middleware.store import open_store

    receiver_store = open_store(tmp_path / "receiver.db")
    receiver = serve(create_app(receiver_store))
    memory = InMemorySpanExporter()
    server = serve(
        create_app(store, on_failure=blame_tool_step(store), evaluation_exporter=EvaluationExporter(otlp_http_exporter(receiver.url + "/v1/traces")))
    )
    also = serve(create_app(store, on_failure=blame_tool_step(store), evaluation_exporter=EvaluationExporter(memory)))

    ids = run_team(sdk_provider(server.url + "/v1/traces"), fail=True)  # root span ERROR → failed → attributed → exported
    wait_for(lambda: receiver_store.has_trace(ids["trace_id"]))
    # The evaluation span arrived under the run's own OpenTelemetry trace id.
    assert receiver_store.has_trace(ids["trace_id"])

    ids2 = run_team(sdk_provider(also.url + "/v1/traces"), fail=True)
    spans = wait_for(lambda: memory.get_finished_spans())
    assert format(spans[0].context.trace_id, "032x") == ids2["trace_id"]
    assert format(spans[0].parent.span_id, "016x") == ids2["steps"]["tool"]
    assert spans[0].events[0].attributes["faultlens.attribution.method"] == "test-double"
    assert HTTP.get(f"{also.url}/api/runs/{ids2['trace_id']}/attribution").json()["job"]["state"] == "done"
