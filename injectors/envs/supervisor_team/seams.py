"""Where `supervisor_team` makes LangGraph-supervisor's random ids deterministic, without changing its code.

`langgraph_supervisor.handoff` gives each "Transferring back to supervisor"
message pair a `uuid.uuid4()` tool-call id, and that id is in every later
request of the supervisor: a fresh one per run would make a replayed request
differ from its recording (drift) and two processes answer differently. For
the length of one run, that module's `uuid` is a stand-in whose `uuid4()`
draws ids from the run's seed in order, so a run and its replay (in any
process) send the same bytes. Everything else of `uuid` is the real module.
"""

from __future__ import annotations

import contextlib
import hashlib
import types
import uuid
from collections.abc import Iterator


class SeededIds:
    """`uuid4()` ids drawn in order from a seed: the n-th id of a run is the same in every process."""

    def __init__(self, seed: str) -> None:
        self.seed, self.count = seed, 0

    def uuid4(self) -> uuid.UUID:
        self.count += 1
        digest = hashlib.sha256(f"{self.seed}:{self.count}".encode()).digest()
        return uuid.UUID(bytes=digest[:16], version=4)


@contextlib.contextmanager
def seeded_handoff_ids(seed: str) -> Iterator[SeededIds]:
    """Within the block, `langgraph_supervisor.handoff` draws its uuids from `seed` (restored afterwards)."""
    from langgraph_supervisor import handoff

    ids = SeededIds(seed)
    real = handoff.uuid
    handoff.uuid = types.SimpleNamespace(**{k: getattr(uuid, k) for k in dir(uuid) if not k.startswith("_")})  # type: ignore[assignment]
    handoff.uuid.uuid4 = ids.uuid4
    try:
        yield ids
    finally:
        handoff.uuid = real
