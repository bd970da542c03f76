"""Messages and values out of span attributes: GenAI `gen_ai.*.messages`, OpenInference `llm.*_messages.N.*`, OpenLLMetry `gen_ai.prompt.N.*`, `input.value`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import FieldError
from .conventions import INPUT_MESSAGES, OI_INPUT_MESSAGES, OI_INPUT_VALUE, OI_OUTPUT_MESSAGES, OPENLLMETRY_COMPLETION, OPENLLMETRY_PROMPT, OUTPUT_MESSAGES
from .record import SpanRecord


def maybe_json(value: Any) -> Any:
    """Parse a JSON string when it is one; anything else comes back unchanged."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("null", "true", "false") or re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text or "x"):
            # json.loads(text), without its whitespace scans: `text` has none at either end.
            try:
                parsed, end = _JSON_DECODER.raw_decode(text)
            except json.JSONDecodeError:
                return value
            return parsed if end == len(text) else value
    return value


_JSON_DECODER = json.JSONDecoder()


def json_attr(attrs: Mapping[str, Any], name: str) -> Any:
    """Attribute `name` read as JSON when it is a string; FieldError naming it when that is not JSON."""
    value = attrs.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise FieldError(name, f"not valid JSON ({exc.msg} at column {exc.colno})") from None


def flattened(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Rebuild a list of nested dicts from OpenInference/OpenLLMetry-style keys `prefix.N.a.b`."""
    items: dict[int, dict[str, Any]] = {}
    keys = [k for k in attrs if k.startswith(prefix + ".")]
    if not keys:
        return []
    pattern = re.compile(re.escape(prefix) + r"\.(\d+)\.(.+)$")
    for key in keys:
        value = attrs[key]
        m = pattern.match(key)
        if not m:
            continue
        node = items.setdefault(int(m.group(1)), {})
        *path, last = m.group(2).split(".")
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):  # `a.0.message` and `a.0.message.role` both given
                raise FieldError(key, f"{key} clashes with another attribute that gives {prefix}.{m.group(1)}.{part} a plain value")
        if isinstance(node.get(last), dict):
            raise FieldError(key, f"{key} clashes with attributes nested under it")
        node[last] = value
    return [items[i] for i in sorted(items)]


def _listify(node: Any) -> list[Any]:
    """{'0': {...}, '1': {...}} (from flattened keys) → [{...}, {...}]."""
    if isinstance(node, dict) and node and all(k.isdigit() for k in node):
        return [node[k] for k in sorted(node, key=int)]
    return node if isinstance(node, list) else []


def _openinference_messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference `llm.input_messages.N.message.*` as GenAI-convention messages (role + parts)."""
    messages = []
    for item in flattened(attrs, prefix):
        msg = item.get("message", item)
        parts: list[dict[str, Any]] = []
        if msg.get("content") is not None:
            parts.append({"type": "text", "content": str(msg["content"])})
        for content in _listify(msg.get("contents")):
            c = content.get("message_content", content)
            if c.get("text") is not None:
                parts.append({"type": "text", "content": str(c["text"])})
            elif c.get("image") is not None:
                parts.append({"type": "uri", "modality": "image", "uri": str(c["image"].get("image", {}).get("url", ""))})
        for call in _listify(msg.get("tool_calls")):
            call = call.get("tool_call", call)
            fn = call.get("function", {})
            parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"), "arguments": maybe_json(fn.get("arguments"))})
        messages.append({"role": msg.get("role", "user"), "parts": parts})
    return messages


def _openllmetry_messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenLLMetry `gen_ai.prompt.N.role/content` and `gen_ai.completion.N.*` as messages."""
    return [{"role": m.get("role", "user"), "parts": [{"type": "text", "content": str(m["content"])}] if m.get("content") is not None else []} for m in flattened(attrs, prefix)]


_FLATTENED_MESSAGE_PREFIXES = tuple(prefix + "." for prefix in (OI_INPUT_MESSAGES, OI_OUTPUT_MESSAGES, OPENLLMETRY_PROMPT, OPENLLMETRY_COMPLETION))


def messages_of(record: SpanRecord, direction: str, *, flattened: bool | None = None) -> list[Any] | None:
    """The span's input or output messages, or None if it records none.

    flattened: whether the span has flattened message keys (`has_flattened_messages`), if the caller knows.
    """
    attrs = record.attributes
    name = INPUT_MESSAGES if direction == "input" else OUTPUT_MESSAGES
    if name in attrs:
        value = json_attr(attrs, name)
        messages = value if isinstance(value, list) else [value]
        _check_messages(messages, name)
        return messages
    if not (has_flattened_messages(attrs) if flattened is None else flattened):
        return None
    oi = _openinference_messages(attrs, OI_INPUT_MESSAGES if direction == "input" else OI_OUTPUT_MESSAGES)
    if oi:
        return oi
    legacy = _openllmetry_messages(attrs, OPENLLMETRY_PROMPT if direction == "input" else OPENLLMETRY_COMPLETION)
    return legacy or None


def has_flattened_messages(attrs: Mapping[str, Any]) -> bool:
    """Whether any OpenInference/OpenLLMetry flattened message keys exist: one pass (most GenAI spans have none)."""
    return any(k.startswith(_FLATTENED_MESSAGE_PREFIXES) for k in attrs)


def _check_messages(messages: list[Any], name: str) -> None:
    """The shape `message_text` reads: each message a string or an object whose parts/tool_calls are lists of objects."""
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        for key in ("parts", "tool_calls"):
            items = message.get(key)
            if items is not None and not isinstance(items, list):
                raise FieldError(name, f"message {i}: {key} must be a list, not {type(items).__name__}")
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict) or not isinstance(call.get("function", {}), dict):
                raise FieldError(name, f"message {i}: each tool call must be an object with a 'function' object")


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return json.dumps(part, ensure_ascii=False, default=str)
    kind = part.get("type", "text")
    if kind == "text":
        return str(part.get("content", part.get("text", "")))
    if kind == "tool_call":
        args = part.get("arguments")
        if args is None:
            return f"[tool_call] {part.get('name')}()"
        args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
        return f"[tool_call] {part.get('name')}({args})"
    if kind == "tool_call_response":
        response = part.get("response")
        return f"[tool_result] {response if isinstance(response, str) else json.dumps(response, ensure_ascii=False, default=str)}"
    if kind in ("uri", "blob", "image_url"):
        return f"[{part.get('modality', kind)}]"
    return str(part.get("content", part.get("text", "")))


def message_text(message: Any) -> str:
    """The readable text of one message in any of the common shapes (GenAI parts, OpenAI content)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, dict):
        return json.dumps(message, ensure_ascii=False, default=str)
    pieces: list[str] = []
    if "parts" in message:
        pieces = [_part_text(p) for p in message.get("parts") or []]
    else:
        content = message.get("content")
        if isinstance(content, list):
            pieces = [_part_text(p) for p in content]
        elif content is not None:
            pieces = [str(content)]
        for call in message.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            pieces.append(_part_text({"type": "tool_call", "name": fn.get("name"), "arguments": fn.get("arguments")}))
    return "\n".join(p for p in pieces if p)


