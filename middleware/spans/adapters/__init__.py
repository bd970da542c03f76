"""Framework adapters: what a framework's spans say beyond the conventions, behind one small interface.

The mapping core (`spans.mapping`, `spans.tree`) reads the conventions
(`spans.conventions`) and names no framework. What a framework does its own
way (an agent named by its span name, helper agents that speak for another,
a span that is a whole conversation, agents listed on a manager's span,
tool arguments or results in its own wrapping, spans that are its own
machinery and no step) is one module here exposing a
`SpanAdapter`, registered in the `faultlens.span_adapters` entry-point group:

    [project.entry-points."faultlens.span_adapters"]
    myframework = "mypackage.spans:ADAPTER"

Adding a framework is that module, its entry point and its test. The
adapters are loaded once per process (`hooks()`), in entry-point name order
(`clear_cache()` makes the next call read the entry points again).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from ...errors import ConfigError
from ...model.trace import AgentInfo
from ..record import SpanRecord

GROUP = "faultlens.span_adapters"

AgentNamer = Callable[[SpanRecord], str | None]


@dataclass(frozen=True)
class SpanAdapter:
    """One framework's hooks; each is optional, and answers only for spans of its framework."""

    name: str
    # Agents whose spans belong to the agent above them (the framework's own helpers).
    helper_agents: frozenset[str] = frozenset()
    # operation (`conventions.AGENT`, `CHAIN`, ...) -> (record -> the agent a span of that operation names
    # by its shape rather than an attribute, or None). Keyed by operation: the mapping asks only these.
    agent_names: Mapping[str, AgentNamer] = field(default_factory=dict)
    # record -> whether an agent span stands for a whole conversation (its output is another agent's).
    whole_conversation: Callable[[SpanRecord], bool] | None = None
    # record -> the agents a span lists (managed agents, team members), with what it says of them.
    listed_agents: Callable[[SpanRecord], list[AgentInfo]] | None = None
    # (arguments, declared parameters) -> a tool call's arguments out of the framework's own wrapping,
    # or the arguments unchanged when they are not in it.
    call_arguments: Callable[[Any, Any], Any] | None = None
    # result -> a tool's output out of the framework's own wrapping (its text), or the result unchanged.
    tool_result: Callable[[Any], Any] | None = None
    # record -> whether a span is the framework's own machinery (its event plumbing, a wrapper around
    # the model call another span records), so no step; asked of every span that could be one: keep it cheap.
    machinery: Callable[[SpanRecord], bool] | None = None


@dataclass(frozen=True)
class Hooks:
    """Every registered adapter's hooks, gathered: what the mapping calls."""

    helper_agents: frozenset[str]
    agent_names: Mapping[str, tuple[AgentNamer, ...]]  # by operation
    whole_conversation: tuple[Callable[[SpanRecord], bool], ...]
    listed_agents: tuple[Callable[[SpanRecord], list[AgentInfo]], ...]
    call_arguments: tuple[Callable[[Any, Any], Any], ...]
    tool_results: tuple[Callable[[Any], Any], ...]
    machinery: tuple[Callable[[SpanRecord], bool], ...]


@functools.cache
def adapters() -> tuple[SpanAdapter, ...]:
    """The registered adapters, in entry-point name order (loaded on first use, then cached)."""
    found = []
    for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name):
        adapter = ep.load()
        if not isinstance(adapter, SpanAdapter):
            raise ConfigError(f"entry point {ep.name!r} of {GROUP} ({ep.value}) is a {type(adapter).__name__}, not a SpanAdapter")
        found.append(adapter)
    if not found:
        # faultlens registers its own adapters: none means the install's metadata is stale.
        raise ConfigError(f"no span adapters in the {GROUP!r} entry-point group: reinstall faultlens (pip install -e .)")
    return tuple(found)


_gathered: Hooks | None = None


def hooks() -> Hooks:
    """The adapters' hooks, gathered once: each tuple holds only the adapters that have that hook.

    (A global rather than functools.cache: the mapping asks for them on every
    span, and the cache's call costs several times this one.)
    """
    return _gathered or _gather()


def clear_cache() -> None:
    """Forget the loaded adapters: the next `hooks()` reads the entry points again."""
    global _gathered
    _gathered = None
    adapters.cache_clear()


def _gather() -> Hooks:
    global _gathered
    loaded = adapters()
    _gathered = Hooks(
        helper_agents=frozenset().union(*(a.helper_agents for a in loaded)),
        agent_names={op: tuple(a.agent_names[op] for a in loaded if op in a.agent_names) for op in sorted({op for a in loaded for op in a.agent_names})},
        whole_conversation=tuple(a.whole_conversation for a in loaded if a.whole_conversation is not None),
        listed_agents=tuple(a.listed_agents for a in loaded if a.listed_agents is not None),
        call_arguments=tuple(a.call_arguments for a in loaded if a.call_arguments is not None),
        tool_results=tuple(a.tool_result for a in loaded if a.tool_result is not None),
        machinery=tuple(a.machinery for a in loaded if a.machinery is not None),
    )
    return _gathered
