"""An offline stand-in model for the demo: a litellm `CustomLLM` provider named `faultlens-demo`.

`faultlens-demo/<persona>` answers deterministically from the messages it is
given, so the demo runs with no key and no network while every model call
still goes through litellm (and is traced like a real one). The personas are
those of the demo team in `faultlens/demo/team.py`. It is a simulator, not a
model: it does only what its persona's rule says, including that team's
deliberate weakness (the researcher drops failed lookups without a word).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import Choices, GenericStreamingChunk, Message, ModelResponse, Usage

from faultlens.middleware.errors import UnknownName

PROVIDER = "faultlens-demo"


def _text(messages: list[dict[str, Any]], role: str | None = None) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages if role is None or m.get("role") == role)


def plan(messages: list[dict[str, Any]]) -> str:
    """planner: one `lookup: CITY` line per city named in the task (capitalised words after 'of'/'and')."""
    task = _text(messages, "user")
    cities = re.findall(r"(?:\bof|\band|,)\s+([A-Z][\w'-]+)", task)
    return "\n".join(f"lookup: {city}" for city in cities) or "lookup: (nothing to look up)"


def research(messages: list[dict[str, Any]]) -> str:
    """researcher: restate each successful lookup as a fact. Failed lookups are silently dropped."""
    facts = []
    for line in _text(messages, "user").splitlines():
        try:
            result = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(result, dict) and "population_thousands" in result:
            facts.append(f"{result['city']}: {result['population_thousands']} thousand people")
    return "Facts:\n" + "\n".join(facts) if facts else "Facts: none found"


def analyse(messages: list[dict[str, Any]]) -> str:
    """analyst: add up every 'N thousand' in the facts it was given."""
    numbers = [int(n) for n in re.findall(r"(\d+) thousand", _text(messages, "user"))]
    return f"The combined population is {sum(numbers)} thousand."


PERSONAS: dict[str, Callable[[list[dict[str, Any]]], str]] = {"planner": plan, "researcher": research, "analyst": analyse}


def _answer(model: str, messages: list[dict[str, Any]]) -> tuple[str, int, int]:
    persona = model.split("/", 1)[-1]
    if persona not in PERSONAS:
        raise UnknownName(f"{PROVIDER} has no persona {persona!r}; known: {', '.join(PERSONAS)}")
    reply = PERSONAS[persona](messages)
    # Word counts stand in for tokens; the simulator has no tokenizer.
    return reply, len(_text(messages).split()), len(reply.split())


def _announce(messages: list, kwargs: dict[str, Any]) -> None:
    # Built-in providers tell litellm's logging a request is about to go out;
    # doing the same lets pre-call callbacks (the faultlens tracer's) see it.
    logging_obj = kwargs.get("logging_obj")
    if logging_obj is not None:
        logging_obj.pre_call(input=messages, api_key="")


class SimLLM(CustomLLM):
    """litellm provider `faultlens-demo`: deterministic personas instead of a model."""

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        _announce(messages, kwargs)
        reply, prompt_tokens, completion_tokens = _answer(model, messages)
        return ModelResponse(
            model=model,
            choices=[Choices(index=0, finish_reason="stop", message=Message(role="assistant", content=reply))],
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens),
        )

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.completion(model, messages, *args, **kwargs)

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        _announce(messages, kwargs)
        reply, prompt_tokens, completion_tokens = _answer(model, messages)
        words = reply.split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            yield GenericStreamingChunk(
                text=word + ("" if last else " "),
                is_finished=last,
                finish_reason="stop" if last else None,  # type: ignore[typeddict-item]  # litellm's own chunks use None until the last
                index=0,
                tool_use=None,
                usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens} if last else None,
            )

    # litellm types astreaming as a coroutine but iterates what it returns: an async generator is what it needs.
    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> AsyncIterator[GenericStreamingChunk]:  # type: ignore[override]
        for chunk in self.streaming(model, messages, *args, **kwargs):
            yield chunk


def register() -> None:
    """Make `faultlens-demo/<persona>` models available to litellm (idempotent)."""
    providers = litellm.custom_provider_map or []
    if not any(entry.get("provider") == PROVIDER for entry in providers):
        litellm.custom_provider_map = [*providers, {"provider": PROVIDER, "custom_handler": SimLLM()}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
    # The simulator is free: register zero prices so litellm reports a cost of 0, not an unknown model.
    litellm.register_model(
        {f"{PROVIDER}/{p}": {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "cache_creation_input_token_cost": 0.0,
                "cache_read_input_token_cost": 0.0,
                "litellm_provider": PROVIDER,
                "mode": "chat",
            } for p in PERSONAS}
    )
