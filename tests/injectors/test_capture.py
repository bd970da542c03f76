"""OpenInference capture: each captured run is a trace of its own, whatever an earlier run left in the process."""

from __future__ import annotations

from typing import Any

from opentelemetry import context, trace

from faultlens.injectors.capture import INSTRUMENTORS, OpenInferenceCapture


class NoInstrumentor:
    """Instruments nothing: the test makes the spans itself."""

    def instrument(self, **_: Any) -> None:
        pass


def test_a_run_is_its_own_trace_and_what_it_leaves_current_is_undone(monkeypatch):
    monkeypatch.setitem(INSTRUMENTORS, "fake", (f"{__name__}:NoInstrumentor",))
    capture = OpenInferenceCapture("fake")
    tracer = capture.provider.get_tracer("test")
    # What Agno's instrumentation leaves after a Team run: its span, still current in this thread.
    left_over = tracer.start_span("team.run")
    token = context.attach(trace.set_span_in_context(left_over))
    try:
        with capture.run() as spans:
            with tracer.start_as_current_span("Solver.forward") as root, tracer.start_as_current_span("LM.__call__"):
                pass
            context.attach(trace.set_span_in_context(tracer.start_span("leaked")))
        assert trace.get_current_span() is left_over
    finally:
        context.detach(token)
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"Solver.forward", "LM.__call__"}
    assert by_name["Solver.forward"].parent is None
    assert by_name["LM.__call__"].parent.span_id == root.get_span_context().span_id
