"""`math_society`: real CAMEL code (a `RolePlaying` society with task specification: an AI user instructs, an AI
assistant carries out with `FunctionTool`s until CAMEL_TASK_DONE) on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks2` extra (camel-ai) is not installed; `make test` runs them in .venv-frameworks2.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.math_society.policy import TeamPolicy, read_specified, specified_text, specify  # noqa: E402
from faultlens.injectors.envs.math_society.world import (FAMILIES, FINDS, MISREAD, answer_of, evaluate_formula,  # noqa: E402
                                                         formula_of, make_task)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

pytestmark = pytest.mark.frameworks2

ENV = "math_society"
SIM = FRAMEWORK_SIM
needs_camel = needs_framework("camel", "frameworks2")
runs = seed_runs_fixture(ENV, 9)


def test_every_fact_of_a_kind_differs_so_a_wrong_look_up_changes_the_answer():
    for i in range(60):
        _, world = make_task(random.Random(i), FAMILIES[i % 3])
        sheet = world["sheet"]
        for kind in ("price", "pack size", "pack price", "hourly wage", "daily bonus"):
            values = [v for k, v in sheet.items() if k.endswith(" " + kind) and not (kind == "price" and "pack" in k)]
            assert len(values) == len(set(values)) >= 4
        assert answer_of(world) > 0


def test_the_specifier_reads_back_each_familys_figures_and_a_misread_asks_another_formula():
    for i in range(30):
        question, world = make_task(random.Random(i), FAMILIES[i % 3])
        given, facts, find = specify(question)  # type: ignore[misc]
        assert (given, facts, find) == ([tuple(g) for g in world["given"]], world["facts"], world["find"])
        assert read_specified(specified_text(question, given, facts, find)) == (given, facts, find)
        assert formula_of(MISREAD[find], [n for n, _ in given], facts) != formula_of(find, [n for n, _ in given], facts)
    assert set(MISREAD) | set(MISREAD.values()) == set(FINDS)


def test_a_formula_names_its_quantities_longest_first():
    values = {"pens": 12, "pen pack size": 4, "pen pack price": 9}
    assert evaluate_formula("pens / pen pack size * pen pack price", values) == "12 / 4 * 9"


def test_the_instructor_says_done_only_once_the_solver_reported_a_result():
    task = ("Problem: x\nGiven: pens = 12\nLook up: pen pack size; pen pack price\nFind: the cost of the packs")
    never = lambda label: False  # noqa: E731
    plan = TeamPolicy.instructor(task, [{"role": "user", "content": "Now start."}], never)
    assert plan.startswith("Instruction: Look up these facts with the lookup tool: pen pack size; pen pack price.")
    messages = [{"role": "user", "content": "Now start."}, {"role": "assistant", "content": plan},
                {"role": "user", "content": "Solution:\npen pack size: 4\npen pack price: 9\nNext request."}]
    calc = TeamPolicy.instructor(task, messages, never)
    assert calc.startswith("Instruction: Calculate 12 / 4 * 9 with the calculate tool.")
    failed = messages + [{"role": "assistant", "content": calc},
                         {"role": "user", "content": "Solution: The calculator could not evaluate it: error\nNext request."}]
    assert TeamPolicy.instructor(task, failed, never) == calc  # asked again, not done
    done = failed[:-1] + [{"role": "user", "content": "Solution: 12 / 4 * 9 = 27\nNext request."}]
    assert TeamPolicy.instructor(task, done, never) == "CAMEL_TASK_DONE"


@needs_camel
def test_the_requests_are_camels_own_role_playing(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:3]] == ["task_specifier", "instructor", "solver"]
    # CAMEL's task-specify prompt, and its AI-society system prompts with the specified task in them
    assert calls[0].request["messages"][1]["content"].startswith("Here is a task that solver will help instructor to complete:")
    user_system, assistant_system = (calls[i].request["messages"][0]["content"] for i in (1, 2))
    assert user_system.startswith("===== RULES OF USER =====\nNever forget you are a instructor and I am a solver.")
    assert assistant_system.startswith("===== RULES OF ASSISTANT =====\nNever forget you are a solver and I am a instructor.")
    assert "Find: " in user_system and "You are the instructor." in user_system
    # CAMEL's opening message to the AI user, and the solver's FunctionTools as OpenAI tools
    assert calls[1].request["messages"][1]["content"] == ("Now start to give me instructions one by one. "
                                                          "Only reply with Instruction and Input.")
    assert {t["function"]["name"] for t in calls[2].request["tools"]} == {"lookup", "calculate"}
    assert "tools" not in calls[1].request
    # the AI user sees the solver's replies, never its tool calls
    later = [c for c in calls if c.agent == "instructor"][1].request["messages"]
    assert later[-1]["role"] == "user" and later[-1]["content"].startswith("Solution:")
    assert not any(m.get("tool_calls") or m.get("role") == "tool" for m in later)


@needs_camel
def test_the_society_specifies_plans_looks_up_calculates_and_ends_with_camel_task_done(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "task_specifier" and steps[0].content.startswith("Problem: ")
        assert steps[1].agent == "instructor" and steps[1].kind == StepKind.plan
        assert {s.tool_name for s in steps if s.kind == StepKind.tool_call} == {"lookup", "calculate"}
        assert all(s.agent == "solver" for s in steps if s.kind in (StepKind.tool_call, StepKind.tool_result))
        assert steps[-2].agent == "instructor" and steps[-2].content == "CAMEL_TASK_DONE" and steps[-2].metadata["done"]
        assert steps[-1].agent == "solver" and steps[-1].kind == StepKind.final_answer
        assert steps[-1].content.endswith(f"ANSWER: {task.reference_answer}") and result.answer == steps[-1].content


@needs_camel
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    errors = [s.content for _, r in runs for s in r.trace.steps if s.kind == StepKind.tool_result and s.content.startswith("error")]
    assert any("no fact" in e for e in errors) and any("cannot evaluate" in e for e in errors)
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        # specified task, plan, 2 look-ups and results, report, calculation order, calculation and result, report,
        # CAMEL_TASK_DONE, answer
        assert len(clean.trace.steps) == 13 and len(clean.recording.calls) == 10


@needs_camel
def test_the_instructor_follows_the_specified_task_so_a_misread_question_fails_the_task(runs):
    from faultlens.injectors.generators import Generated

    task, seed = next((t, r) for t, r in runs if t.metadata["family"] == "change")
    text = seed.trace.steps[0].content
    changed = text.replace("Find: the change", "Find: the total cost")
    assert changed != text
    attempt = inject_at(ENV, seed, 0, "R.4", Generated(changed, "the total cost"))
    assert attempt.status == "kept" and attempt.trace.gold.agent == "task_specifier"
    calc = [s for s in attempt.trace.steps if s.kind == StepKind.tool_call and s.tool_name == "calculate"][-1]
    assert not calc.tool_arguments["expression"].startswith(str(dict(task.metadata["world"]["given"])["note"]))


@needs_camel
def test_an_early_camel_task_done_ends_the_conversation_without_an_answer(runs):
    from faultlens.injectors.generators import Generated

    _, seed = runs[0]
    attempt = inject_at(ENV, seed, 1, "A.5", Generated("CAMEL_TASK_DONE", "done before anything"))
    assert attempt.status == "kept" and len(attempt.trace.steps) == 3
    assert attempt.trace.steps[-1].kind == StepKind.final_answer and "ANSWER" not in attempt.trace.steps[-1].content


@needs_camel
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV)


@needs_camel
def test_a_run_makes_no_network_call_and_loads_no_tiktoken_encoding():
    # A fresh interpreter whose sockets refuse to connect, before CAMEL is imported: CAMEL must need none of them.
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n    raise OSError('network call during a math_society run')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\nsocket.getaddrinfo = refuse\n"
        "from faultlens.injectors import envs\n"
        "env = envs.get('math_society')\n"
        "result = env.run(env.tasks(3, 1)[0], sim={'seed': 1, 'noise': 0.2, 'tendencies': {}})\n"
        "assert result.trace.outcome.success, result.trace.outcome.detail\n"
        "import tiktoken.registry\n"
        "assert not tiktoken.registry.ENCODINGS, list(tiktoken.registry.ENCODINGS)\n"
        "print('ok')\n")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": "/nonexistent", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


@needs_camel
def test_runs_are_captured_as_openai_spans_named_by_the_camel_adapter_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.openai")
    assert imported.source.framework == "camel"
    # Agents: each LLM span named by the role CAMEL's system prompt gives (the span adapter); in order of the calls
    assert [a.name for a in imported.agents] == ["task_specifier", "instructor", "solver"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: each look-up and calculation is a TOOL span whose output is the very text the solver was given
    tools = [s for s in imported.steps if s.kind == StepKind.tool_call]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    assert [(s.agent, s.tool_name, str(s.tool_result)) for s in tools] == [(s.agent, s.tool_name, s.content) for s in given]
    assert len(given) >= 3
    # The task: the run span's input
    assert imported.task.query == seed_run.trace.task.query
