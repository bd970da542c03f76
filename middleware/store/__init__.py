"""The store, its front door: `from faultlens.middleware.store import Store, open_store`.

`Store` is the protocol every store implements (`protocol`); `open_store(target)`
opens a SQLite file or a PostgreSQL URL (`sqlite`, `postgres`). Inside: one SQL
store written once (`sql`, over a dialect each), how runs become rows (`rows`),
migrations, the job queue, the writer lock, and redaction (ids at one boundary:
`ids.StoredId`). Names load on first use, so importing this package opens no
database driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol import STORE_SCHEMA_VERSION, Store, TraceNotFound, TraceSummary
    from .sqlite import SQLiteStore, open_store

__all__ = ["STORE_SCHEMA_VERSION", "SQLiteStore", "Store", "TraceNotFound", "TraceSummary", "open_store"]

_WHERE = {"STORE_SCHEMA_VERSION": "protocol", "Store": "protocol", "TraceNotFound": "protocol", "TraceSummary": "protocol",
          "SQLiteStore": "sqlite", "open_store": "sqlite"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{_WHERE[name]}", __name__), name)
