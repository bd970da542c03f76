"""The one form in which the store writes and looks up an id: `StoredId`, made only by `stored_id` (redacted once, here).

Run ids, span ids and agent names come from outside and may hold a secret (an
API key pasted into a conversation id); the store keeps them as `redact_id`
maps them, so that a look-up by the id a caller knows finds what was written.
Every SQL statement of `sql.SQLStore` takes ids as `StoredId`, never as a plain
`str`, so no method can forget the mapping on one side and not the other.
"""

from __future__ import annotations

from collections.abc import Iterable

from .redact import redact_id


class StoredId(str):
    """An id as the store keeps it (a `str`: it is written and compared as one)."""

    __slots__ = ()


def stored_id(raw: str) -> StoredId:
    """`raw` as the store keeps it: unchanged, or `redacted-<hash>` if it holds a secret (`redact_id`).

    Idempotent: an id read back from the store maps to itself, so a row may come
    through here more than once.
    """
    if type(raw) is StoredId:
        return raw
    return StoredId(redact_id(raw))


def stored_ids(values: Iterable[str]) -> list[StoredId]:
    return [stored_id(v) for v in values]


def optional_id(raw: str | None) -> StoredId | None:
    return None if raw is None else stored_id(raw)
