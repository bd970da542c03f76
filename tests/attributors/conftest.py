"""Fixtures for the attributor tests: hand-made traces and a scripted litellm test double."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import litellm
import pytest
from litellm import CustomLLM
from litellm.utils import custom_llm_setup

from faultlens.middleware.model.trace import AgentInfo, Outcome, Step, StepKind, Task, Trace

Script = Callable[[list[dict[str, Any]], dict[str, Any]], Any]


class ScriptedLLM(CustomLLM):
    """TEST DOUBLE for a litellm provider: answers from a script, counts and records calls.

    The script gets (messages, optional_params) and returns the reply text, or
    an exception instance to raise (e.g. litellm.RateLimitError).
    """

    def __init__(self, script: Script, prompt_tokens: int = 100, completion_tokens: int = 20):
        super().__init__()
        self.script = script
        self.calls: list[dict[str, Any]] = []
        self.prompt_tokens, self.completion_tokens = prompt_tokens, completion_tokens

    def _answer(self, model: str, messages: list, optional_params: dict):
        self.calls.append({"model": model, "messages": messages, "params": dict(optional_params)})
        out = self.script(messages, optional_params)
        if isinstance(out, BaseException):
            raise out
        return litellm.ModelResponse(
            model=model,
            choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": out}}],
            usage={"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                   "total_tokens": self.prompt_tokens + self.completion_tokens},
        )

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key,
                   logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None, headers={}, timeout=None,
                   client=None):  # noqa: B006
        return self._answer(model, messages, optional_params)

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding, api_key,
                          logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None, headers={},
                          timeout=None, client=None):  # noqa: B006
        return self._answer(model, messages, optional_params)


@pytest.fixture
def scripted():
    """Register a ScriptedLLM as litellm provider `scripted`; returns a function setting its script."""
    handlers: list[ScriptedLLM] = []

    def install(script: Script, **kwargs: Any) -> ScriptedLLM:
        handler = ScriptedLLM(script, **kwargs)
        handlers.append(handler)
        litellm.custom_provider_map = [e for e in litellm.custom_provider_map if e["provider"] != "scripted"] + [
            {"provider": "scripted", "custom_handler": handler}
        ]
        custom_llm_setup()
        return handler

    yield install
    litellm.custom_provider_map = [e for e in litellm.custom_provider_map if e["provider"] != "scripted"]


def user_text(messages: list[dict[str, Any]]) -> str:
    """All user text of a request (image parts skipped)."""
    out = []
    for m in messages:
        if m["role"] != "user":
            continue
        content = m["content"]
        if isinstance(content, list):
            out.extend(p["text"] for p in content if p.get("type") == "text")
        else:
            out.append(content)
    return "\n".join(out)


def shown_steps(messages: list[dict[str, Any]]) -> list[int]:
    return [int(n) for n in re.findall(r"^\[step (\d+)\]", user_text(messages), re.M)]


def answer(**fields: Any) -> str:
    return json.dumps(fields)


def team_trace(bad_step: int = 3, n_filler: int = 0, trace_id: str = "t-team") -> Trace:
    """A three-agent run where the searcher misspells the task's name at `bad_step` (if the step is the search call)."""
    steps = [
        Step(index=0, agent="planner", kind=StepKind.plan, content="Plan: look up Marta Voss's birth year, then compute her age in 2020."),
        Step(index=1, agent="planner", kind=StepKind.message, content="Searcher, find the birth year of Marta Voss."),
    ]
    for _ in range(n_filler):
        steps.append(Step(index=len(steps), agent="searcher", kind=StepKind.message, content="Reading the instructions carefully before searching. " * 3))
    steps += [
        Step(index=len(steps), agent="searcher", kind=StepKind.tool_call, tool_name="search", tool_arguments={"query": "Marla Voss birth year"}),
        Step(index=len(steps) + 1, agent="searcher", kind=StepKind.tool_result, tool_name="search", tool_result="Marla Voss (born 1971) is a painter."),
        Step(index=len(steps) + 2, agent="calculator", kind=StepKind.message, content="2020 - 1971 = 49"),
        Step(index=len(steps) + 3, agent="planner", kind=StepKind.final_answer, content="49"),
    ]
    return Trace(
        id=trace_id,
        task=Task(query="How old was Marta Voss in 2020?", reference_answer="52"),
        agents=[AgentInfo(name="planner", role="orchestrator"), AgentInfo(name="searcher"), AgentInfo(name="calculator")],
        steps=steps,
        outcome=Outcome(success=False, score=0.0, detail="expected 52"),
    )


@pytest.fixture
def trace() -> Trace:
    return team_trace()


def numbered_trace(n: int, marker_at: int, trace_id: str = "t-long", words: int = 5) -> Trace:
    """n steps of one agent; step `marker_at` contains the word WRONGSTEP."""
    steps = []
    for i in range(n):
        body = f"Step {i} work: " + " ".join(["routine"] * words)
        if i == marker_at:
            body = "WRONGSTEP the agent invents a value here. " + body
        steps.append(Step(index=i, agent=f"agent{i % 2}", kind=StepKind.message, content=body))
    return Trace(id=trace_id, task=Task(query="Find the value."), steps=steps, outcome=Outcome(success=False))
