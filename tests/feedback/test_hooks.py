"""Run-time hooks: lessons into system prompts (litellm messages, LangGraph nodes), ids onto spans."""

from __future__ import annotations

from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from opentelemetry.sdk.trace import TracerProvider

from faultlens.feedback import LessonMemory, current_lessons, lessons_block, node_with_lessons, parse_lessons_block, with_lessons
from faultlens.feedback.hooks import LESSONS_ATTRIBUTE, LESSONS_HEADER
from faultlens.feedback.reflect import OfflineReflector
from faultlens.middleware.capture.tracer import Tracer

from .conftest import DISSIMILAR_TASK, SIMILAR_TASK, blame_analyst, failed_trace


@pytest.fixture
def memory(store):
    memory = LessonMemory(store)
    trace = failed_trace()
    memory.add(OfflineReflector().reflect(trace, blame_analyst(trace)).lessons[0])
    return memory


def test_with_lessons_extends_the_system_prompt_and_records_ids_on_the_span(memory):
    [lesson] = memory.lessons("analyst")
    messages = [{"role": "system", "content": "You are the analyst."}, {"role": "user", "content": SIMILAR_TASK}]
    span = TracerProvider().get_tracer("test").start_span("chat")
    from opentelemetry import trace as otel_trace

    with otel_trace.use_span(span, end_on_exit=True):
        out = with_lessons(messages, agent="analyst", task=SIMILAR_TASK, memory=memory)
        assert span.attributes[LESSONS_ATTRIBUTE] == (lesson.id,)
    assert messages[0]["content"] == "You are the analyst."  # the input is not modified
    assert out[0]["content"].startswith("You are the analyst.\n\n" + LESSONS_HEADER)
    assert parse_lessons_block(out[0]["content"]) == [{"id": lesson.id, "agent": "analyst", "mode": "R.3"}]
    # no system message: one is added; no lesson: nothing changes
    assert with_lessons(messages[1:], agent="analyst", task=SIMILAR_TASK, memory=memory)[0]["role"] == "system"
    assert with_lessons(messages, agent="analyst", task=DISSIMILAR_TASK, memory=memory) == messages
    assert with_lessons(messages, agent="researcher", task=SIMILAR_TASK, memory=memory) == messages
    assert lessons_block([]) == ""


def test_with_lessons_needs_an_agent_and_a_task_outside_a_node(memory):
    with pytest.raises(ValueError):
        with_lessons([{"role": "user", "content": "x"}], memory=memory)


class State(TypedDict, total=False):
    task: str
    prompt: str
    seen: list[str]


def test_node_with_lessons_in_a_traced_langgraph_graph(store, memory):
    [lesson] = memory.lessons("analyst")

    @node_with_lessons("analyst", memory=memory)
    def analyst(state: State) -> dict:
        messages = with_lessons([{"role": "system", "content": "You are the analyst."}, {"role": "user", "content": state["task"]}])
        return {"prompt": messages[0]["content"], "seen": [l.id for l in current_lessons().lessons]}

    graph = StateGraph(State)
    graph.add_node("analyst", analyst)
    graph.add_edge(START, "analyst")
    graph.add_edge("analyst", END)
    app = graph.compile()

    tracer = Tracer(store=store, env_exporters=False)
    try:
        for task, expected in ((SIMILAR_TASK, [lesson.id]), (DISSIMILAR_TASK, [])):
            with tracer.run(task) as run:
                final = app.invoke({"task": task}, config={"callbacks": [tracer.langgraph_handler()]})
                run.record_outcome(success=True)
            assert final["seen"] == expected
            assert (LESSONS_HEADER in final["prompt"]) == bool(expected)
            steps = store.get_trace(run.id).steps
            node_steps = [s for s in steps if s.agent == "analyst"]
            assert node_steps, steps
            assert sorted({i for s in node_steps for i in s.lessons}) == expected
            # lessons are recorded on the node's step, not on every step of the run
            assert all(not s.lessons for s in steps if s.agent != "analyst")
    finally:
        tracer.shutdown()
