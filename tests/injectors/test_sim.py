"""Simulated agents: a litellm provider; per-agent error tendencies; lessons they follow; the tracer."""

import litellm
import pytest

from faultlens.injectors import envs
from faultlens.injectors.sim import SimConfig, ensure_registered, parse_lessons
from faultlens.middleware.model.trace import Lesson, StepKind


def test_the_provider_answers_through_litellm_and_reads_the_conversation():
    ensure_registered()
    env = envs.get("table_qa")
    task = env.tasks(5, 1)[0]
    messages = [{"role": "system", "content": env.system_prompt("analyst", task)},
                {"role": "user", "content": f"Question: {task.query}\nReply with your plan first."}]
    reply = litellm.completion(model="faultlens-sim/table_qa", messages=messages).choices[0].message.content
    for _ in range(5):  # runs look at the data zero to four times before planning
        if "# look" not in reply:
            break
        messages += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": "Output of run_python:\n(1, 'North', 'toys', 2023, 4, 9.5)"}]
        reply = litellm.completion(model="faultlens-sim/table_qa", messages=messages).choices[0].message.content
    assert reply.startswith("Plan:\n- filter")
    # same conversation with a traceback as the last tool output: the analyst rewrites its code
    plan = reply
    messages += [{"role": "assistant", "content": plan},
                 {"role": "user", "content": "Continue: run your plan."}]
    code = litellm.completion(model="faultlens-sim/table_qa", messages=messages).choices[0].message.content
    assert "Action: run_python" in code
    messages += [{"role": "assistant", "content": code},
                 {"role": "user", "content": "Output of run_python:\nsqlite3.OperationalError: no such column: unit"}]
    again = litellm.completion(model="faultlens-sim/table_qa", messages=messages).choices[0].message.content
    assert "Action: run_python" in again and "check" not in again


def test_a_system_prompt_without_an_agent_is_rejected():
    ensure_registered()
    with pytest.raises(Exception, match="You are the <agent>"):
        litellm.completion(model="faultlens-sim/table_qa", messages=[{"role": "user", "content": "hi"}])


def _answers(name, sim, lessons=None, n=8):
    env = envs.get(name)
    return [env.run(task, sim=sim, lessons=lessons) for task in env.tasks(21, n)]


def test_tendencies_make_that_agent_err_in_that_mode_and_lessons_stop_it():
    tendencies = {"answerer": {"R.3": 1.0}}
    base = _answers("research_team", {"seed": 1, "noise": 0.0})
    prone = _answers("research_team", {"seed": 1, "noise": 0.0, "tendencies": tendencies})
    assert all(r.trace.outcome.success for r in base)
    numeric = [i for i, r in enumerate(base) if r.answer.replace(",", "").isdigit()]
    assert numeric and all(not prone[i].trace.outcome.success for i in numeric)
    lesson = Lesson(agent="answerer", mode="R.3", situation="questions about how many residents or people work at a company",
                    mistake="copied the number with a changed digit", advice="copy the verified number exactly")
    taught = _answers("research_team", {"seed": 1, "noise": 0.0, "tendencies": tendencies}, lessons={"answerer": [lesson]})
    assert all(taught[i].trace.outcome.success for i in numeric)
    # the lesson is recorded on the steps where it was shown
    assert all(lesson.id in s.lessons for r in taught for s in r.trace.steps if s.agent == "answerer")
    # addressed to another agent, or about another mode, it changes nothing
    other = Lesson(agent="reader", mode="R.3", situation=lesson.situation, mistake="m", advice="a")
    mismatched = Lesson(agent="answerer", mode="A.4", situation=lesson.situation, mistake="m", advice="a")
    for lessons in ({"reader": [other]}, {"answerer": [mismatched]}):
        runs = _answers("research_team", {"seed": 1, "noise": 0.0, "tendencies": tendencies}, lessons=lessons)
        assert all(not runs[i].trace.outcome.success for i in numeric)


def test_lessons_are_shown_in_the_system_prompt_in_a_parseable_form():
    env = envs.get("table_qa")
    task = env.tasks(5, 1)[0]
    lesson = Lesson(agent="analyst", mode="PL.1", situation="sum of units per region and year",
                    mistake="left out the year", advice="keep every condition of the question in the plan")
    result = env.run(task, sim=SimConfig(seed=1).to_dict(), lessons={"analyst": [lesson]})
    system = result.recording[0].request["messages"][0]["content"]
    shown = parse_lessons(system)
    assert len(shown) == 1 and shown[0].mode == "PL.1" and shown[0].advice == lesson.advice


def test_runs_go_through_the_tracer_one_span_per_step(tmp_path):
    from faultlens.middleware.store import open_store
    from faultlens.middleware.capture.tracer import Tracer

    tracer = Tracer(store=open_store(tmp_path / "t.db"), env_exporters=False)
    for name in ("research_team", "table_qa"):
        env = envs.get(name)
        result = env.run(env.tasks(2, 1)[0], tracer=tracer, sim={"seed": 1, "noise": 0.3})
        tracer.force_flush()
        stored = tracer.store.get_trace(result.trace.id)
        mine = [(s.agent, s.kind, s.content, s.tool_name) for s in result.trace.steps]
        assert [(s.agent, s.kind, s.content, s.tool_name) for s in stored.steps] == mine
        assert stored.outcome.success == result.trace.outcome.success
        assert stored.source.benchmark == name
        assert any(k == StepKind.final_answer for _, k, _, _ in mine)
