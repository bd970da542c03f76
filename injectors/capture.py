"""A framework environment's runs as the framework's own OpenInference spans, in OTLP JSON.

The environments on real agent frameworks (`Environment.framework`) record
their runs through `replay.Session` like every environment; this module also
captures what the framework's OpenInference instrumentation package emits
during a run (for AG2: `openinference-instrumentation-ag2`'s AGENT spans
plus `openinference-instrumentation-openai`'s LLM spans), encodes it as an
OTLP ExportTraceServiceRequest in JSON, and writes it where
`faultlens traces import otlp:FILE` (`middleware.otlp.convert`) reads it back. So the
import path is exercised on genuine instrumentation output, not on spans we
wrote ourselves.

Instrumentation patches the framework's classes for the whole process, so
there is one capture per framework and process (`capture_for`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["INSTRUMENTORS", "OpenInferenceCapture", "capture_for"]

# Per framework, the OpenInference instrumentors ("module:Class") that together cover its runs.
INSTRUMENTORS: dict[str, tuple[str, ...]] = {
    "ag2": ("openinference.instrumentation.ag2:AG2Instrumentor", "openinference.instrumentation.openai:OpenAIInstrumentor"),
    "smolagents": ("openinference.instrumentation.smolagents:SmolagentsInstrumentor",),
    # Replaces the SDK's own trace exporter (exclusive processor), so nothing is sent to OpenAI.
    "openai-agents": ("openinference.instrumentation.openai_agents:OpenAIAgentsInstrumentor",),
    "autogen": ("openinference.instrumentation.autogen_agentchat:AutogenAgentChatInstrumentor",),
    # LangGraph runs on LangChain's callbacks: one instrumentor covers the graph's nodes, the chat models and the tools.
    "langgraph": ("openinference.instrumentation.langchain:LangChainInstrumentor",),
    # OpenInference's span processor over PydanticAI's own spans, wrapped as an instrumentor (chart_desk.tracing).
    "pydantic-ai": ("faultlens.injectors.envs.chart_desk.tracing:PydanticAIInstrumentor",),
    "google-adk": ("openinference.instrumentation.google_adk:GoogleADKInstrumentor",),
    "llama-index": ("openinference.instrumentation.llama_index:LlamaIndexInstrumentor",),
    # Haystack's instrumentation, with the team's components registered first (docs_team.tracing).
    "haystack": ("faultlens.injectors.envs.docs_team.tracing:HaystackInstrumentor",),
    # Agno's Team and Agent runs (AGENT spans named after them), model calls and tools, delegations included.
    "agno": ("openinference.instrumentation.agno:AgnoInstrumentor",),
    # DSPy's modules, predictors, LM calls and tools (the LM spans are DSPy's own; litellm is not instrumented).
    "dspy": ("openinference.instrumentation.dspy:DSPyInstrumentor",),
    # OpenInference's span processor over Strands' own GenAI spans, wrapped as an instrumentor (code_desk.tracing).
    "strands-agents": ("faultlens.injectors.envs.code_desk.tracing:StrandsInstrumentor",),
    # Semantic Kernel's own agent and tool spans, and OpenInference's OpenAI spans of its clients (ledger_chat.tracing).
    "semantic-kernel": ("faultlens.injectors.envs.ledger_chat.tracing:SemanticKernelInstrumentor",),
    # No CAMEL instrumentation exists: openinference-instrumentation-openai's LLM spans on the client each model backend
    # holds, plus the run's and the tools' spans in its conventions (math_society.tracing); the adapter names the agents.
    "camel": ("faultlens.injectors.envs.math_society.tracing:CamelInstrumentor",),
    # OpenInference over CrewAI's event bus: an AGENT span per agent execution, delegated ones included (search_crew.tracing).
    "crewai": ("faultlens.injectors.envs.search_crew.tracing:CrewAIInstrumentor",),
}


class OpenInferenceCapture:
    """The spans a framework's OpenInference instrumentation emits, kept in memory per run."""

    def __init__(self, framework: str) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        if framework not in INSTRUMENTORS:
            raise KeyError(f"no OpenInference instrumentation known for framework {framework!r}; known: {', '.join(INSTRUMENTORS)}")
        self.framework = framework
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": framework}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.instrumentors: list[Any] = []
        for spec in INSTRUMENTORS[framework]:
            module, name = spec.split(":")
            try:
                instrumentor = getattr(importlib.import_module(module), name)
            except ImportError as exc:
                raise RuntimeError(f"capturing {framework} runs needs {module.replace('.', '-')}: "
                                   "pip install 'faultlens[frameworks]'") from exc
            self.instrumentors.append(instrumentor())
            self.instrumentors[-1].instrument(tracer_provider=self.provider)

    def close(self) -> None:
        """Stop instrumenting: another framework's instrumentation would otherwise wrap this one's calls in spans of
        its own, in the same process (Agno's around DSPy's). A wrapper that only routes its framework's own spans
        (PydanticAI's, Strands') has nothing to undo."""
        for instrumentor in self.instrumentors:
            undo = getattr(instrumentor, "uninstrument", None)
            if callable(undo):
                undo()
        self.instrumentors = []

    @contextmanager
    def run(self) -> Iterator[list[Any]]:
        """Capture one run: the list it yields holds the run's finished spans once the block ends.

        The run starts from an empty OpenTelemetry context, so its outermost span is the root of its own trace
        whatever span an earlier run left current in this thread (Agno's instrumentation leaves its Team's span
        attached after `Team.run`: it detaches its tokens out of order); a parent outside the file would hide the
        root that states the run's task. The caller's context is restored afterwards, leaks of the run included."""
        from opentelemetry import context

        self.exporter.clear()
        spans: list[Any] = []
        token = context.attach(context.Context())
        try:
            yield spans
        finally:
            context.detach(token)
            self.provider.force_flush()
            spans.extend(self.exporter.get_finished_spans())
            self.exporter.clear()

    @staticmethod
    def otlp(spans: list[Any]) -> dict[str, Any]:
        """`spans` as an OTLP ExportTraceServiceRequest in JSON (protobuf's JSON mapping)."""
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        return MessageToDict(encode_spans(spans))

    def write(self, spans: list[Any], path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.otlp(spans)) + "\n", encoding="utf-8")
        return path


_CAPTURES: dict[str, OpenInferenceCapture] = {}


def capture_for(framework: str) -> OpenInferenceCapture:
    """The process's capture for `framework` (instrumenting it on first use); one framework is instrumented at a
    time, so the capture of another one (earlier in the same process) is closed first."""
    for other in [name for name in _CAPTURES if name != framework]:
        _CAPTURES.pop(other).close()
    if framework not in _CAPTURES:
        _CAPTURES[framework] = OpenInferenceCapture(framework)
    return _CAPTURES[framework]
