"""The gateway's upstream during a re-run: the recorded prefix replayed, one call corrected, the rest live.

A re-run of a failed run puts the user's program back on the task with its
model calls going through a gateway whose upstream is a `RerunUpstream`
(the proxy's session semantics, in the live gateway):

- calls before `at` must ask exactly what the recording holds at the same
  position (`replay.gateway_calls.request_key`, secrets redacted as the store
  redacted the recording) and get the recorded reply; a
  call that asks something else is *drift* (the re-run cannot show anything:
  the candidate is not verifiable), answered 409;
- call `at` gets the correction in the recorded reply's place: a new draw
  made beforehand (`draw`: the call asked anew with a lesson added to its
  system message), a corrector's text, or an injected error;
- a later call whose request equals the recorded one at its position gets the
  recorded reply (what the correction did not touch stays fixed); any other
  goes live to the upstream.

A *control* (`control=True`) corrects nothing: calls up to and including `at`
get their recorded replies and every later call goes live, so it shows whether
the run fails again with call `at` as it was. Its later calls may have been
drawn beforehand (`drawn_later`, see `rerun.trial.draw_control`): the ones that
gave their recorded replies are replayed, the first that did not gets its draw.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

from ..replay.endpoint import error_body, sse_chunks
from ..replay.gateway_calls import TRANSPORT, request_key
from ..replay.session import CallRecord, Drift, Recording, Session
from ..store.redact import redact
from .live_gateway import completion_text, inject_lessons
from .upstream import GatewayUpstream, UpstreamError

__all__ = ["RerunUpstream", "draw"]


def draw(live: GatewayUpstream, agent: str, request: dict[str, Any], lesson: str | None = None) -> dict[str, Any]:
    """A new draw of a call from the upstream: `request` without its transport fields, `lesson` (when given) added
    to its system message as the gateway's lessons block."""
    asked = {k: v for k, v in request.items() if k not in TRANSPORT}
    if lesson:
        asked["messages"] = inject_lessons(list(asked.get("messages") or []), lesson)
    return live.complete(agent, asked)


class RerunUpstream:
    """A `GatewayUpstream` for one re-run (see the module docstring).

    replacement: call `at`'s reply: a text (a corrector model's), or a whole chat completion (a new `draw` made
        beforehand, or an injected error for `faultlens adapt`).
    control: correct nothing; replay through call `at`, the rest live (see the module docstring).
    drawn_later: a control's (position, completion): every call after `at` and before `position` was drawn anew
        beforehand and gave its recorded reply, so it is replayed; call `position` gets this draw; the rest go live.
    """

    def __init__(self, recording: Recording, at: int, live: GatewayUpstream, *,
                 replacement: str | dict[str, Any] | None = None, control: bool = False,
                 drawn_later: tuple[int, dict[str, Any]] | None = None):
        if not 0 <= at < len(recording):
            raise ValueError(f"call {at} is outside the recording's {len(recording)} calls")
        if (replacement is None) != control:
            raise ValueError("a re-run puts a replacement at call `at`, unless it is a control (which corrects nothing)")
        if drawn_later is not None and not (control and at < drawn_later[0] < len(recording)):
            raise ValueError("drawn_later is a control's draw of a call after `at`, within the recording")
        self.live = live
        self.replacement = replacement
        self.at = at
        self.drawn_later = drawn_later
        if control and drawn_later is not None:
            position, completion = drawn_later
            self.session = Session(recording, replay_until=position, overrides={position: lambda _record: copy.deepcopy(completion)})
        elif control:
            self.session = Session(recording, replay_until=at + 1)
        else:
            self.session = Session(recording, replay_until=at, overrides={at: self._correct}, reuse_unchanged_from=at + 1)
        self.drift: Drift | None = None
        self.upstream_errors: list[str] = []
        self.corrected: str | None = None  # the reply call `at` got, as step text
        self._lock = threading.Lock()  # a session is one ordered list of calls

    @property
    def live_calls(self) -> int:
        """Calls drawn anew in this re-run (a control's call drawn beforehand among them, once the program made it)."""
        drawn = self.drawn_later is not None and len(self.session.calls) > self.drawn_later[0]
        return self.session.live + drawn

    @property
    def reached(self) -> bool:
        """Did the program make call `at` again (a re-run that stops before it shows nothing about it)?"""
        return len(self.session.calls) > self.at

    def _correct(self, record: CallRecord) -> dict[str, Any]:
        if isinstance(self.replacement, dict):
            out = copy.deepcopy(self.replacement)
        else:
            out = copy.deepcopy(record.response)
            out["choices"][0]["message"] = {"role": "assistant", "content": self.replacement}
            out["choices"][0]["finish_reason"] = "stop"
        self.corrected = completion_text(out)
        return out

    def _live(self, agent: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return draw(self.live, agent, request)
        except UpstreamError as exc:
            self.upstream_errors.append(f"{exc.status}: {exc.body[:200].decode('utf-8', 'replace')}")
            raise

    def complete(self, agent: str, request: dict[str, Any]) -> dict[str, Any]:
        # The recording holds requests as the store kept them, secrets redacted: compare in that form.
        key = redact(request_key(request.get("messages"), request))
        with self._lock:
            try:
                return self.session.call("model", agent, key, lambda _key: self._live(agent, request))
            except Drift as drift:
                self.drift = self.drift or drift
                body = error_body(f"faultlens re-run: {drift}", "faultlens_drift", index=drift.index)
                raise UpstreamError(409, json.dumps(body).encode()) from None

    def stream(self, agent: str, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        completion = self.complete(agent, request)
        return (json.loads(line[len("data: "):]) for line in sse_chunks(completion, include_usage=True)
                if line.startswith("data: {"))
