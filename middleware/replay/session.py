"""Record every model and tool call of a run, and replay a recorded prefix exactly.

A `Session` sits between an agent program and the outside world. Every call the
program makes (a model call, a tool call) goes through `Session.call`, which
records the request and the response as a `CallRecord`. A `Recording` is the
ordered list of those records; it serialises to plain JSON.

Warm-start replay: `Session(recording, replay_until=t)` serves calls 0..t-1
from the recording without calling any model or tool, and checks that each
request the program makes now equals the request it made then. A mismatch is
*drift* (`Drift` is raised, and the caller drops the sample and counts it),
because a program that asks something different at a replayed step would be
given an answer to a question it did not ask. From call t on, control passes to
live execution; `overrides` replace the response of chosen calls (the injection
pipeline puts its generated error at call t this way).

The module is generic: it knows nothing of agents' prompts, environments or
failure modes, so any program (litellm agents, LangGraph nodes, plain Python)
can be recorded and replayed with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, FaultlensError

__all__ = ["CallRecord", "Drift", "Recording", "Session", "canonical"]

JSON = Any


def canonical(value: JSON) -> str:
    """A stable text form of a JSON value, used to compare requests exactly."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass
class CallRecord:
    """One call: what was asked (`request`) and what came back (`response`).

    `kind` is "model" or "tool"; `agent` is who made the call; `meta` holds
    annotations that are not part of the request (never compared on replay),
    e.g. `{"replayed": True}` or `{"overridden": True}`.
    """

    index: int
    kind: str
    agent: str
    request: JSON
    response: JSON
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "agent": self.agent,
            "request": self.request,
            "response": self.response,
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallRecord:
        return cls(
            index=int(data["index"]),
            kind=str(data["kind"]),
            agent=str(data["agent"]),
            request=data["request"],
            response=data["response"],
            meta=dict(data.get("meta") or {}),
        )


@dataclass
class Recording:
    """The ordered calls of one run."""

    calls: list[CallRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.calls)

    def __getitem__(self, index: int) -> CallRecord:
        return self.calls[index]

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.calls]

    @classmethod
    def from_json(cls, data: list[Mapping[str, Any]]) -> Recording:
        return cls([CallRecord.from_json(d) for d in data])

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str) -> Recording:
        return cls.from_json(json.loads(text))


class Drift(FaultlensError):
    """A replayed call asked something other than what the recording holds."""

    def __init__(self, index: int, kind: str, expected: JSON, actual: JSON, reason: str = "request differs"):
        self.index, self.kind, self.expected, self.actual = index, kind, expected, actual
        recorded, got = _where_they_differ(canonical(expected), canonical(actual))
        super().__init__(f"drift at call {index} ({kind}): {reason}; recorded {recorded} but got {got}")


def _where_they_differ(expected: str, actual: str, context: int = 60, limit: int = 160) -> tuple[str, str]:
    """Both texts from a little before their first difference (two long requests mostly share their start)."""
    same = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    start = max(0, same - context)

    def part(text: str) -> str:
        cut = text[start:start + limit]
        return ("..." if start else "") + cut + ("..." if start + limit < len(text) else "")

    return part(expected), part(actual)


Override = Callable[[CallRecord], JSON]


class Session:
    """Records calls, and replays the first `replay_until` calls of `recording`.

    - `Session()` records a live run.
    - `Session(recording, replay_until=t)` replays calls 0..t-1 (each request is
      checked against the recording; a difference raises `Drift`), then runs
      live. `replay_until=None` replays the whole recording and raises `Drift`
      if the program makes more calls than were recorded.
    - `overrides={t: fn}`: at call t, the response is `fn(record)` where
      `record` holds the request of this run and the *recorded* response (if
      any), instead of a live call.
    - `reuse_unchanged_from=u`: from call u on, a call whose caller and
      request equal the recording's call at the same index gets the recorded
      response instead of a live one. This is how a counterfactual rerun holds
      fixed everything an intervention did not change: a step is regenerated
      only when what it was asked differs, so chance alone cannot turn a
      failure into a success.
    """

    def __init__(
        self,
        recording: Recording | None = None,
        replay_until: int | None = 0,
        overrides: Mapping[int, Override] | None = None,
        reuse_unchanged_from: int | None = None,
    ) -> None:
        self.recording = recording
        self.reuse_unchanged_from = reuse_unchanged_from
        self.reused = 0
        if recording is None:
            replay_until = 0
        elif replay_until is None:
            replay_until = len(recording)
        if replay_until > (len(recording) if recording is not None else 0):
            raise ConfigError(f"replay_until={replay_until} is past the end of a recording of {len(recording or [])} calls")
        self.replay_until: int = replay_until
        self._replay_all = recording is not None and replay_until == len(recording)
        self.overrides = dict(overrides or {})
        self.calls: list[CallRecord] = []
        self.replayed = 0
        self.live = 0

    @property
    def recorded(self) -> Recording:
        return Recording(list(self.calls))

    def call(self, kind: str, agent: str, request: JSON, live: Callable[[JSON], JSON]) -> JSON:
        """Make (or replay) one call and record it. Returns the response."""
        index = len(self.calls)
        # Round-trip through JSON so what we compare and keep is exactly what a
        # stored recording would hold (tuples become lists, keys become strings).
        request = json.loads(canonical(request))
        meta: dict[str, Any] = {}
        if index < self.replay_until:
            assert self.recording is not None
            expected = self.recording[index]
            if expected.kind != kind or expected.agent != agent:
                raise Drift(index, kind, {"kind": expected.kind, "agent": expected.agent}, {"kind": kind, "agent": agent}, "caller differs")
            if canonical(expected.request) != canonical(request):
                raise Drift(index, kind, expected.request, request)
            response = expected.response
            meta["replayed"] = True
            self.replayed += 1
        elif self._replay_all:
            raise Drift(index, kind, None, request, "call past the end of a fully replayed recording")
        elif index in self.overrides:
            recorded = None
            if self.recording is not None and index < len(self.recording):
                recorded = self.recording[index].response
            response = self.overrides[index](CallRecord(index, kind, agent, request, recorded))
            meta["overridden"] = True
        elif self._unchanged(index, kind, agent, request):
            assert self.recording is not None
            response = self.recording[index].response
            meta["reused"] = True
            self.reused += 1
        else:
            response = live(request)
            self.live += 1
        response = json.loads(canonical(response))
        self.calls.append(CallRecord(index, kind, agent, request, response, meta))
        return response

    def _unchanged(self, index: int, kind: str, agent: str, request: JSON) -> bool:
        if self.reuse_unchanged_from is None or index < self.reuse_unchanged_from or self.recording is None:
            return False
        if index >= len(self.recording):
            return False
        old = self.recording[index]
        return old.kind == kind and old.agent == agent and canonical(old.request) == canonical(request)
