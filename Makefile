# `make demo` and `make test` each set everything up from a fresh clone.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test test-postgres lint install install-dev phoenix frameworks2 bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# The base install: the library with every extra but the frameworks (`pip install
# faultlens` alone is the light core: the tracer, the store, the trace commands).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[all]"
	touch $@

# Tests also need pytest, the local model backend (llama-cpp-python has no
# Linux wheel; it compiles in ~5 minutes and only without native CPU flags) and
# the agent frameworks of the framework environments (pure-Python wheels).
# One resolve of everything (not on top of the base install): the frameworks extra caps OpenTelemetry
# (google-adk), and a base install resolved first leaves packages of a newer OpenTelemetry behind.
$(VENV)/.installed-dev: pyproject.toml | $(PY)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install -q --no-cache-dir -e ".[all,dev,local,frameworks,phoenix]"
	touch $(VENV)/.installed $@

# The Phoenix server the Phoenix tests start (tests/faultlens/phoenix/server.py finds it here).
# arize-phoenix needs openai>=3, which the frameworks extra excludes (ag2 0.14: openai<3),
# so it gets a venv of its own; our venv has only its REST client (the phoenix extra).
PHOENIX_VENV ?= .venv-phoenix
$(PHOENIX_VENV)/.installed:
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q "arize-phoenix==20.26.1"
	touch $@

# CrewAI, Semantic Kernel and CAMEL (the frameworks2 extra) pin pydantic and OpenTelemetry versions the frameworks
# extra excludes: they get a venv of their own. Their tests run there (marked frameworks2), and `faultlens bench
# build` builds their environments' shards with its python (benchmark/shard_elsewhere.py).
FRAMEWORKS2_VENV ?= .venv-frameworks2
$(FRAMEWORKS2_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(FRAMEWORKS2_VENV)
	$(FRAMEWORKS2_VENV)/bin/python -m pip install -q -e ".[all,dev,frameworks2]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
phoenix: $(PHOENIX_VENV)/.installed
frameworks2: $(FRAMEWORKS2_VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/faultlens demo

# The store's suite, the server tests and the scale-out test also run on
# PostgreSQL: tests/conftest.py starts a throwaway server (initdb + pg_ctl into
# a temporary folder, as the `postgres` user when run as root; torn down after)
# when PostgreSQL's server binaries are installed (apt-get install postgresql),
# and skips those cases when they are not.
PG_CTL := $(firstword $(wildcard /usr/lib/postgresql/*/bin/pg_ctl) $(shell command -v pg_ctl 2>/dev/null))

test: $(VENV)/.installed-dev $(PHOENIX_VENV)/.installed $(FRAMEWORKS2_VENV)/.installed
	@$(if $(PG_CTL),echo "PostgreSQL: $(PG_CTL) (the store tests run on SQLite and PostgreSQL)",echo "PostgreSQL not installed (apt-get install postgresql): its store tests are skipped")
	$(PY) -m pytest -q
	$(FRAMEWORKS2_VENV)/bin/python -m pytest -q -m frameworks2 tests/injectors/envs tests/middleware/spans/adapters

# Only the tests that run on PostgreSQL, and fail (not skip) without it.
test-postgres: $(VENV)/.installed-dev
	FAULTLENS_REQUIRE_POSTGRES=1 $(PY) -m pytest -q tests/middleware/store/test_store.py tests/faultlens tests/feedback/test_loop.py -m "not local_llm and not browser"
# ruff over the repository; mypy over the installed packages. mypy cannot follow
# setuptools' package-dir mapping, so it reads them through a tree of symlinks
# laid out as they install (faultlens/, faultlens/middleware, ...).
LINT_TREE := .lint/faultlens
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	rm -rf .lint && mkdir -p $(LINT_TREE)
	for f in faultlens/*; do ln -s "$(CURDIR)/$$f" $(LINT_TREE)/; done
	for d in middleware attributors injectors feedback benchmark; do ln -s "$(CURDIR)/$$d" $(LINT_TREE)/$$d; done
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(FRAMEWORKS2_VENV) .faultlens .lint
