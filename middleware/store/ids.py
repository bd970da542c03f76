"""The one form in which the store writes and looks up an id: `StoredId`, made only by `stored_id` (redacted once, here).

Run ids, span ids and agent names come from outside and may hold a secret (an
API key pasted into a conversation id); the store keeps them as `redact_id`
maps them, so that a look-up by the id a caller knows finds what was written.
Each public method of `sql.SQLStore` turns the ids it is given into StoredIds
at its door, with `stored_id`, and the row builders and statements behind it
take `StoredId` (mypy refuses a plain `str` there), so no method can map an id
on the write side and forget it on the look-up side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NewType

from .redact import redact_id

# A type for the checker only (mypy): at run time a plain `str`, so binding one to a
# statement costs what a string does (a `str` subclass doubles what sqlite3 spends per value).
StoredId = NewType("StoredId", str)


def stored_id(raw: str) -> StoredId:
    """`raw` as the store keeps it: unchanged, or `redacted-<hash>` if it holds a secret (`redact_id`).

    Idempotent: an id read back from the store maps to itself, so a row may come
    through here more than once.
    """
    return StoredId(redact_id(raw))


def stored_ids(values: Iterable[str]) -> list[StoredId]:
    return [StoredId(redact_id(v)) for v in values]


def optional_id(raw: str | None) -> StoredId | None:
    return None if raw is None else StoredId(redact_id(raw))
