"""OpenInference capture of Haystack runs: an instrumentor in the shape `injectors.capture` expects.

`openinference-instrumentation-haystack` wraps the `run` of every Haystack
component class registered when it instruments (and of those a pipeline runs
later). An `Agent` runs its chat generator, and its tools their components,
outside any pipeline, so their classes are traced only if they were
registered (imported) before: `instrument` imports the components the team
uses first, so a run's spans are the same whatever the process imported
before. The generator's span is the LLM span (the OpenAI instrumentation
would record each call twice).
"""

from __future__ import annotations

import importlib
from typing import Any

# The Haystack components a docs_team run uses (importing one registers its class).
COMPONENTS = ("haystack.components.agents", "haystack.components.generators.chat.openai",
              "haystack.components.retrievers.in_memory.bm25_retriever", "faultlens.injectors.envs.docs_team.components")


class HaystackInstrumentor:
    """`instrument(tracer_provider=...)`, like the OpenInference instrumentors of the other frameworks."""

    def instrument(self, tracer_provider: Any) -> None:
        try:
            from openinference.instrumentation.haystack import HaystackInstrumentor as OpenInference
            for module in COMPONENTS:
                importlib.import_module(module)
        except ImportError as exc:
            raise RuntimeError("capturing Haystack runs needs openinference-instrumentation-haystack: "
                               "pip install 'faultlens[frameworks]'") from exc
        OpenInference().instrument(tracer_provider=tracer_provider)

    def uninstrument(self) -> None:
        from openinference.instrumentation.haystack import HaystackInstrumentor as OpenInference

        OpenInference().uninstrument()
