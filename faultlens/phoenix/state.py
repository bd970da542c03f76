"""Where a `faultlens phoenix sync` stands, in a JSON file: the span cursor and each run's progress.

A sync saves it after every page of spans it stored and after every run it
annotated (written to a temporary file and renamed, so a crash leaves the old
or the new state, never half of one). A sync that stops (Phoenix went down,
Ctrl-C, a crash) starts the next from there: the spans after the cursor, the
runs not yet judged, attributed or annotated. What it re-does is idempotent
anyway (ingest by span id, the job queue by run, annotations by identifier).

A run's phases: ``open`` (its root span has not arrived), ``complete`` (root
seen, not judged yet), ``ok`` (not failed), ``failed`` (queued for
attribution), ``annotated`` (verdict written back), ``unattributed`` (the
attribution gave no step, or its job failed: nothing to write). A run that
gains a root span later (another trace of its session) is ``complete`` again,
and attributed anew if it had been.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultlens.middleware.errors import InputError

VERSION = 1
PHASES = ("open", "complete", "ok", "failed", "annotated", "unattributed")


@dataclass
class RunState:
    """One faultlens run (a Phoenix trace, or the traces of one session) as the sync sees it."""

    phase: str = "open"
    traces: list[str] = field(default_factory=list)  # Phoenix trace ids
    roots: dict[str, str] = field(default_factory=dict)  # root span id -> its status (ok / error / unset)
    why: str | None = None  # why it counts as failed
    annotations: list[str] = field(default_factory=list)  # ids Phoenix gave the annotations written
    again: bool = False  # a new trace joined the run (a session) after it was written back: attribute it anew


@dataclass
class SyncState:
    url: str
    project: str
    window: str = ""  # the --since/--until the cursor belongs to
    cursor: str | None = None  # next page's cursor (a span's global id; Phoenix pages from it, inclusive)
    last_span: str | None = None  # global id of the last span stored, when no next page was given
    spans: int = 0  # spans stored so far
    runs: dict[str, RunState] = field(default_factory=dict)
    path: Path | None = None

    # -- persistence ---------------------------------------------------------
    @classmethod
    def load(cls, path: Path, *, url: str, project: str, window: str = "") -> SyncState:
        """The state at `path`, or a fresh one. A file of another Phoenix, project or window is an error, not overwritten."""
        if not path.exists():
            return cls(url=url, project=project, window=window, path=path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("version") != VERSION:
                raise InputError(str(path), None, "version", f"sync state version {data.get('version')!r}; this faultlens reads {VERSION}")
            runs = {run_id: RunState(**run) for run_id, run in data.get("runs", {}).items()}
        except (json.JSONDecodeError, TypeError, AttributeError) as exc:
            raise InputError(str(path), None, None, f"not a faultlens phoenix sync state ({exc}); move it away to start over") from None
        for name, want in (("url", url), ("project", project), ("window", window)):
            if data.get(name) != want:
                raise InputError(str(path), None, name, f"the state is of {name} {data.get(name)!r}, not {want!r}; give another --state")
        return cls(url=url, project=project, window=window, cursor=data.get("cursor"), last_span=data.get("last_span"),
                   spans=int(data.get("spans", 0)), runs=runs, path=path)

    def save(self) -> None:
        if self.path is None:
            return
        data: dict[str, Any] = {"version": VERSION, "url": self.url, "project": self.project, "window": self.window,
                                "cursor": self.cursor, "last_span": self.last_span, "spans": self.spans,
                                "runs": {run_id: asdict(run) for run_id, run in self.runs.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    # -- queries -------------------------------------------------------------
    def run(self, run_id: str) -> RunState:
        return self.runs.setdefault(run_id, RunState())

    def in_phase(self, *phases: str) -> list[str]:
        return [run_id for run_id, run in self.runs.items() if run.phase in phases]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(PHASES, 0)
        for run in self.runs.values():
            counts[run.phase] += 1
        return counts


def default_state_path(store_location: str, url: str, project: str, window: str = "") -> Path:
    """Beside a SQLite store (or under .faultlens/ for a server store): one file per Phoenix, project and window."""
    digest = hashlib.sha1(f"{url}|{project}|{window}".encode()).hexdigest()[:10]
    location = Path(store_location)
    folder = location.parent if "://" not in store_location and store_location != ":memory:" else Path(".faultlens")
    return folder / f"phoenix-sync-{digest}.json"
