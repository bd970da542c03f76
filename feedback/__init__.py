"""faultlens feedback: lessons from attributions, lesson memory, and the hooks that put lessons back into agents."""

from .hooks import (
    LESSONS_ATTRIBUTE,
    completion,
    current_lessons,
    lesson_ids_of,
    lessons_block,
    node_with_lessons,
    parse_lessons_block,
    record_lessons,
    record_trace_outcome,
    set_default_memory,
    with_lessons,
)
from .langgraph_store import LangGraphLessonMemory
from .loop import FeedbackLoop, LoopResult, attribute_and_reflect, reflect_on
from .memory import BaseLessonMemory, LessonMemory, RetirePolicy
from .reflect import ALL_AGENTS, LLMReflector, OfflineReflector, Reflection, Reflector, TerminalReflector, get_reflector

__all__ = [
    "ALL_AGENTS",
    "LESSONS_ATTRIBUTE",
    "BaseLessonMemory",
    "FeedbackLoop",
    "LLMReflector",
    "LangGraphLessonMemory",
    "LessonMemory",
    "LoopResult",
    "OfflineReflector",
    "Reflection",
    "Reflector",
    "RetirePolicy",
    "TerminalReflector",
    "attribute_and_reflect",
    "completion",
    "current_lessons",
    "get_reflector",
    "lesson_ids_of",
    "lessons_block",
    "node_with_lessons",
    "parse_lessons_block",
    "record_lessons",
    "record_trace_outcome",
    "reflect_on",
    "set_default_memory",
    "with_lessons",
]
