import os

# litellm must never reach for the network to fetch its model price map.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


import pytest


@pytest.fixture(autouse=True)
def _own_response_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own LLM response cache, so one test's answers never leak into another's."""
    monkeypatch.setenv("FAULTLENS_CACHE_DIR", str(tmp_path_factory.mktemp("llm-cache")))


# -- PostgreSQL: one throwaway server per test session (tests/postgres.py) ------------------
# Found when its binaries are installed (Debian: apt-get install postgresql); else the
# PostgreSQL cases skip, unless FAULTLENS_REQUIRE_POSTGRES=1 (CI), where they fail.
# FAULTLENS_TEST_POSTGRES_URL=postgresql://... uses a server you run instead.


@pytest.fixture(scope="session")
def postgres_server():
    from tests.postgres import ThrowawayPostgres, find_bin_dir

    external = os.environ.get("FAULTLENS_TEST_POSTGRES_URL")
    if external:
        yield _External(external)
        return
    if find_bin_dir() is None:
        if os.environ.get("FAULTLENS_REQUIRE_POSTGRES") == "1":
            pytest.fail("FAULTLENS_REQUIRE_POSTGRES=1 but no PostgreSQL server binaries (apt-get install postgresql)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); its store tests are skipped")
    server = ThrowawayPostgres().start()
    try:
        yield server
    finally:
        server.stop()


class _External:
    def __init__(self, url: str):
        self._url = url

    def url(self) -> str:
        return self._url

    def fresh_schema_url(self) -> str:
        import uuid

        import psycopg

        schema = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self._url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in self._url else "?"
        return f"{self._url}{sep}options=-csearch_path%3D{schema}"

    fresh_database_url = fresh_schema_url


@pytest.fixture
def pg_url(postgres_server) -> str:
    """A postgresql:// URL whose tables start empty (a fresh schema on the session's server)."""
    return postgres_server.fresh_schema_url()


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request, tmp_path) -> str:
    """What `open_store` opens, once per backend: a SQLite file, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return request.getfixturevalue("pg_url")
