"""The light core: tracing and `faultlens --help` import none of the optional dependencies; a missing one names its extra."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from faultlens.cli import COMMAND_HELP, COMMANDS, cli
from faultlens.middleware.errors import MissingExtra, extra_for, extra_needed

HEAVY = ("litellm", "sklearn", "fastapi", "psycopg", "matplotlib", "langgraph")

_PROBE = """
import json, sys
from faultlens.middleware import Tracer
from faultlens.cli import main
sys.argv = ["faultlens", "--help"]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_tracer_and_help_import_no_optional_dependency():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True)
    loaded = {name.split(".")[0] for name in json.loads(done.stderr.strip().splitlines()[-1])}
    assert "faultlens" in loaded and "opentelemetry" in loaded
    assert loaded & set(HEAVY) == set()
    for name in COMMANDS:
        assert name in done.stdout


def test_listed_help_is_each_commands_own():
    assert set(COMMAND_HELP) == set(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:
        assert cli.get_command(ctx, name).get_short_help_str(limit=1000) == COMMAND_HELP[name]


def test_a_missing_dependency_names_its_extra():
    assert extra_for("opentelemetry.proto.collector.trace") == "server"
    assert extra_for("faultlens.middleware") is None
    with pytest.raises(MissingExtra, match=r"pip install 'faultlens\[postgres\]'"):
        with extra_needed("a postgresql:// store"):
            raise ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
    with pytest.raises(ModuleNotFoundError):  # not an optional dependency: a bug, not an extra to install
        with extra_needed("x"):
            raise ModuleNotFoundError("No module named 'faultlens.nope'", name="faultlens.nope")