def messages_text(messages: list[Any] | None) -> str:
    """The readable text of messages, one per line."""
    return "\n".join(t for t in (message_text(m) for m in messages or []) if t)



def first_user_text(record: SpanRecord) -> str | None:
    """The first user message a span was given (its input messages, else its `input.value`)."""
    for message in messages_of(record, "input") or []:
        if not isinstance(message, dict) or message.get("role", "user") == "user":
            return message_text(message) or None
    value = record.attributes.get(OI_INPUT_VALUE)
    return input_value_text(value) if value is not None else None


# Keys under which instrumentations put the request in a JSON `input.value`
# (the adapters' docstrings say which of them a framework uses).
_INPUT_KEYS = ("task", "message", "query", "question", "input", "prompt", "content")


def input_value_text(value: Any) -> str | None:
    """The request an `input.value` holds: plain text, or the text under a known key / in the first user message."""
    parsed = maybe_json(value)
    if isinstance(parsed, str):
        return parsed.strip() or None
    if isinstance(parsed, dict):
        if parsed.get("role") is not None and parsed.get("content") is not None:
            return message_text(parsed) or None
        for key in _INPUT_KEYS:
            found = parsed.get(key)
            if isinstance(found, str) and found.strip():
                return found.strip()
            if isinstance(found, (dict, list)) and (text := input_value_text(json.dumps(found))):
                return text
        return None
    if isinstance(parsed, list):
        for item in parsed:
            if isinstance(item, dict) and item.get("role", "user") == "user":
                return message_text(item) or None
            if isinstance(item, str):
                return item
    return None

