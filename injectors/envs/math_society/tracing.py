"""OpenInference capture of CAMEL role-playing runs: an instrumentor in the shape `injectors.capture` expects.

There is no OpenInference instrumentation for CAMEL. Its model calls go
through the OpenAI client each model backend holds, so
`openinference-instrumentation-openai` records each as an LLM span (with the
request's messages, CAMEL's role prompts included, and the reply). What
that leaves out is added here, in OpenInference's own conventions: the run
(a CHAIN span `RolePlaying` around `env.role_play`, whose input is the task,
so a run's spans are one trace) and each tool call CAMEL's `ChatAgent`
executes (a TOOL span `<tool>` with the arguments, the output and the
agent's role name). The LLM spans name no agent: the span adapter
`middleware.spans.adapters.camel` reads it from CAMEL's system prompt.
"""

from __future__ import annotations

import json
from typing import Any

from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes

from . import env as team


class CamelInstrumentor:
    """`instrument(tracer_provider=...)` / `uninstrument()`, like the OpenInference instrumentors of the others."""

    def __init__(self) -> None:
        self._undo: list[Any] = []

    def instrument(self, tracer_provider: Any) -> None:
        try:
            from camel.agents import ChatAgent
            from openinference.instrumentation.openai import OpenAIInstrumentor
        except ImportError as exc:
            raise RuntimeError("capturing CAMEL runs needs camel-ai and openinference-instrumentation-openai: "
                               "pip install 'faultlens[frameworks2]'") from exc
        openai = OpenAIInstrumentor()
        openai.instrument(tracer_provider=tracer_provider)
        tracer = tracer_provider.get_tracer(__name__)
        play, execute = team.role_play, ChatAgent._execute_tool

        def role_play(make: Any, task: str, *args: Any, **kwargs: Any) -> Any:
            attributes = {SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.CHAIN.value,
                          SpanAttributes.INPUT_VALUE: task}
            with tracer.start_as_current_span("RolePlaying", attributes=attributes):
                return play(make, task, *args, **kwargs)

        def execute_tool(agent: Any, request: Any) -> Any:
            attributes = {SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.TOOL.value,
                          SpanAttributes.TOOL_NAME: request.tool_name, SpanAttributes.AGENT_NAME: agent.role_name,
                          SpanAttributes.INPUT_VALUE: json.dumps(request.args, ensure_ascii=False),
                          SpanAttributes.INPUT_MIME_TYPE: "application/json"}
            with tracer.start_as_current_span(request.tool_name, attributes=attributes) as span:
                record = execute(agent, request)
                span.set_attribute(SpanAttributes.OUTPUT_VALUE, str(record.result))
                return record

        setattr(team, "role_play", role_play)
        setattr(ChatAgent, "_execute_tool", execute_tool)

        def undo() -> None:
            setattr(team, "role_play", play)
            setattr(ChatAgent, "_execute_tool", execute)
            openai.uninstrument()

        self._undo.append(undo)

    def uninstrument(self) -> None:
        while self._undo:
            self._undo.pop()()
