"""The tracer: decorated agents and tools, runs, outcomes, concurrency, exporters."""

import asyncio
import json
import threading

import litellm
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from faultlens.middleware import Media, StepKind, Task, Tracer, open_store


@pytest.fixture
def tracer(tmp_path):
    t = Tracer(db=tmp_path / "t.db")
    t.instrument_litellm()
    yield t
    t.shutdown()


def build_team(tracer):
    @tracer.tool(name="search")
    def search(query: str) -> dict:
        if query == "missing":
            return {"error": f"nothing found for {query!r}"}
        return {"hits": [query.upper()]}

    @tracer.tool(name="divide")
    def divide(a: int, b: int) -> float:
        return a / b

    @tracer.agent(name="researcher", role="finds facts")
    def researcher(question: str) -> str:
        search(question)
        search("missing")
        reply = litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": question}], mock_response="Paris")
        return reply.choices[0].message.content

    @tracer.agent(name="planner", role="plans")
    def planner(question: str) -> str:
        litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "plan " + question}], mock_response="ask the researcher")
        return "answer: " + researcher(question)

    return planner, divide


def test_nested_agents_tools_and_litellm_become_ordered_steps(tracer):
    planner, _ = build_team(tracer)
    with tracer.run(task=Task(query="capital of France?", reference_answer="Paris"), agents=["planner"]) as run:
        answer = planner("capital of France?")
        tracer.final_answer(answer, agent="planner")
        run.record_outcome(success=True, score=1.0, detail="matched")

    trace = tracer.store.get_trace(run.id)
    got = [(s.agent, s.kind.value, s.tool_name) for s in trace.steps]
    assert got == [
        ("planner", "llm_call", None),
        ("researcher", "tool_call", "search"),
        ("researcher", "tool_call", "search"),
        ("researcher", "llm_call", None),
        ("researcher", "message", None),
        ("planner", "message", None),
        ("planner", "final_answer", None),
    ]
    llm = trace.steps[3]
    assert llm.content == "Paris" and llm.model == "gpt-4o-mini"
    assert llm.usage is not None and llm.usage.input_tokens > 0 and llm.usage.cost_usd > 0
    assert llm.metadata["input_messages"][0]["parts"][0]["content"] == "capital of France?"
    # a chat step's parent is the agent span that made the call
    assert llm.parent_span_id is not None and llm.parent_span_id == trace.steps[4].span_id
    assert trace.steps[1].tool_arguments == {"query": "capital of France?"} and trace.steps[1].tool_result == {"hits": ["CAPITAL OF FRANCE?"]}
    assert trace.steps[5].content == "answer: Paris"
    assert trace.outcome.success and trace.outcome.score == 1.0
    assert {a.name: a.role for a in trace.agents} == {"planner": "plans", "researcher": "finds facts"}
    assert trace.id == run.id and len(trace.id) == 32


def test_tool_returning_an_error_dict_is_an_error_step(tracer):
    planner, _ = build_team(tracer)
    with tracer.run(task="q") as run:
        planner("q")
    steps = tracer.store.get_trace(run.id).steps
    failed = [s for s in steps if s.failed]
    assert len(failed) == 1
    assert failed[0].tool_name == "search" and failed[0].error == "nothing found for 'missing'"
    assert failed[0].tool_result == {"error": "nothing found for 'missing'"}


def test_raising_tool_is_an_error_step_and_the_run_fails(tracer):
    _, divide = build_team(tracer)
    with pytest.raises(ZeroDivisionError):
        with tracer.run(task="divide") as run:
            divide(1, 0)
    trace = tracer.store.get_trace(run.id)
    assert [s.error for s in trace.steps] == ["ZeroDivisionError: division by zero"]
    assert trace.outcome is not None and not trace.outcome.success and trace.outcome.evaluator == "tracer"


def test_step_durability_stores_steps_as_spans_end_so_a_crash_keeps_them(tmp_path):
    tracer = Tracer(db=tmp_path / "crash.db", durability="step")

    @tracer.tool
    def step_one() -> str:
        return "done"

    run = tracer.start_run(task="crashy")
    with_run = tracer.run  # noqa: F841 - the run is left open on purpose, as after a crash
    from faultlens.middleware.capture.tracer import _current_run

    token = _current_run.set(run)
    try:
        step_one()
    finally:
        _current_run.reset(token)
    # the process "dies" here: no run.end(); a fresh store still sees the header and the step
    stored = open_store(tmp_path / "crash.db").get_trace(run.id)
    assert stored.task.query == "crashy" and [s.tool_name for s in stored.steps] == ["step_one"]
    assert stored.outcome is None


