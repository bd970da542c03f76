"""Lesson memory: retrieval by agent and task, merging, counters, retirement; the LangGraph store adapter."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from faultlens.feedback.langgraph_store import LangGraphLessonMemory
from faultlens.feedback.memory import LessonMemory, RetirePolicy
from faultlens.feedback.reflect import ALL_AGENTS, OfflineReflector, TerminalReflector
from faultlens.middleware.model.trace import Lesson

from .conftest import DISSIMILAR_TASK, ORIGINAL_TASK, SIMILAR_TASK, blame_analyst, failed_trace


@pytest.fixture(params=["sqlite", "langgraph"])
def memory(request, store):
    if request.param == "sqlite":
        return LessonMemory(store)
    return LangGraphLessonMemory(InMemoryStore())


def _lesson(memory, query=ORIGINAL_TASK):
    trace = failed_trace(query)
    return memory.add(OfflineReflector().reflect(trace, blame_analyst(trace)).lessons[0])


def test_retrieval_filters_by_agent_and_by_relevance(memory):
    lesson = _lesson(memory)
    assert [l.id for l in memory.retrieve("analyst", SIMILAR_TASK)] == [lesson.id]
    assert memory.retrieve("researcher", SIMILAR_TASK) == []  # another agent's lesson
    assert memory.retrieve("analyst", DISSIMILAR_TASK) == []  # below the relevance threshold
    scored = memory.scored("analyst", DISSIMILAR_TASK)
    assert scored[0].relevance < memory.min_relevance


def test_retrieval_ranks_by_relevance_then_track_record_and_keeps_top_k(memory):
    close = _lesson(memory)
    other = _lesson(memory, "What was the combined revenue of Brisk Corp and Tanlen Labs in 2020, added together?")
    assert close.id != other.id  # different situations: not merged
    ranked = memory.retrieve("analyst", SIMILAR_TASK, k=5)
    assert [l.id for l in ranked][:1] == [close.id]
    assert len(memory.retrieve("analyst", SIMILAR_TASK, k=1)) == 1
    # a good track record lifts a lesson: `other` helped in 5 runs, `close` failed in 1
    memory.record_outcome([other.id], True)
    for _ in range(4):
        memory.record_outcome([other.id], True)
    memory.record_outcome([close.id], False)
    by_id = {s.lesson.id: s for s in memory.scored("analyst", "revenue of Brisk Corp in 2021")}
    assert by_id[other.id].track > by_id[close.id].track


def test_lessons_for_every_agent_reach_each_agent(memory):
    lesson = memory.add(TerminalReflector().reflect(failed_trace(), None).lessons[0])
    assert lesson.agent == ALL_AGENTS
    for agent in ("analyst", "researcher"):
        assert [l.id for l in memory.retrieve(agent, SIMILAR_TASK)] == [lesson.id]


def test_near_duplicates_are_merged(memory):
    first = _lesson(memory)
    again = _lesson(memory, ORIGINAL_TASK.replace("2019", "2020"))
    assert again.id == first.id and again.merged == 1
    assert len(memory.lessons("analyst")) == 1
    # same situation but another mode is a different lesson
    other_mode = memory.add(first.model_copy(update={"id": "other", "mode": "R.2", "merged": 0}))
    assert other_mode.id == "other" and len(memory.lessons("analyst")) == 2


def test_counters_update_from_outcomes_and_failing_lessons_retire(memory):
    lesson = _lesson(memory)
    policy = memory.policy
    assert policy == RetirePolicy(initial=2, min_shown=3)
    [updated] = memory.record_outcome([lesson.id, lesson.id], True)  # one run, counted once
    assert (updated.shown, updated.helped, updated.failed) == (1, 1, 0)
    for _ in range(2):
        memory.record_outcome([lesson.id], False)
    assert not memory.get(lesson.id).retired  # importance 2 + 1 - 2 = 1
    memory.record_outcome([lesson.id], False)
    retired = memory.get(lesson.id)
    assert (retired.shown, retired.helped, retired.failed) == (4, 1, 3)
    assert retired.retired  # importance 2 + 1 - 3 = 0
    assert memory.retrieve("analyst", SIMILAR_TASK) == []
    assert [l.id for l in memory.lessons("analyst", include_retired=True)] == [lesson.id]
    # a retired lesson is not merged into: the same mistake again starts a new lesson
    fresh = _lesson(memory)
    assert fresh.id != lesson.id and not fresh.retired


def test_agreement_votes_delay_retirement(memory):
    lesson = _lesson(memory)
    _lesson(memory)
    _lesson(memory)  # two agreements: importance starts at 2 + 2
    for _ in range(3):
        memory.record_outcome([lesson.id], False)
    assert not memory.get(lesson.id).retired  # 2 + 2 - 3 = 1 (a lesson without agreements retires here)
    memory.record_outcome([lesson.id], False)
    assert memory.get(lesson.id).retired  # 2 + 2 - 4 = 0


def test_unknown_ids_are_skipped(memory):
    assert memory.record_outcome(["nope"], True) == []


def test_langgraph_adapter_round_trips_lessons_in_per_agent_namespaces():
    backend = InMemoryStore()
    memory = LangGraphLessonMemory(backend, prefix=("team", "lessons"))
    trace = failed_trace()
    lesson = OfflineReflector().reflect(trace, blame_analyst(trace)).lessons[0]
    memory.add(lesson)
    item = backend.get(("team", "lessons", "analyst"), lesson.id)
    assert item is not None and item.value["advice"] == lesson.advice
    assert memory.get(lesson.id) == lesson
    assert Lesson.model_validate(item.value) == lesson
    # a second memory over the same BaseStore sees the same lessons
    again = LangGraphLessonMemory(backend, prefix=("team", "lessons"))
    assert again.lessons("analyst") == [lesson]
    assert again.lessons() == [lesson]
    assert again.lessons("researcher") == []
    with pytest.raises(KeyError):
        again.get("missing")


def test_langgraph_adapter_pages_through_many_lessons():
    memory = LangGraphLessonMemory(InMemoryStore())
    for i in range(130):
        memory._put(Lesson(id=f"l{i:03d}", agent="analyst", situation=f"situation {i}", mistake="m", advice="a", created_at=i))
    assert len(memory.lessons("analyst")) == 130
