"""Lesson memory: where lessons live, how they are found again, merged and retired.

Two backends share every rule (`BaseLessonMemory`):

- `LessonMemory` keeps lessons in the faultlens store (`Store`: SQLite or PostgreSQL);
- `feedback.langgraph_store.LangGraphLessonMemory` keeps them in any LangGraph
  `BaseStore`, one namespace per agent.

The rules:

- **Retrieval** for (agent, task): the agent's active lessons plus those
  addressed to every agent (`ALL_AGENTS`). Each gets a *relevance*, the TF-IDF
  cosine between the task text and the lesson's `situation`
  (`feedback.similarity`); lessons below `min_relevance` are dropped, so a task
  unlike anything the agent erred on gets no lesson. The rest are ranked by
  ``relevance × (0.5 + track)``, where ``track = (helped + 1) / (helped + failed + 2)``
  is the lesson's Laplace-smoothed success rate when shown (0.5 for a new
  lesson), and the top `k` are returned.
- **Merging**: a new lesson is a near-duplicate of an active one when both are
  for the same agent and failure mode and their situations have a similarity of
  at least `merge_threshold`. The new lesson is then not stored; the existing
  one gets `merged += 1` (an agreement vote) and keeps its counters.
- **Voting and retirement** (after ExpeL's insight voting: an insight starts
  with importance 2, agreement adds 1, a down-vote removes 1, and it is dropped
  at 0): a lesson's importance is
  ``policy.initial + merged + helped − failed``; each run it was shown in that
  succeeded is an up-vote and each that failed a down-vote. A lesson shown in at
  least `policy.min_shown` runs whose importance falls to 0 or below is retired:
  it stays in the store (with its counters, for audit) but is never retrieved
  or merged into again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from faultlens.middleware.model.trace import Lesson
from faultlens.middleware.store import Store

from .reflect import ALL_AGENTS
from .similarity import similarities, similarity


@dataclass(frozen=True)
class RetirePolicy:
    """ExpeL-style voting: importance = initial + merged + helped − failed; retire at ≤ 0 once shown `min_shown` times."""

    initial: int = 2
    min_shown: int = 3

    def importance(self, lesson: Lesson) -> int:
        return self.initial + lesson.merged + lesson.helped - lesson.failed

    def should_retire(self, lesson: Lesson) -> bool:
        return lesson.shown >= self.min_shown and self.importance(lesson) <= 0


@dataclass(frozen=True)
class Scored:
    """A retrieved lesson with the numbers that ranked it."""

    lesson: Lesson
    relevance: float
    track: float
    score: float


def track_record(lesson: Lesson) -> float:
    """Laplace-smoothed success rate of the runs the lesson was shown in."""
    return (lesson.helped + 1) / (lesson.helped + lesson.failed + 2)


class BaseLessonMemory:
    """The memory rules over a storage backend; subclasses implement `_put`, `_get` and `_list`."""

    def __init__(
        self,
        *,
        k: int = 3,
        min_relevance: float = 0.15,
        merge_threshold: float = 0.6,
        policy: RetirePolicy | None = None,
    ):
        self.k = k
        self.min_relevance = min_relevance
        self.merge_threshold = merge_threshold
        self.policy = policy or RetirePolicy()
        # Counter updates are read-modify-write; the loop's worker and the
        # agents' threads both write, so they take turns.
        self._lock = threading.RLock()

    # -- storage (backend) --------------------------------------------------
    def _put(self, lesson: Lesson) -> None:
        raise NotImplementedError

    def _get(self, lesson_id: str) -> Lesson:
        raise NotImplementedError

    def _list(self, agent: str | None, include_retired: bool) -> list[Lesson]:
        raise NotImplementedError

    # -- public API ---------------------------------------------------------
    def get(self, lesson_id: str) -> Lesson:
        """The lesson with this id (retired or not); KeyError if there is none."""
        return self._get(lesson_id)

    def lessons(self, agent: str | None = None, *, include_retired: bool = False) -> list[Lesson]:
        """Stored lessons, oldest first, optionally only one agent's (not counting ALL_AGENTS lessons)."""
        return self._list(agent, include_retired)

    def find_duplicate(self, lesson: Lesson) -> Lesson | None:
        """The active lesson `lesson` would be merged into, if any."""
        candidates = [c for c in self._list(lesson.agent, False) if c.mode == lesson.mode and c.id != lesson.id]
        best, best_sim = None, self.merge_threshold
        for candidate in candidates:
            sim = similarity(lesson.situation, candidate.situation)
            if sim >= best_sim:
                best, best_sim = candidate, sim
        return best

    def add(self, lesson: Lesson) -> Lesson:
        """Store a lesson, or merge it into its near-duplicate. Returns the lesson as stored."""
        with self._lock:
            duplicate = self.find_duplicate(lesson)
            if duplicate is None:
                self._put(lesson)
                return lesson
            merged = duplicate.model_copy(update={"merged": duplicate.merged + 1, "updated_at": time.time()})
            self._put(merged)
            return merged

    def retire(self, lesson_id: str) -> Lesson:
        """Retire a lesson by hand (a person overruled the verdict it was drawn from). Returns it as stored."""
        with self._lock:
            lesson = self._get(lesson_id).model_copy(update={"retired": True, "updated_at": time.time()})
            self._put(lesson)
            return lesson

    def add_all(self, lessons: Iterable[Lesson]) -> list[Lesson]:
        return [self.add(lesson) for lesson in lessons]

    def scored(self, agent: str, task: str) -> list[Scored]:
        """Every active lesson for `agent` (and for all agents) with its relevance, track and score, best first."""
        candidates = self._list(agent, False)
        if agent != ALL_AGENTS:
            candidates += self._list(ALL_AGENTS, False)
        if not candidates or not task.strip():
            return []
        relevances = similarities(task, [c.situation for c in candidates])
        out = []
        for lesson, relevance in zip(candidates, relevances):
            track = track_record(lesson)
            out.append(Scored(lesson, relevance, track, relevance * (0.5 + track)))
        # Ties (same score) go to the older lesson, so retrieval is deterministic.
        out.sort(key=lambda s: (-s.score, s.lesson.created_at, s.lesson.id))
        return out

    def retrieve(self, agent: str, task: str, k: int | None = None) -> list[Lesson]:
        """The top-k lessons for `agent` working on `task`; none below `min_relevance`."""
        k = self.k if k is None else k
        return [s.lesson for s in self.scored(agent, task) if s.relevance >= self.min_relevance][:k]

    def record_outcome(self, lesson_ids: Sequence[str], success: bool) -> list[Lesson]:
        """Count one run, shown these lessons, as succeeded or failed; retire lessons voted out.

        Each distinct id is counted once per call (a lesson shown at several
        steps of one run still saw one run). Unknown ids are skipped (the lesson
        may live in another memory). Returns the updated lessons.
        """
        updated = []
        with self._lock:
            for lesson_id in dict.fromkeys(lesson_ids):
                try:
                    lesson = self._get(lesson_id)
                except KeyError:
                    continue
                lesson = lesson.model_copy(
                    update={
                        "shown": lesson.shown + 1,
                        "helped": lesson.helped + int(success),
                        "failed": lesson.failed + int(not success),
                        "updated_at": time.time(),
                    }
                )
                if not lesson.retired and self.policy.should_retire(lesson):
                    lesson = lesson.model_copy(update={"retired": True})
                self._put(lesson)
                updated.append(lesson)
        return updated


class LessonMemory(BaseLessonMemory):
    """Lessons kept in the faultlens store (the `lessons` table)."""

    def __init__(self, store: Store, **options):
        super().__init__(**options)
        self.store = store

    def _put(self, lesson: Lesson) -> None:
        self.store.save_lesson(lesson)

    def _get(self, lesson_id: str) -> Lesson:
        return self.store.get_lesson(lesson_id)

    def _list(self, agent: str | None, include_retired: bool) -> list[Lesson]:
        return self.store.lessons(agent=agent, include_retired=include_retired)
