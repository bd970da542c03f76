# `make demo` and `make test` each set everything up from a fresh clone.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test install install-dev bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# The base install: everything the library, CLI and demo need.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

# Tests also need pytest, the local model backend (llama-cpp-python has no
# Linux wheel; it compiles in ~5 minutes and only without native CPU flags) and
# the agent frameworks of the framework environments (pure-Python wheels).
$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install -q --no-cache-dir -e ".[dev,local,frameworks]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(VENV)/bin/faultlens demo

test: $(VENV)/.installed-dev
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .faultlens