def test_concurrent_runs_in_threads_do_not_mix(tracer):
    @tracer.tool(name="echo")
    def echo(value: str) -> str:
        return value

    @tracer.agent(name="worker")
    def worker(tag: str) -> str:
        for i in range(5):
            echo(f"{tag}-{i}")
        return tag

    ids: dict[str, str] = {}

    def one(tag: str) -> None:
        with tracer.run(task=tag) as run:
            worker(tag)
        ids[tag] = run.id

    threads = [threading.Thread(target=one, args=(f"t{i}",)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for tag, trace_id in ids.items():
        trace = tracer.store.get_trace(trace_id)
        assert trace.task.query == tag
        assert [s.tool_result for s in trace.steps if s.tool_name] == [f"{tag}-{i}" for i in range(5)]
        assert trace.steps[-1].content == tag


async def test_concurrent_runs_in_asyncio_tasks_do_not_mix(tracer):
    @tracer.tool(name="fetch")
    async def fetch(value: str) -> str:
        await asyncio.sleep(0.001)
        return value

    @tracer.agent(name="async_worker")
    async def worker(tag: str) -> str:
        for i in range(4):
            await fetch(f"{tag}-{i}")
        reply = await litellm.acompletion(model="gpt-4o-mini", messages=[{"role": "user", "content": tag}], mock_response=f"done {tag}")
        return reply.choices[0].message.content

    async def one(tag: str) -> str:
        async with tracer.run(task=tag) as run:
            await worker(tag)
        return run.id

    tags = [f"a{i}" for i in range(5)]
    ids = await asyncio.gather(*(one(tag) for tag in tags))
    for tag, trace_id in zip(tags, ids):
        trace = tracer.store.get_trace(trace_id)
        assert [s.tool_result for s in trace.steps if s.tool_name] == [f"{tag}-{i}" for i in range(4)]
        llm = [s for s in trace.steps if s.kind is StepKind.llm_call]
        assert [s.content for s in llm] == [f"done {tag}"] and llm[0].agent == "async_worker"


def test_spans_follow_genai_conventions_and_other_processors_see_them(tmp_path):
    exporter = InMemorySpanExporter()
    tracer = Tracer(db=tmp_path / "x.db")
    tracer.add_span_processor(SimpleSpanProcessor(exporter))

    @tracer.tool(name="lookup")
    def lookup(key: str) -> str:
        return key

    @tracer.agent(name="helper")
    def helper() -> str:
        tracer.set_lessons(["lesson-1"])
        tracer.attach_media(Media(mime_type="image/png", path="screen.png"))
        return lookup("k")

    with tracer.run(task="t") as run:
        helper()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_workflow run", "invoke_agent helper", "execute_tool lookup"}
    tool = spans["execute_tool lookup"].attributes
    assert tool["gen_ai.operation.name"] == "execute_tool" and tool["gen_ai.tool.name"] == "lookup"
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"key": "k"} and tool["gen_ai.agent.name"] == "helper"
    assert all(s.attributes["gen_ai.conversation.id"] == run.id for s in spans.values())
    assert format(spans["invoke_workflow run"].context.trace_id, "032x") == run.id
    step = tracer.store.get_trace(run.id).steps[-1]
    assert step.agent == "helper" and step.lessons == ["lesson-1"] and step.media[0].path == "screen.png"


def test_otel_traces_exporter_env_adds_an_exporter(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    tracer = Tracer(db=tmp_path / "e.db")
    names = [type(p).__name__ for p in tracer.provider._active_span_processor._span_processors]
    assert names == ["RunContextProcessor", "BatchSpanProcessor", "SimpleSpanProcessor"]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "no-such-exporter")
    with pytest.raises(ValueError, match="no-such-exporter"):
        Tracer(db=tmp_path / "e.db")


def test_batch_durability_writes_steps_at_run_end_not_on_the_agents_thread(tmp_path):
    tracer = Tracer(db=tmp_path / "b.db", schedule_delay_millis=60_000)

    @tracer.tool(name="echo")
    def echo(i: int) -> int:
        return i

    with tracer.run(task="batched") as run:
        for i in range(5):
            echo(i)
        # queued, not yet written: the header is there (written at start), the steps are not
        assert open_store(tmp_path / "b.db").get_trace(run.id).steps == []
    assert [s.tool_arguments for s in open_store(tmp_path / "b.db").get_trace(run.id).steps] == [{"i": i} for i in range(5)]


def test_durability_must_be_a_known_mode(tmp_path):
    with pytest.raises(ValueError, match="durability"):
        Tracer(db=tmp_path / "d.db", durability="sometimes")


def test_record_outcome_outside_a_run_is_an_error(tracer):
    with pytest.raises(RuntimeError, match="tracer.run"):
        tracer.record_outcome(success=True)


def test_tool_spans_are_tool_results_and_agent_steps_decisions(tracer):
    from faultlens.middleware.model.trace import StepRole

    planner, _ = build_team(tracer)
    with tracer.run(task="q") as run:
        planner("q")
    steps = tracer.store.get_trace(run.id).steps
    assert {s.role for s in steps if s.tool_name} == {StepRole.tool_result}
    assert all(s.role == StepRole.decision for s in steps if not s.tool_name)


def test_a_bad_span_in_a_batch_is_logged_and_the_rest_of_the_batch_is_kept(tmp_path):
    from opentelemetry import trace as otel_trace

    tracer = Tracer(db=tmp_path / "bad.db")

    @tracer.tool(name="echo")
    def echo(i: int, broken: bool = False) -> int:
        if broken:
            otel_trace.get_current_span().set_attribute("faultlens.media", "not json")
        return i

    with tracer.run(task="one bad span") as run:
        echo(0)
        echo(1, broken=True)
        echo(2)
    assert [s.tool_arguments for s in tracer.store.get_trace(run.id).steps] == [{"i": 0}, {"i": 2}]
    assert len(tracer.errors) == 1 and "faultlens.media" in str(tracer.errors[0])
