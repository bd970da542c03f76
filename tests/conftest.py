import os

# litellm must never reach for the network to fetch its model price map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


import pytest


@pytest.fixture(autouse=True)
def _own_response_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own LLM response cache, so one test's answers never leak into another's."""
    monkeypatch.setenv("FAULTLENS_CACHE_DIR", str(tmp_path_factory.mktemp("llm-cache")))
