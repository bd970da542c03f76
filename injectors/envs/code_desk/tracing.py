"""OpenInference capture of Strands Agents runs: an instrumentor in the shape `injectors.capture` expects.

Strands emits its own OpenTelemetry GenAI spans (`invoke_agent <name>`,
`execute_event_loop_cycle`, `chat`, `execute_tool <tool>`) from one tracer
that reads the global tracer provider when Strands first makes it.
`openinference-instrumentation-strands-agents` ships no instrumentor but a
span processor (`StrandsAgentsToOpenInferenceProcessor`) that adds
OpenInference attributes to those spans. So `instrument` adds that
processor to the capture's tracer provider and points Strands' tracer at
that provider.
"""

from __future__ import annotations

from typing import Any


class StrandsInstrumentor:
    """`instrument(tracer_provider=...)`, like the OpenInference instrumentors of the other frameworks."""

    def instrument(self, tracer_provider: Any) -> None:
        try:
            from openinference.instrumentation.strands_agents import StrandsAgentsToOpenInferenceProcessor
            from strands.telemetry.tracer import get_tracer
        except ImportError as exc:
            raise RuntimeError("capturing strands-agents runs needs openinference-instrumentation-strands-agents: "
                               "pip install 'faultlens[frameworks]'") from exc
        tracer_provider.add_span_processor(StrandsAgentsToOpenInferenceProcessor())
        tracer = get_tracer()  # Strands' one tracer, made on first use from the global provider
        tracer.tracer_provider = tracer_provider
        tracer.tracer = tracer_provider.get_tracer(tracer.service_name)
