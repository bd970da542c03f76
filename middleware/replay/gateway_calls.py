"""A run the gateway recorded, as a replay `Recording`: its model calls in order, each request and the reply it got.

The live gateway records each call as a step (`metadata.input_messages` in the
GenAI convention, `metadata.request` the call's other parameters,
`metadata.output_messages` the reply). A re-run of the program compares each
new request with the recorded one at the same position; both sides are put in
one comparable form by `request_key`: the messages in the GenAI convention
(so a tool call's arguments compare as JSON, not as bytes), without any
lessons block the gateway added, with the sampling parameters but not the
transport ones (`stream`, `stream_options`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..capture.instrument.chat_messages import openai_to_genai
from ..model.trace import Step, Trace
from .session import CallRecord, Recording

__all__ = ["LESSONS_BEGIN", "LESSONS_END", "TRANSPORT", "call_steps", "completion_of", "recording_of", "request_key", "request_of"]

# The gateway's marks around the lessons it adds to a system message (`capture.live_gateway` uses the same).
LESSONS_BEGIN = "<faultlens-lessons>"
LESSONS_END = "</faultlens-lessons>"
_BLOCK = re.compile(r"\n*" + re.escape(LESSONS_BEGIN) + r".*?" + re.escape(LESSONS_END), re.S)
# Request fields of transport only: a streamed and a plain request ask the same.
TRANSPORT = ("stream", "stream_options")


def call_steps(trace: Trace) -> list[int]:
    """The indices of the steps that are model calls the gateway recorded, in order (call i is `call_steps(trace)[i]`)."""
    return [step.index for step in trace.steps if _is_call(step)]


def _is_call(step: Step) -> bool:
    meta = step.metadata if isinstance(step.metadata, dict) else {}
    return isinstance(meta.get("input_messages"), list) and isinstance(meta.get("request"), dict)


def _without_lessons(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        parts = []
        for part in message.get("parts") or []:
            if part.get("type") == "text" and LESSONS_BEGIN in str(part.get("content", "")):
                text = _BLOCK.sub("", str(part["content"]))
                if not text.strip():
                    continue  # a part (or a whole message) the gateway added for the block alone
                part = {**part, "content": text}
            parts.append(dict(part))
        if parts or not message.get("parts"):
            out.append({**message, "parts": parts})
    return out


def request_key(messages: Any, params: Mapping[str, Any], *, genai: bool = False) -> dict[str, Any]:
    """The comparable form of a chat request: GenAI messages without lessons, and its non-transport parameters.

    `messages` are OpenAI chat messages, or GenAI ones with `genai=True` (as a step records them).
    """
    converted = list(messages or []) if genai else openai_to_genai(messages)
    return {"messages": _without_lessons(converted),
            "params": {k: v for k, v in sorted(params.items()) if k not in TRANSPORT and k != "messages"}}


def completion_of(step: Step) -> dict[str, Any]:
    """The chat completion a recorded call step answered with (its reply's text and tool calls, usage, finish reason)."""
    meta = step.metadata if isinstance(step.metadata, dict) else {}
    finish = list(meta.get("finish_reasons") or [])
    choices = []
    for i, output in enumerate(meta.get("output_messages") or []):
        texts, calls = [], []
        for part in output.get("parts") or []:
            if part.get("type") == "tool_call":
                arguments = part.get("arguments")
                calls.append({"id": part.get("id"), "type": "function", "function": {
                    "name": part.get("name"), "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)}})
            elif part.get("type") == "text":
                texts.append(str(part.get("content", "")))
        message: dict[str, Any] = {"role": output.get("role") or "assistant", "content": "".join(texts) if texts else None}
        if calls:
            message["tool_calls"] = calls
        choices.append({"index": i, "message": message,
                        "finish_reason": finish[i] if i < len(finish) else ("tool_calls" if calls else "stop")})
    completion: dict[str, Any] = {"id": f"chatcmpl-replay-{step.span_id or step.index}", "object": "chat.completion",
                                  "created": 0, "model": step.model or "replay", "choices": choices}
    if step.usage is not None:
        completion["usage"] = {"prompt_tokens": step.usage.input_tokens, "completion_tokens": step.usage.output_tokens,
                               "total_tokens": step.usage.input_tokens + step.usage.output_tokens}
    return completion


def request_of(step: Step) -> dict[str, Any]:
    """The chat request (OpenAI's shape) a recorded call step asked, rebuilt from its GenAI messages and parameters,
    without the lessons block the gateway added: what the program sends at this call when its prefix replays
    exactly, as the gateway stored it (a value redacted on the way in stays redacted)."""
    meta = step.metadata if isinstance(step.metadata, dict) else {}
    messages = [_openai_message(m) for m in _without_lessons(meta.get("input_messages") or [])]
    return {**(meta.get("request") or {}), "messages": messages}


def _openai_message(message: Mapping[str, Any]) -> dict[str, Any]:
    role, parts = message.get("role") or "user", list(message.get("parts") or [])
    if role == "tool":
        part = parts[0] if parts else {}
        response = part.get("response")
        return {"role": "tool", "tool_call_id": part.get("id"),
                "content": response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)}
    content: list[dict[str, Any]] = []
    calls = []
    for part in parts:
        if part.get("type") == "tool_call":
            arguments = part.get("arguments")
            calls.append({"id": part.get("id"), "type": "function", "function": {
                "name": part.get("name"), "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)}})
        elif part.get("type") == "uri":
            content.append({"type": "image_url", "image_url": {"url": part.get("uri")}})
        else:
            content.append({"type": "text", "text": str(part.get("content", ""))})
    out: dict[str, Any] = {"role": role, "content": _plain(content)}
    if message.get("name"):
        out["name"] = message["name"]
    if calls:
        out["tool_calls"] = calls
    return out


def _plain(content: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    """One text part as a string (as most programs send it; the two are recorded alike), else the parts."""
    if not content:
        return None
    if len(content) == 1 and content[0]["type"] == "text":
        return str(content[0]["text"])
    return content


def recording_of(trace: Trace) -> Recording:
    """The gateway's calls of `trace` as a `Recording` whose requests are `request_key`s (empty if none were recorded)."""
    calls = []
    for i, index in enumerate(call_steps(trace)):
        step = trace.steps[index]
        request = request_key(step.metadata["input_messages"], step.metadata["request"], genai=True)
        calls.append(CallRecord(i, "model", step.agent, request, completion_of(step), {"step": index}))
    return Recording(calls)
