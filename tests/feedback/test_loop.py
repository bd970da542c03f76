"""The live loop: a traced failed run → attribution in the background → a lesson → the next similar run's prompt."""

from __future__ import annotations

import threading

import litellm
import pytest
from litellm import CustomLLM

from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.feedback import FeedbackLoop, LessonMemory, attribute_and_reflect, completion
from faultlens.feedback.hooks import LESSONS_HEADER
from faultlens.feedback.reflect import LLMReflector
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Outcome
from faultlens.middleware.store import open_store
from faultlens.middleware.capture.tracer import Tracer

from .conftest import DISSIMILAR_TASK, ORIGINAL_TASK, SIMILAR_TASK, failed_trace


class PromptRecordingTestDouble(CustomLLM):
    """Test double for a model: remembers the prompts it was sent, answers with a fixed calculation."""

    def __init__(self):
        super().__init__()
        self.prompts: list[list[dict]] = []

    def completion(self, model, messages, *args, **kwargs):
        self.prompts.append(messages)
        return litellm.ModelResponse(model=model, choices=[{"message": {"role": "assistant", "content": "Calculation: 412 - 374 = 48"}}])


@pytest.fixture
def double():
    fake = PromptRecordingTestDouble()
    before = litellm.custom_provider_map
    litellm.custom_provider_map = [*(before or []), {"provider": "feedback-test-double", "custom_handler": fake}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()
    yield fake
    litellm.custom_provider_map = before


class BlameTheAnalyst:
    """An attributor for tests: blames the analyst's first step as R.3, and notes which thread it ran on."""

    name = "blame-analyst"

    def __init__(self):
        self.threads: list[str] = []

    def attribute(self, trace):
        self.threads.append(threading.current_thread().name)
        step = next(s.index for s in trace.steps if s.agent == "analyst")
        return Attribution(trace_id=trace.id, method=self.name, agent="analyst", step=step, mode="R.3", reason="wrong difference")

    async def aattribute(self, trace):
        return self.attribute(trace)


def _team(tracer, memory):
    @tracer.agent(name="analyst", role="analyst")
    def analyst(question: str) -> str:
        messages = [{"role": "system", "content": "You are the analyst."}, {"role": "user", "content": question}]
        reply = completion(agent="analyst", task=question, memory=memory, model="feedback-test-double/analyst", messages=messages)
        return reply.choices[0].message.content

    return analyst


def _analyst_steps(store, trace_id):
    return [s for s in store.get_trace(trace_id).steps if s.agent == "analyst"]


def test_failed_run_teaches_the_blamed_agent_on_similar_tasks_only(store, double):
    tracer = Tracer(store=store, env_exporters=False)
    tracer.instrument_litellm()
    try:
        memory = LessonMemory(store)
        attributor = BlameTheAnalyst()
        loop = FeedbackLoop(tracer, attributor, memory)
        analyst = _team(tracer, memory)

        with loop.run(ORIGINAL_TASK) as first:
            analyst(ORIGINAL_TASK)
            first.record_outcome(success=False, detail="expected 38")
        assert loop.wait(timeout=30)
        [result] = loop.drain()
        assert result.error is None and result.reflection.status == "ok"
        [lesson] = memory.lessons("analyst")
        assert lesson.agent == "analyst" and lesson.mode == "R.3" and lesson.trace_id == first.id
        assert lesson.attribution_id == result.attribution.id and lesson.method == "offline"
        assert store.attributions(first.id)[0].id == result.attribution.id
        # attribution ran on the loop's worker, not the agent's thread
        assert attributor.threads == ["faultlens-feedback"]
        assert all(not s.lessons for s in _analyst_steps(store, first.id))
        assert LESSONS_HEADER not in double.prompts[0][0]["content"]

        with loop.run(SIMILAR_TASK) as second:
            analyst(SIMILAR_TASK)
            second.record_outcome(success=True)
        steps = _analyst_steps(store, second.id)
        assert steps and any(s.lessons == [lesson.id] for s in steps)
        assert lesson.id in double.prompts[1][0]["content"] and lesson.advice in double.prompts[1][0]["content"]
        shown = memory.get(lesson.id)
        assert (shown.shown, shown.helped, shown.failed) == (1, 1, 0)

        with loop.run(DISSIMILAR_TASK) as third:
            analyst(DISSIMILAR_TASK)
            third.record_outcome(success=True)
        assert all(not s.lessons for s in _analyst_steps(store, third.id))
        assert LESSONS_HEADER not in double.prompts[2][0]["content"]
        assert memory.get(lesson.id).shown == 1
        loop.close()
    finally:
        tracer.shutdown()


def test_record_outcome_without_a_tracer(store):
    trace = failed_trace()
    trace.outcome = None
    store.save_trace(trace)
    with FeedbackLoop(store=store, attributor=BlameTheAnalyst()) as loop:
        loop.record_outcome(trace.id, Outcome(success=False, detail="expected 38"))
        loop.wait()
        assert store.get_trace(trace.id).outcome.success is False
        [lesson] = loop.memory.lessons("analyst")
        assert lesson.trace_id == trace.id


def test_attribute_and_reflect_with_the_offline_defaults(store):
    trace = failed_trace()
    store.save_trace(trace)
    attribution, lessons = attribute_and_reflect(store, trace.id)  # the default method + offline reflector
    assert attribution is not None and attribution.method == DEFAULT_METHOD
    assert store.attributions(trace.id)[0].id == attribution.id
    if attribution.status == AttributionStatus.ok:
        assert lessons and all(l.agent == attribution.agent and l.attribution_id == attribution.id for l in lessons)
        assert LessonMemory(store).lessons(attribution.agent)[0].id == lessons[0].id


def test_an_unparsable_reflection_stores_nothing_but_the_attribution(store):
    trace = failed_trace()
    store.save_trace(trace)
    reflector = LLMReflector("openai/gpt-4o-mini", mock_response="I think the analyst was sloppy.")
    attribution, lessons = attribute_and_reflect(store, trace.id, BlameTheAnalyst(), reflector)
    assert lessons == [] and LessonMemory(store).lessons() == []
    assert store.attributions(trace.id)[0].id == attribution.id


def test_a_crashing_attributor_is_recorded_as_an_error(store):
    class Broken:
        name = "broken"

        def attribute(self, trace):
            raise RuntimeError("no signal")

    trace = failed_trace()
    store.save_trace(trace)
    with FeedbackLoop(store=store, attributor=Broken()) as loop:
        loop.submit(trace.id)
        [result] = loop.drain(timeout=30)
    assert result.attribution.status == AttributionStatus.error and "no signal" in result.attribution.error
    assert result.lessons == []
    assert store.attributions(trace.id)[0].status == AttributionStatus.error


def test_the_loop_keeps_lessons_in_a_langgraph_store(store):
    from langgraph.store.memory import InMemoryStore

    from faultlens.feedback import LangGraphLessonMemory

    backend = InMemoryStore()
    trace = failed_trace()
    trace.outcome = None
    store.save_trace(trace)
    with FeedbackLoop(store=store, attributor=BlameTheAnalyst(), memory=LangGraphLessonMemory(backend)) as loop:
        loop.record_outcome(trace.id, False, detail="expected 38")
        loop.wait()
    [item] = backend.search(("faultlens", "lessons", "analyst"))
    assert item.value["trace_id"] == trace.id and item.value["mode"] == "R.3"
    assert LessonMemory(store).lessons() == []  # nothing went to the SQLite lessons table


def test_min_confidence_keeps_guesses_out_of_memory(store):
    class Unsure(BlameTheAnalyst):
        def attribute(self, trace):
            return super().attribute(trace).model_copy(update={"confidence": 0.1})

    trace = failed_trace()
    store.save_trace(trace)
    with FeedbackLoop(store=store, attributor=Unsure(), min_confidence=0.5) as loop:
        loop.submit(trace.id)
        [result] = loop.drain(timeout=30)
    assert result.reflection.status == "skipped" and "below min_confidence" in result.error
    assert result.lessons == [] and loop.memory.lessons() == []
    assert store.attributions(trace.id)[0].confidence == 0.1  # the attribution itself is kept
    with FeedbackLoop(store=store, attributor=Unsure(), min_confidence=0.05) as loop:
        loop.submit(trace.id)
        [result] = loop.drain(timeout=30)
    assert [l.agent for l in result.lessons] == ["analyst"]


def test_any_run_of_the_tracer_is_handled_once_and_not_after_close(tmp_path):
    from faultlens.middleware.capture.tracer import current_tracer

    store = open_store(tmp_path / "listen.db")
    tracer = Tracer(store=store, env_exporters=False)
    loop = FeedbackLoop(tracer, BlameTheAnalyst())
    handled: list[str] = []
    loop.submit = lambda trace_id, **_: handled.append(trace_id)  # the queue itself is tested above
    with tracer.run("a plain run, not through loop.run") as run:
        assert current_tracer() is tracer
        run.record_outcome(False, detail="wrong")
    with loop.run("through the loop") as second:
        second.record_outcome(False)
    with tracer.run("no outcome recorded"):
        pass
    assert handled == [run.id, second.id] and current_tracer() is None
    loop.close()
    with tracer.run("after close") as third:
        third.record_outcome(False)
    assert handled == [run.id, second.id]


def test_a_failing_listener_does_not_break_the_run(tmp_path, caplog):

    tracer = Tracer(store=open_store(tmp_path / "l.db"), env_exporters=False)
    tracer.on_run_end(lambda run: 1 / 0)
    with tracer.run("task") as run:
        run.record_outcome(True)
    assert tracer.store.get_trace(run.id).outcome.success
    assert "run listener" in caplog.text


def test_a_job_run_twice_stores_one_attribution_and_one_set_of_lessons(store_target):
    """At-least-once delivery: a worker that died after writing leaves the job to another; the rerun replaces, not adds."""
    from faultlens.feedback.loop import reflect_on
    from faultlens.feedback.reflect import get_reflector
    from faultlens.middleware.store.jobs import JobQueue

    store = open_store(store_target)
    trace = failed_trace()
    store.save_trace(trace)
    store.submit_job(trace.id)
    first = store.claim_job("dies-after-writing", lease=0.05, max_attempts=3)
    reflect_on(store, trace.id, BlameTheAnalyst(), get_reflector(None), key=first.key)  # ...and never finishes the job
    import time

    time.sleep(0.1)
    queue = JobQueue(store, lambda job: reflect_on(store, job.trace_id, BlameTheAnalyst(), get_reflector(None)), poll=0.02)
    assert queue.run_one("survivor").attempts == 2
    assert store.get_job(trace.id).state == "done"
    [attribution] = store.attributions(trace.id)
    assert attribution.id == first.key
    lessons = LessonMemory(store).lessons(include_retired=True)
    assert len(lessons) == 1 and lessons[0].merged == 0 and lessons[0].attribution_id == first.key
    store.close()


def test_the_loop_and_a_server_share_one_queue(store_target):
    """A FeedbackLoop's failed runs are rows any worker on the store can see (here: on SQLite and PostgreSQL)."""
    store = open_store(store_target)
    trace = failed_trace()
    trace.outcome = None
    store.save_trace(trace)
    with FeedbackLoop(store=store, attributor=BlameTheAnalyst()) as loop:
        loop.record_outcome(trace.id, Outcome(success=False))
        assert loop.wait(30)
        job = store.get_job(trace.id)
        assert job.state == "done" and store.attributions(trace.id)[0].id == job.key
    store.close()


def test_a_label_overrules_the_verdict_and_its_lessons(store):
    from faultlens.feedback.loop import LABEL_METHOD, learn_from_label
    from faultlens.middleware.errors import FaultlensError
    from faultlens.middleware.model.labels import label_for

    trace = failed_trace()
    store.save_trace(trace)
    memory = LessonMemory(store)
    with pytest.raises(FaultlensError, match="has no label"):
        learn_from_label(store, trace.id, memory=memory)
    reflect_on_analyst = attribute_and_reflect(store, trace.id, BlameTheAnalyst(), memory=memory)[1]
    [wrong] = reflect_on_analyst
    assert wrong.step == 2

    # A person finds the researcher's findings at step 1 decisive (412 is Valfos's 2020 revenue, say).
    store.set_gold(trace.id, label_for(trace, 1, mode="C.2", reason="took the 2020 figure"))
    result = learn_from_label(store, trace.id, memory=memory)
    assert [l.id for l in result.retired] == [wrong.id] and memory.get(wrong.id).retired
    assert result.attribution.method == LABEL_METHOD and result.attribution.step == 1 and result.attribution.confidence == 1.0
    assert store.attributions(trace.id)[-1].method == LABEL_METHOD
    [lesson] = result.lessons
    assert (lesson.agent, lesson.step, lesson.mode) == ("researcher", 1, "C.2")
    assert [l.id for l in memory.lessons()] == [lesson.id]  # the analyst's lesson is no longer shown

    # Saving the same label again changes nothing: the kept lesson already names the step.
    again = learn_from_label(store, trace.id, memory=memory)
    assert again.attribution is None and [l.id for l in again.lessons] == [lesson.id] and not again.retired
    assert len(store.attributions(trace.id)) == 2


def test_a_lesson_other_runs_agreed_with_is_not_retired_by_one_label(store):
    from faultlens.feedback.loop import learn_from_label
    from faultlens.middleware.model.labels import label_for

    trace = failed_trace()
    store.save_trace(trace)
    memory = LessonMemory(store)
    [lesson] = attribute_and_reflect(store, trace.id, BlameTheAnalyst(), memory=memory)[1]
    memory._put(lesson.model_copy(update={"merged": 2}))
    store.set_gold(trace.id, label_for(trace, 1))
    result = learn_from_label(store, trace.id, memory=memory)
    assert not result.retired and not memory.get(lesson.id).retired
