"""Capture of Semantic Kernel runs (`--otlp`): an instrumentor in the shape `injectors.capture` expects.

There is no OpenInference instrumentor for Semantic Kernel. SK emits its own
OpenTelemetry spans under the GenAI conventions when its diagnostics are on
(`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS(_SENSITIVE)`, read
once per module into a settings object): `invoke_agent <name>` per agent turn
(`gen_ai.agent.name`, its input and output messages) and `execute_tool
<plugin>-<function>` per kernel function call (its arguments and result). Each
SK module made its tracer from the global provider at import, so `instrument`
points those tracers at the capture's provider and turns the agent and tool
diagnostics on, with content, for the capture only. The model calls are
`openinference-instrumentation-openai`'s LLM spans on the agents' `AsyncOpenAI`
clients (SK's own `chat` spans carry no content: SK logs it as events, so they
stay off). SK's runtime runs each agent turn in a task of its own message loop,
so the run's spans have a parent only under a span open around the whole run:
`tracer()` gives `env.program` the capture's tracer for that root span
(`invoke_workflow ledger_chat`, the question as its input) and the runtime its
provider (its own `create`/`publish`/`process` spans, machinery between them).
"""

from __future__ import annotations

import importlib
from typing import Any

# The SK modules whose module-level `tracer` makes the agent and tool spans, and the modules whose settings say
# whether they record content.
_TRACED = ("semantic_kernel.utils.telemetry.agent_diagnostics.decorators", "semantic_kernel.functions.kernel_function")
_SETTINGS = ("semantic_kernel.utils.telemetry.agent_diagnostics.decorators",
             "semantic_kernel.utils.telemetry.model_diagnostics.function_tracer")

_PROVIDER: list[Any] = []  # the capture's provider while instrumented


def provider() -> Any:
    """The capture's tracer provider while a capture is on, else None (the run then records no spans of its own)."""
    return _PROVIDER[0] if _PROVIDER else None


class SemanticKernelInstrumentor:
    """`instrument(tracer_provider=...)` / `uninstrument()`, like the OpenInference instrumentors of the others."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []
        self._openai: Any = None

    def instrument(self, tracer_provider: Any) -> None:
        try:
            from openinference.instrumentation.openai import OpenAIInstrumentor
        except ImportError as exc:
            raise RuntimeError("capturing semantic-kernel runs needs openinference-instrumentation-openai: "
                               "pip install 'faultlens[frameworks2]'") from exc
        for name in _TRACED:
            module = importlib.import_module(name)
            self._set(module, "tracer", tracer_provider.get_tracer(name))
        for name in _SETTINGS:
            settings = importlib.import_module(name).MODEL_DIAGNOSTICS_SETTINGS
            self._set(settings, "enable_otel_diagnostics", True)
            self._set(settings, "enable_otel_diagnostics_sensitive", True)
        self._openai = OpenAIInstrumentor()
        self._openai.instrument(tracer_provider=tracer_provider)
        _PROVIDER[:] = [tracer_provider]

    def _set(self, owner: Any, attribute: str, value: Any) -> None:
        self._saved.append((owner, attribute, getattr(owner, attribute)))
        setattr(owner, attribute, value)

    def uninstrument(self) -> None:
        for owner, attribute, value in reversed(self._saved):
            setattr(owner, attribute, value)
        self._saved = []
        if self._openai is not None:
            self._openai.uninstrument()
            self._openai = None
        _PROVIDER.clear()
