"""`SpanTreeStore` lists only store methods that both stores implement, with the signatures they have."""

import inspect

import pytest

from faultlens.middleware.ingest.tree_store import SpanTreeStore
from faultlens.middleware.store import Store

METHODS = [name for name in vars(SpanTreeStore) if not name.startswith("_")]


def test_it_lists_what_ingest_calls():
    assert sorted(METHODS) == sorted(["batch", "get_outcome", "begin_trace", "add_steps", "delete_step", "save_span_links", "span_links",
                                      "first_agent_spans", "steps_waiting_on", "set_step_agents", "set_run_agents", "fill_run_query"])


@pytest.mark.parametrize("name", METHODS)
def test_the_store_protocol_declares_each_with_the_same_parameters(name):
    assert list(inspect.signature(getattr(Store, name)).parameters) == list(inspect.signature(getattr(SpanTreeStore, name)).parameters)


def test_both_stores_implement_it():
    from faultlens.middleware.store.postgres import PostgresStore
    from faultlens.middleware.store import SQLiteStore

    for store in (SQLiteStore, PostgresStore):
        for name in METHODS:
            assert list(inspect.signature(getattr(store, name)).parameters) == list(inspect.signature(getattr(SpanTreeStore, name)).parameters), (store, name)
