"""Chat messages in OpenAI's shape (litellm's, and LangChain's once converted) as GenAI-convention messages.

Shared by the litellm and LangGraph instrumentations; imports neither.
"""

from __future__ import annotations

import json
from typing import Any

from faultlens.middleware.spans.messages import maybe_json


def get_field(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a message part, which litellm gives as a dict or as an object."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = []
    for item in content if isinstance(content, list) else [content]:
        kind = get_field(item, "type")
        if kind == "text":
            parts.append({"type": "text", "content": get_field(item, "text", "")})
        elif kind == "image_url":
            url = get_field(item, "image_url")
            parts.append({"type": "uri", "modality": "image", "uri": get_field(url, "url", url) if not isinstance(url, str) else url})
        else:
            parts.append({"type": str(kind or "text"), "content": json.dumps(item, default=str) if not isinstance(item, str) else item})
    return parts


def tool_call_parts(tool_calls: Any) -> list[dict[str, Any]]:
    parts = []
    for call in tool_calls or []:
        fn = get_field(call, "function", {})
        parts.append({"type": "tool_call", "id": get_field(call, "id"), "name": get_field(fn, "name"), "arguments": maybe_json(get_field(fn, "arguments"))})
    return parts


def openai_to_genai(messages: Any) -> list[dict[str, Any]]:
    """OpenAI/litellm chat messages as GenAI-convention messages (role + typed parts, and the sender's `name` when
    given: a multi-agent framework tells its speakers apart by it, and a re-drawn call must ask what was asked)."""
    out = []
    for message in messages or []:
        role = get_field(message, "role", "user")
        if role == "tool":
            parts = [{"type": "tool_call_response", "id": get_field(message, "tool_call_id"), "response": get_field(message, "content")}]
        else:
            parts = content_parts(get_field(message, "content")) + tool_call_parts(get_field(message, "tool_calls"))
        converted: dict[str, Any] = {"role": role, "parts": parts}
        name = get_field(message, "name")
        if isinstance(name, str) and name:
            converted["name"] = name
        out.append(converted)
    return out
