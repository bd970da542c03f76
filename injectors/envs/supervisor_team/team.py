"""The LangGraph team of `supervisor_team`, built once per process and pointed at each run's endpoint and catalogue.

Building it (three `ChatOpenAI`s, two `create_react_agent` workers,
`create_supervisor`, `compile`) costs about a fifth of a run, and nothing in
it belongs to one run: the compiled graph keeps no state between invocations
(no checkpointer). So the graph is cached per (model, prompts), its HTTP
clients send to the endpoint of the run in progress and its tools read that
run's catalogue (`bound`). Runs in a process take turns (a lock), as the
injection pipeline runs them anyway.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ..framework import BASE_URL
from .world import WORKERS, calculate, lookup

TOOLS = {
    "researcher": {"lookup_price": "The unit price of an item of the store's catalogue.",
                   "lookup_shipping": "The shipping cost per unit of an item of the store's catalogue."},
    "calculator": {"calculate": "The value of an arithmetic expression (numbers and + - * / and parentheses)."},
}


class _Current:
    """The run in progress in this process: its endpoint (an `InProcessEndpoint`) and its task's catalogue."""

    endpoint: Any = None
    catalogue: dict[str, dict[str, str]] = {}


_RUN = _Current()
_LOCK = threading.Lock()
_GRAPHS: dict[tuple[str, tuple[str, ...]], Any] = {}


def _handle(request: Any) -> Any:
    return _RUN.endpoint.handle(request)


def lookup_price(item: str) -> str:
    return lookup(_RUN.catalogue, item, "price")


def lookup_shipping(item: str) -> str:
    return lookup(_RUN.catalogue, item, "shipping")


def calculate_tool(expression: str) -> str:
    return calculate(expression)


_FUNCTIONS = {"lookup_price": lookup_price, "lookup_shipping": lookup_shipping, "calculate": calculate_tool}


def graph(model: str, prompts: dict[str, str]) -> Any:
    """The compiled supervisor graph for `model` and the agents' system prompts (cached)."""
    key = (model, tuple(prompts[a] for a in ("supervisor", *WORKERS)))
    if key in _GRAPHS:
        return _GRAPHS[key]
    import httpx
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent
    from langgraph_supervisor import create_handoff_tool, create_supervisor

    def chat(agent: str) -> Any:
        return ChatOpenAI(model=model, api_key="faultlens-sim", base_url=BASE_URL.format(agent=agent), temperature=0,  # type: ignore[arg-type]
                          max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(_handle)))

    workers = [create_react_agent(chat(w), name=w, prompt=prompts[w],
                                  tools=[StructuredTool.from_function(_FUNCTIONS[t], name=t, description=d) for t, d in TOOLS[w].items()])
               for w in WORKERS]
    # Our own handoff tools, in a fixed order: the default ones are made from a set of the agents' names, whose order
    # (and so the order of the supervisor's tools in its requests) changes with the process's hash seed.
    handoffs = [create_handoff_tool(agent_name=w) for w in WORKERS]
    compiled = create_supervisor(workers, model=chat("supervisor"), tools=handoffs, prompt=prompts["supervisor"],  # type: ignore[arg-type]
                                 supervisor_name="supervisor").compile()
    if len(_GRAPHS) > 16:  # lessons make new prompts; keep the cache small
        _GRAPHS.clear()
    _GRAPHS[key] = compiled
    return compiled


@contextlib.contextmanager
def bound(endpoint: Any, catalogue: dict[str, dict[str, str]]) -> Iterator[None]:
    """Within the block, the cached graphs' clients talk to `endpoint` and their tools read `catalogue`."""
    with _LOCK:
        _RUN.endpoint, _RUN.catalogue = endpoint, catalogue
        try:
            yield
        finally:
            _RUN.endpoint, _RUN.catalogue = None, {}
