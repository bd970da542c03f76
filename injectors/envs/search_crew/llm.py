"""CrewAI's native OpenAI LLM on the run's in-process endpoint (imported only where CrewAI is installed).

CrewAI 1.x routes a model to its native OpenAI class (`OpenAICompletion`,
`custom_openai=True` for an OpenAI-compatible base URL) or to litellm. The
native class builds its own `OpenAI` and `AsyncOpenAI` clients from its
`client_params`; one `http_client` there cannot serve both (the async client
refuses an `httpx.Client`), and its only HTTP hook, `interceptor`, rewrites
requests that still go out through a real transport. So this subclass gives
each client the endpoint's `httpx` client on a `MockTransport`; everything
else (the request CrewAI builds, its tool calling, its parsing of the reply)
is CrewAI's own. The litellm route (`client=`) was not taken: litellm does
not know the simulated model, so CrewAI would fall back to its text ReAct
loop instead of the native tool calling a current model gets.
"""

from __future__ import annotations

from typing import Any

from crewai.llms.providers.openai.completion import OpenAICompletion
from openai import AsyncOpenAI, OpenAI
from pydantic import Field


class InProcessOpenAI(OpenAICompletion):
    """`OpenAICompletion` whose OpenAI clients send to `endpoint` (an `InProcessEndpoint`): no socket."""

    endpoint: Any = Field(default=None, exclude=True)

    def _build_sync_client(self) -> Any:
        return OpenAI(**self._get_client_params(), http_client=self.endpoint.client())

    def _build_async_client(self) -> Any:
        return AsyncOpenAI(**self._get_client_params(), http_client=self.endpoint.async_client())
