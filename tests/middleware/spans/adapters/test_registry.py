"""The adapter registry: the `faultlens.span_adapters` entry points, loaded once, gathered into the hooks the mapping calls."""

from importlib.metadata import EntryPoint

import pytest

from faultlens.middleware.errors import ConfigError
from faultlens.middleware.spans import adapters as registry
from faultlens.middleware.spans.adapters import SpanAdapter, adapters, hooks


def test_the_first_party_adapters_are_registered_in_name_order():
    assert [a.name for a in adapters()] == ["ag2", "autogen", "camel", "dspy", "haystack", "langgraph", "llama_index", "openai_agents", "smolagents"]


def test_loaded_once_and_cached():
    assert adapters() is adapters() and hooks() is hooks()


def test_hooks_hold_only_the_adapters_that_have_them():
    gathered = hooks()
    assert gathered.helper_agents == frozenset({"checking_agent", "speaker_selection_agent"})
    assert {op: len(namers) for op, namers in gathered.agent_names.items()} == {"chain": 5, "invoke_agent": 2, "chat": 2, "execute_tool": 1} and len(gathered.listed_agents) == 2
    assert len(gathered.whole_conversation) == 2 and len(gathered.call_arguments) == 1 and len(gathered.machinery) == 2 and len(gathered.tool_results) == 3


def _entry_points(monkeypatch, *values: str) -> None:
    found = [EntryPoint(name=f"ep{i}", value=value, group=registry.GROUP) for i, value in enumerate(values)]
    monkeypatch.setattr(registry, "entry_points", lambda group: found if group == registry.GROUP else [])
    registry.clear_cache()


@pytest.fixture
def fresh(monkeypatch):
    yield monkeypatch
    monkeypatch.undo()
    registry.clear_cache()


def test_a_new_framework_is_one_entry_point(fresh):
    _entry_points(fresh, "faultlens.middleware.spans.adapters.ag2:ADAPTER", "tests.middleware.spans.adapters.test_registry:EXTRA")
    assert [a.name for a in adapters()] == ["ag2", "extra"]
    assert hooks().helper_agents == frozenset({"checking_agent", "speaker_selection_agent", "router"})


EXTRA = SpanAdapter(name="extra", helper_agents=frozenset({"router"}))
NOT_AN_ADAPTER = {"name": "extra"}


def test_an_entry_point_that_is_no_adapter_is_named(fresh):
    _entry_points(fresh, "tests.middleware.spans.adapters.test_registry:NOT_AN_ADAPTER")
    with pytest.raises(ConfigError, match="entry point 'ep0' of faultlens.span_adapters .*is a dict, not a SpanAdapter"):
        adapters()


def test_no_adapter_at_all_is_a_stale_install(fresh):
    _entry_points(fresh)
    with pytest.raises(ConfigError, match="reinstall faultlens"):
        hooks()
