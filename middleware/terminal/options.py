"""Command-line options every `faultlens` command shares, declared once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = "The store: a SQLite file, or a URL `open_store` accepts [default: $FAULTLENS_DB or .faultlens/faultlens.db]."


def db_option(help: str = DB_HELP) -> Callable[[F], F]:
    """`--db PATH|URL` as the parameter `db_path`: the text as given (never a `Path`, which would
    fold a URL's `//`), or None; pass it to `open_store` unchanged."""
    return click.option("--db", "db_path", type=str, default=None, metavar="PATH|URL", help=help)


def db_label(db_path: str | None) -> str:
    """The store a `--db` value names, for messages (a URL without its password)."""
    from ..store.protocol import default_db, describe  # not on import: `faultlens --help` needs no store

    return describe(db_path if db_path is not None else default_db())
