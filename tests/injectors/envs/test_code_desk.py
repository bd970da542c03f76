"""`code_desk`: real Strands Agents code (an orchestrator `Agent` whose tools are two other `Agent`s, agents as tools)
on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks` extra (strands-agents) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.code_desk.policy import design_in, listed_tests  # noqa: E402
from faultlens.injectors.envs.code_desk.world import FAMILIES, answer_of, hidden_report, make_task, passed_all  # noqa: E402
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "code_desk"
SIM = FRAMEWORK_SIM
needs_sdk = needs_framework("strands")
runs = seed_runs_fixture(ENV, 9)


def test_the_reference_passes_the_hidden_tests_and_a_strictness_slip_fails_them():
    for i, family in enumerate(FAMILIES):
        _, world = make_task(random.Random(i), family)
        code = answer_of(world)
        assert passed_all(hidden_report(world, code))
        if ">=" in code:
            assert not passed_all(hidden_report(world, code.replace(">=", ">", 1)))


def test_a_design_lists_a_few_of_the_probes_in_order_and_is_read_back_from_a_brief():
    calls = [f"f({i})" for i in range(10)]
    listed = listed_tests(calls, random.Random(3))
    assert len(listed) == 4 and listed == sorted(listed, key=calls.index)
    brief = "Implement this.\nDesign:\n- function: f(x)\n- tests: f(1)\nThe code:\n```python\nx\n```"
    assert design_in(brief) == "Design:\n- function: f(x)\n- tests: f(1)"


@needs_sdk
def test_the_requests_are_strands_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:3]] == ["lead", "coder", "lead"]
    # agents as tools: the lead's tools are the agents, each with Strands' one `input` parameter
    tools = {t["function"]["name"]: t["function"] for t in calls[0].request["tools"]}
    assert set(tools) == {"coder", "tester"} and list(tools["coder"]["parameters"]["properties"]) == ["input"]
    assert calls[0].request["stream"] is False and calls[0].request["messages"][0]["content"].startswith("You are the lead")
    # the coder sees only the input the lead wrote (Strands' content parts), and has no tools
    coder = calls[1].request["messages"]
    assert [m["role"] for m in coder] == ["system", "user"] and coder[1]["content"][0]["text"].startswith("Implement")
    assert not calls[1].request.get("tools")
    # the coder's reply comes back to the lead as the agent tool's result
    back = [m for m in calls[2].request["messages"] if m.get("role") == "tool"][0]["content"]
    assert back.strip().startswith("```python\ndef ")
    tester = next(c for c in calls if c.agent == "tester")
    assert {t["function"]["name"] for t in tester.request["tools"]} == {"run_tests"}


@needs_sdk
def test_the_lead_plans_briefs_the_coder_has_the_code_tested_and_answers_it(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "lead" and steps[0].kind == StepKind.plan and steps[0].metadata["delegate"] == "coder"
        assert "Design:\n- function: " + task.metadata["world"]["function"] in steps[0].content
        assert "tester" in [s.metadata.get("delegate") for s in steps if s.kind == StepKind.message]
        runs_of_tests = [s for s in steps if s.kind == StepKind.tool_call and s.tool_name == "run_tests"]
        assert runs_of_tests and all(s.agent == "tester" for s in runs_of_tests)
        assert steps[-1].agent == "lead" and steps[-1].kind == StepKind.final_answer and "```python" in steps[-1].content


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    failed = [s.content for _, r in runs for s in r.trace.steps if s.kind == StepKind.tool_result and "does not load" in s.content]
    assert failed  # the coder's first version without its colon, sent back and fixed
    env = envs.get(ENV)
    for task, _ in runs[:3]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        # plan, code, hand-over to the tester, test run and its result, verdict, answer
        assert len(clean.trace.steps) == 7


@needs_sdk
def test_a_design_error_passes_the_teams_tests_and_fails_the_hidden_ones(runs):
    from faultlens.injectors.generators import Generated

    task, seed = next((t, r) for t, r in runs if t.metadata["family"] == "grade" and len(r.trace.steps) == 7)
    plan = seed.trace.steps[0].content
    changed = plan.replace(" >= ", " > ") if " >= " in plan else plan.replace(" > ", " >= ")
    assert changed != plan
    attempt = inject_at(ENV, seed, 0, "R.4", Generated(changed, "strictness flipped"))
    assert attempt.status == "kept" and attempt.trace.gold.agent == "lead"
    verdicts = [s.content for s in attempt.trace.steps if s.agent == "tester" and s.kind == StepKind.message]
    assert verdicts and verdicts[-1].rstrip().endswith("VERDICT: pass")  # the team's tests follow the design


@needs_sdk
def test_a_handed_on_slip_is_one_the_listed_tests_miss_so_the_tester_passes_it_and_the_hidden_tests_fail(runs):
    from faultlens.injectors.envs.code_desk.mistakes import _c2_code
    from faultlens.injectors.generators import gen_input

    env = envs.get(ENV)
    kept = 0
    for _, seed in runs:
        handover = next(s.index for s in seed.trace.steps if s.agent == "lead" and s.metadata.get("delegate") == "tester")
        made = _c2_code(gen_input(seed.trace, handover, "C.2", random.Random(handover), env))
        if made is None:
            continue
        attempt = inject_at(ENV, seed, handover, "C.2", made)
        assert attempt.status == "kept", made.reason  # the slip changes what the function does
        verdicts = [s.content for s in attempt.trace.steps if s.agent == "tester" and s.kind == StepKind.message]
        assert verdicts[-1].rstrip().endswith("VERDICT: pass")  # ... and the four listed calls miss it
        kept += 1
    assert kept >= 3


@needs_sdk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV, modes=4)


@needs_sdk
def test_runs_are_captured_as_strands_spans_through_openinference_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.strands_agents")
    assert imported.source.framework == "strands-agents"
    # Agents: Strands' `invoke_agent <name>` spans (AGENT, `agent.name`) name them; no adapter is needed. Each model
    # call is the agent's whose run it is in, in the order of the recorded calls.
    assert [a.name for a in imported.agents] == ["lead", "coder", "tester"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    # Tool outputs: each test run is the tester's TOOL span whose output is the very report it was given; each agent
    # tool is a TOOL span of the lead's whose output is that agent's reply.
    tests = [s for s in imported.steps if s.kind == StepKind.tool_call and s.tool_name == "run_tests"]
    given = [s for s in seed_run.trace.steps if s.kind == StepKind.tool_result]
    assert [(s.agent, str(s.tool_result)) for s in tests] == [(s.agent, s.content) for s in given] and given
    delegated = [s for s in imported.steps if s.tool_name in ("coder", "tester")]
    replies = [s.content for s in seed_run.trace.steps if s.agent in ("coder", "tester") and s.kind == StepKind.message]
    assert [str(s.tool_result).strip() for s in delegated] == [r.strip() for r in replies]
    assert all(s.agent == "lead" for s in delegated)
    assert imported.task.query == seed_run.trace.task.query
