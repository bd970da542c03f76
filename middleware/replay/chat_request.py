"""What of a client's chat request may reach the upstream: the OpenAI chat parameters, checked; routing and credential fields refused.

The gateway and the proxy hold the upstream's key and choose its address. A
client names only what the model should do (messages, tools, sampling), never
where the call goes, with which credentials, or how litellm behaves: litellm
reads fields such as `base_url`, `api_key` or `mock_response` from the same
keyword arguments, so a body passed through whole could send the gateway's key
to any address, multiply one call into many, or forge the model's reply.

- `check_chat_request(body)` raises `RequestRefused` (HTTP 400, naming the field)
  for a refused field, a value of the wrong shape, a lone surrogate (text that
  cannot be stored or sent as UTF-8) or nesting deeper than `MAX_DEPTH`.
- `forwarded(body)` is the part of a checked body that goes upstream: the
  allow-listed fields as sent, nothing else.
- `check_agent_name(name)` refuses an agent name that could change the
  provider or the path of a model named with `{agent}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError, model_validator

from ..errors import FaultlensError

__all__ = ["FORWARDED", "MAX_DEPTH", "REFUSED", "RequestRefused", "check_agent_name", "agent_model", "check_chat_request", "forwarded", "safe_message", "upstream_arguments"]

MAX_DEPTH = 64

# The OpenAI chat-completion parameters a client may set (`model` and `stream` are read by the gateway itself).
FORWARDED = frozenset({
    "model", "messages", "tools", "tool_choice", "temperature", "top_p", "max_tokens", "max_completion_tokens",
    "stop", "n", "seed", "response_format", "stream", "stream_options", "user", "logprobs", "top_logprobs",
    "presence_penalty", "frequency_penalty", "parallel_tool_calls", "metadata", "logit_bias", "functions",
    "function_call", "reasoning_effort", "modalities", "audio", "prediction", "store", "service_tier",
    "verbosity", "web_search_options",
})

# Fields that choose where a call goes, with which credentials, or how litellm itself behaves.
REFUSED = frozenset({
    "base_url", "api_base", "api_key", "api_version", "api_type", "organization", "custom_llm_provider",
    "extra_headers", "headers", "extra_body", "extra_query", "mock_response", "mock_tool_calls", "mock_timeout",
    "num_retries", "max_retries", "timeout", "request_timeout", "fallbacks", "context_window_fallbacks",
    "model_list", "deployment_id", "client", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
    "aws_region_name", "aws_profile_name", "vertex_project", "vertex_location", "vertex_credentials",
    "azure_ad_token", "azure_ad_token_provider", "litellm_logging_obj", "litellm_call_id", "litellm_metadata",
    "input_cost_per_token", "output_cost_per_token", "caching", "cache", "proxy_server_request", "callbacks",
    "success_callback", "failure_callback", "logger_fn", "acompletion", "drop_params", "additional_drop_params",
})

_AGENT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class RequestRefused(FaultlensError, ValueError):
    """A chat request the gateway will not forward; `field` names the part at fault (answered with 400)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class _Function(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: str


class _ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    type: str = "function"
    function: _Function


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None

    @model_validator(mode="after")
    def _text_part_has_text(self) -> _Part:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs 'text'")
        return self


class _Message(BaseModel):
    """One chat message, as OpenAI's API defines it per role (litellm fails on other shapes before reaching the upstream)."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[_Part] | None = None
    name: str | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None
    function_call: _Function | None = None

    @model_validator(mode="after")
    def _fields_of_its_role(self) -> _Message:
        if self.role in ("system", "developer", "user") and self.content is None:
            raise ValueError(f"content: a {self.role} message needs content")
        if self.role != "assistant" and (self.tool_calls is not None or self.function_call is not None):
            raise ValueError("tool_calls: only an assistant message makes tool calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("tool_call_id: a tool message needs the id of the call it answers")
        if self.role == "function" and not self.name:
            raise ValueError("name: a function message needs the function's name")
        return self


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: StrictBool | None = None


class _ChatParams(BaseModel):
    """The shapes of the forwarded fields (values are forwarded as sent; this only checks them)."""

    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[_Message]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    n: int | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    stream: StrictBool | None = None
    stream_options: _StreamOptions | None = None
    user: str | None = None
    logprobs: StrictBool | None = None
    top_logprobs: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    parallel_tool_calls: StrictBool | None = None
    metadata: dict[str, Any] | None = None
    logit_bias: dict[str, float] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    reasoning_effort: str | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    store: StrictBool | None = None
    service_tier: str | None = None
    verbosity: str | None = None
    web_search_options: dict[str, Any] | None = None


def _walk(value: Any, path: str, depth: int) -> None:
    # One pass over the body: nesting depth and lone surrogates (json.loads accepts "\ud800";
    # nothing downstream can encode it, so it would fail only later, in the store or the upstream).
    if depth > MAX_DEPTH:
        raise RequestRefused(path or "body", f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestRefused(path or "body", "holds a lone surrogate (\\ud800-\\udfff): not valid Unicode text") from None
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(key, path or "body", depth + 1)
            _walk(item, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", depth + 1)


def _field_path(body: Any, loc: tuple[Any, ...], first_error_type: str) -> str:
    # pydantic's location also names union members ("str", "list[str]"); keep the parts that are in the body.
    out, here = "", body
    for part in loc:
        if isinstance(here, dict) and part in here:
            out += f".{part}" if out else str(part)
        elif isinstance(here, list) and isinstance(part, int) and 0 <= part < len(here):
            out += f"[{part}]"
        elif isinstance(here, dict) and isinstance(part, str) and first_error_type == "missing":
            return f"{out}.{part}" if out else part
        else:
            break
        here = here[part]
    return out or "body"


def check_chat_request(body: Any) -> dict[str, Any]:
    """`body` if it is a chat request the gateway may forward; else `RequestRefused` naming the field."""
    if not isinstance(body, dict):
        raise RequestRefused("body", "a chat request must be a JSON object")
    refused = sorted(key for key in body if key in REFUSED)
    if refused:
        raise RequestRefused(refused[0], "routing, credential and retry fields are the gateway's to set, not a client's; "
                                         "remove it from the request (configure the upstream with the gateway's options)")
    _walk(body, "", 0)
    try:
        _ChatParams.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        # Only fields the gateway forwards are checked, so the first error names one of them.
        raise RequestRefused(_field_path(body, tuple(first["loc"]), first["type"]), first["msg"]) from None
    return body


def forwarded(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a checked request that go upstream: the allow-listed ones, as sent."""
    return {key: value for key, value in body.items() if key in FORWARDED}


def upstream_arguments(request: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments a checked request gives the upstream's litellm call: the allow-listed fields, less
    the model (the gateway's to choose, per agent) and streaming (asked for by the method called)."""
    return {k: v for k, v in forwarded(request).items() if k not in ("model", "stream", "stream_options")}


def agent_model(model: str, agent: str) -> str:
    """`model` with `{agent}` replaced by the calling agent's name, which may not pick a provider or add a path
    (`check_agent_name`: RequestRefused)."""
    return model.replace("{agent}", check_agent_name(agent)) if "{agent}" in model else model


def dropped_fields(body: Mapping[str, Any]) -> list[str]:
    """The fields of a request that are neither forwarded nor refused (unknown to the gateway: left out)."""
    return sorted(key for key in body if key not in FORWARDED)


_TRACEBACK = re.compile(r"Traceback \(most recent call last\).*", re.DOTALL)
_SOURCE_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.-]+)+\.pyc?\b(?:\", line \d+)?")


def safe_message(message: str) -> str:
    """An exception's message as a client may see it: its first line, no traceback, no source paths."""
    # An exception raised inside litellm (not by the provider) may carry a traceback and this
    # machine's file paths; the client gets the first line of its message, without paths.
    lines = _TRACEBACK.sub("", message).strip().splitlines()
    return _SOURCE_PATH.sub("<source>", lines[0])[:500] if lines else ""


def check_agent_name(name: str) -> str:
    """`name` if it may name an agent (letters, digits, `_`, `.`, `-`): substituted into a model name
    (`--upstream '{agent}'`), anything else could pick another provider (`ollama/x`) or add a path."""
    if not _AGENT_NAME.match(name):
        raise RequestRefused("agent", f"agent name {name[:80]!r} may hold only letters, digits, '_', '.' and '-' (at most 128)")
    return name
