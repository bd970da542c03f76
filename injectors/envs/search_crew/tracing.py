"""OpenInference's CrewAI instrumentation in its event-listener mode, as the instrumentor `capture` starts.

By default `openinference-instrumentation-crewai` wraps `Crew.kickoff`,
`Task._execute_core` and the tools: a worker a manager delegates to runs
inside the manager's delegation tool with no span of its own, so an imported
run would know one agent only. With `use_event_listener=True` it builds its
spans from CrewAI's event bus instead: an AGENT span per agent execution
(named `<role>.<task>.execute`, delegated ones included), its LLM calls and
its tool calls under it. That mode makes its own LLM spans, so the OpenAI
client's instrumentation is not added.
"""

from __future__ import annotations

from typing import Any


class CrewAIInstrumentor:
    """`instrument(tracer_provider=...)` / `uninstrument()` of OpenInference's CrewAI instrumentor, event-listener mode."""

    def __init__(self) -> None:
        from openinference.instrumentation.crewai import CrewAIInstrumentor as OpenInferenceCrewAI

        self.inner = OpenInferenceCrewAI()

    def instrument(self, **kwargs: Any) -> None:
        self.inner.instrument(use_event_listener=True, **kwargs)

    def uninstrument(self) -> None:
        self.inner.uninstrument()
