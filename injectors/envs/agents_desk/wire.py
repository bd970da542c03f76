"""How a step's text and an OpenAI chat completion with `tool_calls` map onto each other (`agents_desk`).

A step of `agents_desk` is one model reply, written as text in the
environments' action form: a tool call (a function tool or an SDK handoff
`transfer_to_<agent>`) is `render_action(tool, <JSON arguments>, thought)`,
where the thought is the message's `content`; a reply with no tool call is
its content (the team's structured output is JSON). `completion` turns such
text into the chat completion the OpenAI Agents SDK reads, and `text_of`
turns a completion back into the text, so an injected step's text is exactly
what the SDK is answered with and what the rebuilt trace shows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from faultlens.middleware.replay.session import canonical

from ..base import parse_action, render_action
from ..framework import message_text


def render_call(tool: str, arguments: dict[str, Any], thought: str = "") -> str:
    return render_action(tool, json.dumps(arguments, ensure_ascii=False), thought)


def completion(request: dict[str, Any], text: str) -> dict[str, Any]:
    """The chat completion that answers `request` with the reply `text` (deterministic ids and token counts)."""
    digest = hashlib.sha256(canonical(request).encode()).hexdigest()
    action = parse_action(text)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if action is not None:
        message = {"role": "assistant", "content": action.thought or None,
                   "tool_calls": [{"id": f"call_{digest[:20]}", "type": "function",
                                   "function": {"name": action.tool, "arguments": action.argument}}]}
    prompt = sum(len(message_text(m.get("content"))) for m in request.get("messages") or []) // 4
    used = len(text) // 4
    return {"id": f"chatcmpl-{digest[:24]}", "object": "chat.completion", "created": 0,
            "model": str(request.get("model", "")),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if action else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": used, "total_tokens": prompt + used}}


def tool_call_of(response: dict[str, Any]) -> dict[str, Any] | None:
    """The (first) tool call of a recorded completion, or None."""
    calls = (response.get("choices") or [{}])[0].get("message", {}).get("tool_calls") or []
    return calls[0] if calls else None


def text_of(response: dict[str, Any]) -> str:
    """A recorded completion as step text (the inverse of `completion`)."""
    message = (response.get("choices") or [{}])[0].get("message") or {}
    content = message_text(message.get("content"))
    call = tool_call_of(response)
    if call is None:
        return content
    fn = call.get("function") or {}
    return render_action(str(fn.get("name")), str(fn.get("arguments") or ""), content)


@dataclass
class Call:
    """One tool call in an agent's chat history, with its result (None: not run yet)."""

    tool: str
    arguments: str  # as sent (JSON text)
    thought: str  # the content of the message that made the call
    result: str | None
    position: int  # the index of that message in the history
    # How a failed call's result begins (a team's tools and framework word their errors their own way).
    errors: ClassVar[tuple[str, ...]] = ("error", "not verified")

    @property
    def args(self) -> dict[str, Any]:
        """The arguments when they are a JSON object, else {}."""
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def ok(self) -> bool:
        """Whether it ran without an error."""
        return self.result is not None and not self.result.startswith(self.errors)


C = TypeVar("C", bound=Call)


def history(messages: list[dict[str, Any]], call: type[C]) -> list[C]:
    """The tool calls of a chat history, in order, each with its result, as `call` (`Call` or a subclass of it)."""
    results = {m.get("tool_call_id"): message_text(m.get("content")) for m in messages if m.get("role") == "tool"}
    calls = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            calls.append(call(str(fn.get("name")), str(fn.get("arguments") or ""), message_text(m.get("content")),
                              results.get(tc.get("id")), i))
    return calls
