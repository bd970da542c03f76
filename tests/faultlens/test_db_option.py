"""One `--db` option: every command that opens the store declares it the same way and
passes its text to `open_store` unchanged (a URL keeps its `//`)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from faultlens.cli import COMMANDS, cli


def _commands(group: click.Group, ctx: click.Context, prefix: str = ""):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, click.Context(command, parent=ctx), f"{prefix}{name} ")
        elif command is not None:
            yield f"{prefix}{name}", command


def test_every_db_option_is_the_shared_one():
    ctx = click.Context(cli)
    with_db = {}
    for name, command in _commands(cli, ctx):
        for param in command.params:
            if "--db" in getattr(param, "opts", []):
                with_db[name] = param
    expected = {"traces list", "traces show", "traces export", "traces import", "attribute", "inject", "serve",
                "lessons list", "lessons show", "lessons learn", "lessons for", "demo"}
    assert expected <= set(with_db), sorted(expected - set(with_db))
    for name, param in with_db.items():
        assert param.name == "db_path" and param.type is click.STRING and param.metavar == "PATH|URL", name
    assert set(COMMANDS) <= set(cli.list_commands(ctx))


@pytest.mark.parametrize("value", ["postgresql://user@127.0.0.1:5432/faultlens", "relative/dir/runs.db"])
def test_db_value_reaches_open_store_unchanged(monkeypatch, value):
    seen = []

    class Empty:
        def list_traces(self, **_):
            return []

    # the CLI imports the store when a command opens it (faultlens.cli.get_store)
    monkeypatch.setattr("faultlens.middleware.store.sqlite.open_store", lambda db: seen.append(db) or Empty())
    result = CliRunner().invoke(cli, ["traces", "list", "--db", value, "--json"])
    assert result.exit_code == 0, result.output
    assert seen == [value] and isinstance(seen[0], str)
