"""Lessons kept in a LangGraph `BaseStore`, for teams that already use one.

Each agent's lessons live in their own namespace, ``(*prefix, agent)`` (by
default ``("faultlens", "lessons", "<agent>")``), keyed by lesson id, with the
lesson's JSON as the value. Lessons for every agent live under the agent name
``"*"``. Retrieval, merging and retirement follow the same rules as the
store-backed memory (`feedback.memory`).

    from langgraph.store.memory import InMemoryStore
    memory = LangGraphLessonMemory(InMemoryStore())
"""

from __future__ import annotations

from langgraph.store.base import BaseStore

from faultlens.middleware.model.trace import Lesson
from faultlens.middleware.errors import NotFound

from .memory import BaseLessonMemory

_PAGE = 100


class LangGraphLessonMemory(BaseLessonMemory):
    def __init__(self, store: BaseStore, *, prefix: tuple[str, ...] = ("faultlens", "lessons"), **options):
        super().__init__(**options)
        self.store = store
        self.prefix = tuple(prefix)

    def namespace(self, agent: str) -> tuple[str, ...]:
        return (*self.prefix, agent)

    def _put(self, lesson: Lesson) -> None:
        # index=False: the store's own vector index (if any) is not how we rank.
        self.store.put(self.namespace(lesson.agent), lesson.id, lesson.model_dump(mode="json"), index=False)

    def _get(self, lesson_id: str) -> Lesson:
        found = self.store.search(self.prefix, filter={"id": lesson_id}, limit=1)
        if not found:
            raise NotFound(f"no lesson with id {lesson_id!r} under namespace {self.prefix}")
        return Lesson.model_validate(found[0].value)

    def _search_all(self, namespace: tuple[str, ...]) -> list[Lesson]:
        out, offset = [], 0
        while True:
            page = self.store.search(namespace, limit=_PAGE, offset=offset)
            out += [Lesson.model_validate(item.value) for item in page]
            if len(page) < _PAGE:
                return out
            offset += _PAGE

    def _list(self, agent: str | None, include_retired: bool) -> list[Lesson]:
        lessons = self._search_all(self.prefix if agent is None else self.namespace(agent))
        if agent is not None:
            # search() matches by prefix: agent "a" must not see agent "a/b"'s namespace.
            lessons = [lesson for lesson in lessons if lesson.agent == agent]
        if not include_retired:
            lessons = [lesson for lesson in lessons if not lesson.retired]
        return sorted(lessons, key=lambda lesson: (lesson.created_at, lesson.id))
