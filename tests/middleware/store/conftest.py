import pytest

from faultlens.middleware import open_store


@pytest.fixture
def store(store_target):
    """The same suite on both backends: SQLite, then PostgreSQL (tests/conftest.py)."""
    s = open_store(store_target)
    yield s
    s.close()
