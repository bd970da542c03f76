"""Errors of a chosen mode for `faultlens proxy --mode inject`: rewrite one recorded chat completion.

The proxy (`faultlens.middleware.replay.endpoint`) replays a user's recorded run up to
call *t*; at *t* it asks `chat_error(mode)` for the response. The rewrite
takes the recorded completion of call *t* and changes its message the way a
mistake of that mode looks (the same generators as the bundled environments:
a changed number, a swapped name, a wrong tool argument, ...), so the framework
receives an ordinary-looking answer that is wrong in one known way. A tool
call is rewritten through its text form `Action: <tool>` + arguments.

When no rule of the mode applies to that message, `NoErrorForMode` is raised:
the caller picks another call or mode; the proxy never silently serves the
original answer as if it were an injected one.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import StepKind
from faultlens.middleware.replay.session import CallRecord, Override

from .envs.base import parse_action, render_action
from .generators import GenInput, Generator, PrefixItem, TemplateGenerator
from .applicability import get_mode

__all__ = ["NoErrorForMode", "chat_error"]


class NoErrorForMode(FaultlensError):
    """No rule of the mode can rewrite the recorded message at the chosen call."""


def _text(content: Any) -> str:
    if isinstance(content, list):  # list-of-parts content (smolagents and others send it)
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _prefix(messages: list[dict[str, Any]]) -> list[PrefixItem]:
    return [PrefixItem(str(m.get("name") or m.get("role", "")), str(m.get("role", "")), _text(m.get("content")))
            for m in messages if isinstance(m, dict)]


def _tool_names(request: dict[str, Any]) -> list[str]:
    return sorted(str((t.get("function") or {}).get("name", "")) for t in request.get("tools") or [] if isinstance(t, dict))


def chat_error(mode: str, seed: int = 0, generator: Generator | None = None,
               distractors: list[list[str]] | None = None) -> Override:
    """An override that answers call *t* with the recorded completion rewritten into an error of `mode`.

    What was injected (call index, agent, mode, reason) is appended to the
    override's `injected` list: the gold label of the run that follows.
    `distractors` are groups of interchangeable values of the user's domain
    (e.g. `[["Rome", "Paris", "Munich"]]`): modes that swap an entity (R.1,
    A.2, ...) swap one for another of its group.
    """
    get_mode(mode)  # an unknown mode is an error now, not at call t
    generator = generator or TemplateGenerator()

    def override(record: CallRecord) -> dict[str, Any]:
        if not isinstance(record.response, dict) or not record.response.get("choices"):
            raise NoErrorForMode(f"call {record.index} has no recorded completion to rewrite")
        response = copy.deepcopy(record.response)
        message = response["choices"][0].get("message") or {}
        request = record.request if isinstance(record.request, dict) else {}
        calls = message.get("tool_calls") or []
        if calls:
            function = calls[0].get("function") or {}
            text, kind = render_action(str(function.get("name", "")), str(function.get("arguments", ""))), StepKind.tool_call
        else:
            text, kind = _text(message.get("content")), StepKind.message
        inp = GenInput(mode=mode, kind=kind, agent=record.agent, text=text, prefix=_prefix(request.get("messages") or []),
                       rng=random.Random(f"{seed}:{record.index}:{mode}"), tools=_tool_names(request),
                       distractors=[list(group) for group in distractors or []])
        out = generator.generate(inp)
        if out is None:
            raise NoErrorForMode(f"no {mode} rule applies to call {record.index}'s message {text[:80]!r}; "
                                 "choose another call (--at) or mode (--error-mode)")
        if calls:
            action = parse_action(out.text)
            if action is None:
                raise NoErrorForMode(f"the {mode} rewrite of call {record.index} is no longer a tool call")
            calls[0]["function"] = {"name": action.tool, "arguments": action.argument}
        else:
            message["content"] = out.text
        # Kept beside the response, never in it: the framework (and any trace it
        # exports) must see an ordinary answer.
        injected.append({"index": record.index, "agent": record.agent, "mode": mode, "reason": out.reason})
        return response

    injected: list[dict[str, Any]] = []
    override.injected = injected  # type: ignore[attr-defined]
    return override
