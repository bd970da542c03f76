"""OpenInference capture of PydanticAI runs: an instrumentor in the shape `injectors.capture` expects.

`openinference-instrumentation-pydantic-ai` ships no instrumentor but a span
processor (`OpenInferenceSpanProcessor`) that adds OpenInference attributes to
the OpenTelemetry spans PydanticAI itself emits once instrumented. So
`instrument` adds that processor to the capture's tracer provider and turns on
PydanticAI's own instrumentation for every agent, on that provider.
"""

from __future__ import annotations

from typing import Any


class PydanticAIInstrumentor:
    """`instrument(tracer_provider=...)`, like the OpenInference instrumentors of the other frameworks."""

    def instrument(self, tracer_provider: Any) -> None:
        try:
            from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor
            from pydantic_ai import Agent
            from pydantic_ai.models.instrumented import InstrumentationSettings
        except ImportError as exc:
            raise RuntimeError("capturing pydantic-ai runs needs openinference-instrumentation-pydantic-ai: "
                               "pip install 'faultlens[frameworks]'") from exc
        tracer_provider.add_span_processor(OpenInferenceSpanProcessor())
        # The chart images stay out of the spans (the trace's steps carry them as media).
        Agent.instrument_all(InstrumentationSettings(tracer_provider=tracer_provider, include_binary_content=False))
