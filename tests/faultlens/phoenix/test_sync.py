"""`PhoenixSync` over a Phoenix played in memory: paging from the cursor, a session that grows after its run was written back.

(The real server: test_real_phoenix.py and test_resume.py.)
"""

from __future__ import annotations

import pytest

from faultlens.middleware.store import open_store
from faultlens.phoenix.annotations import DECISIVE_ERROR, VERDICT
from faultlens.phoenix.state import SyncState
from faultlens.phoenix.sync import PhoenixSync


class MemoryPhoenix:
    """The requests `PhoenixSync` makes, answered as Phoenix does: spans in insertion order, a page's cursor the id of the
    next page's first span (inclusive), annotations upserted on (name, span, identifier)."""

    url = "http://phoenix.test"

    def __init__(self):
        self.spans: list[dict] = []
        self.annotations: dict[tuple, dict] = {}
        self.pages = 0

    def add(self, span: dict) -> None:
        span["id"] = f"Span:{len(self.spans) + 1}"
        self.spans.append(span)

    def project(self, name):
        return {"name": name}

    def span_page(self, project, *, cursor=None, limit=100, start=None, end=None):
        from faultlens.phoenix.client import SpanPage

        self.pages += 1
        first = 0 if cursor is None else next(i for i, s in enumerate(self.spans) if s["id"] == cursor)
        page = self.spans[first:first + limit + 1]
        return SpanPage(page[:limit], page[limit]["id"] if len(page) > limit else None)

    def trace_annotations(self, project, trace_ids, names=None):
        return []

    def span_annotations(self, project, span_ids, names=None):
        return []

    def annotate_spans(self, annotations):
        ids = []
        for a in annotations:
            key = (a["name"], a["span_id"], a["identifier"])
            self.annotations[key] = a
            ids.append(f"SpanAnnotation:{list(self.annotations).index(key) + 1}")
        return ids


def add_run(phoenix: MemoryPhoenix, trace: str, session: str, n: int) -> None:
    """A small OpenInference run of `session`: an agent span (status ERROR), a model call and a failing tool."""
    root, llm, tool = f"{n:015x}a", f"{n:015x}b", f"{n:015x}c"

    def span(span_id, parent, kind, name, attributes, status="OK", second=0):
        return {"name": name, "context": {"trace_id": trace, "span_id": span_id}, "span_kind": kind, "parent_id": parent,
                "start_time": f"2026-12-03T05:0{n}:0{second}+00:00", "end_time": f"2026-12-03T05:0{n}:0{second + 1}+00:00",
                "status_code": status, "status_message": "", "attributes": {"session.id": session, **attributes}, "events": []}

    # as exporters send them: children first
    phoenix.add(span(llm, root, "LLM", "chat", {"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": f"call add, turn {n}"}, second=1))
    phoenix.add(span(tool, root, "TOOL", "add", {"tool.name": "add", "input.value": '{"a": 2, "b": "3"}'}, status="ERROR", second=2))
    phoenix.add(span(root, None, "AGENT", "planner.run", {"agent.name": "planner", "input.value": f"turn {n}: what is 2 + 3?"}, status="ERROR"))


def test_pages_resume_from_the_cursor_and_a_grown_session_is_attributed_again(tmp_path):
    phoenix = MemoryPhoenix()
    add_run(phoenix, "a" * 32, "chat-1", 1)
    store = open_store(str(tmp_path / "faultlens.db"))
    state = SyncState.load(tmp_path / "state.json", url=phoenix.url, project="agents")
    sync = PhoenixSync(phoenix, store, "agents", state=state, page_size=2, method="heuristic")

    first = sync.run_once()
    assert (first.spans, first.runs_seen, first.failed, first.attributed, first.annotations) == (3, 1, 1, 1, 2)
    assert state.runs["chat-1"].phase == "annotated" and state.runs["chat-1"].traces == ["a" * 32]
    (attribution,) = store.attributions("chat-1")
    trace = store.get_trace("chat-1")
    decisive = phoenix.annotations[(DECISIVE_ERROR, trace.steps[attribution.step].span_id, "faultlens")]
    assert decisive["result"]["label"] == attribution.mode
    assert phoenix.annotations[(VERDICT, "000000000000001a", "faultlens")]["metadata"]["faultlens_run"] == "chat-1"

    # Nothing new: one request (the last span again, not counted), nothing written.
    pages = phoenix.pages
    second = sync.run_once()
    assert (second.spans, second.failed, second.annotations) == (0, 0, 0) and phoenix.pages == pages + 1

    # The session's next trace arrives: the run is judged and attributed again, the verdict rewritten on the new trace's root.
    add_run(phoenix, "b" * 32, "chat-1", 2)
    third = sync.run_once()
    assert (third.spans, third.failed, third.attributed, third.annotations) == (3, 1, 1, 2)
    assert len(store.attributions("chat-1")) == 2 and store.get_job("chat-1").generation == 2
    assert state.runs["chat-1"].traces == ["a" * 32, "b" * 32] and state.runs["chat-1"].phase == "annotated"
    assert len(store.get_trace("chat-1").steps) == 2 * len(trace.steps)
    newest = max(store.attributions("chat-1"), key=lambda a: a.created_at)
    blamed = store.get_trace("chat-1").steps[newest.step].span_id
    root = blamed[:15] + "a"  # the root of the trace the blamed step is in (add_run's ids)
    assert phoenix.annotations[(VERDICT, root, "faultlens")]["metadata"]["faultlens_attribution"] == newest.id
    assert phoenix.annotations[(DECISIVE_ERROR, blamed, "faultlens")]["metadata"]["faultlens_attribution"] == newest.id
    assert sync.run_once().annotations == 0


def test_a_state_from_another_project_is_refused_not_overwritten(tmp_path):
    from faultlens.middleware.errors import InputError

    path = tmp_path / "state.json"
    SyncState(url="http://phoenix.test", project="agents", path=path).save()
    with pytest.raises(InputError, match="give another --state"):
        SyncState.load(path, url="http://phoenix.test", project="other")
    assert '"project": "agents"' in path.read_text()
