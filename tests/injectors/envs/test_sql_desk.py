"""`sql_desk`: real Haystack code (a lead `Agent` calling a schema_reader and an sql_analyst `Agent` as
`ComponentTool`s) over a task's SQLite database, on simulated agents.

What every framework team guarantees (zero drift, step mapping, each rule's exact label, byte-identical inject) is
checked in `test_framework_envs.py`; this module holds what is particular to this team. The tests that run the team
skip when the `frameworks` extra (haystack-ai) is not installed; `make test` installs it.
"""

from __future__ import annotations

import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .conftest import (FRAMEWORK_SIM, assert_inject_keeps_many_modes, captured_seed, inject_at,  # noqa: E402
                       needs_framework, seed_runs_fixture)
from faultlens.injectors import envs  # noqa: E402
from faultlens.injectors.envs.sql_desk.env import same_value  # noqa: E402
from faultlens.injectors.envs.sql_desk.policy import Schema, first_value, schema_report, sql_of  # noqa: E402
from faultlens.injectors.envs.sql_desk.world import (FAMILIES, answer_of, connect, figure, items_of,  # noqa: E402
                                                     make_task, read_schema, run_sql)
from faultlens.middleware.model.trace import StepKind  # noqa: E402

ENV = "sql_desk"
SIM = FRAMEWORK_SIM
needs_sdk = needs_framework("haystack")
runs = seed_runs_fixture(ENV, 10)


def test_the_analysts_sql_on_the_schema_report_gives_the_reference_of_every_family():
    for i in range(60):
        _, world = make_task(random.Random(i), FAMILIES[i % len(FAMILIES)])
        db = connect(world)
        schema = Schema.read(schema_report(read_schema(db)))
        items, op = items_of(world["question"])
        values = [first_value(run_sql(db, sql_of(item, schema))) for item in items]
        assert values == [str(figure(world, item)) for item in items]
        expected = int(values[0]) - int(values[1]) if op == "minus" else values[0]
        assert str(expected) == str(answer_of(world))
        # the question's value as capitalised finds no row (the analyst's recovered mistake)
        if items[0].city:
            assert first_value(run_sql(db, sql_of(items[0], schema, capitalised=True))) is None


def test_each_task_names_its_tables_anew_never_as_the_question_does():
    seen = set()
    for i in range(30):
        _, world = make_task(random.Random(i), FAMILIES[i % len(FAMILIES)])
        tables = world["names"]["tables"]
        assert not {"orders", "customers", "products"} & set(tables.values())
        seen.add(tables["orders"])
        # a query written from the question's words alone fails: the schema must be read first
        assert run_sql(connect(world), "SELECT COUNT(*) FROM orders").startswith("error: no such table")
    assert len(seen) > 1


def test_run_sql_is_read_only_and_answers_errors_as_text():
    _, world = make_task(random.Random(0), "city_revenue")
    db = connect(world)
    orders = world["names"]["tables"]["orders"]
    assert run_sql(db, f"DELETE FROM {orders}").startswith("error: only a read-only SELECT")
    assert run_sql(db, f"WITH x AS (SELECT 1) DELETE FROM {orders}").startswith("error")
    assert run_sql(db, f"SELECT COUNT(*) FROM {orders}").splitlines()[1] == "40"
    assert run_sql(db, "SELECT nope FROM nowhere").startswith("error: no such table")


def test_the_answer_is_a_number_or_a_name():
    assert same_value("1,250", "1250") and same_value("maria  lund", "Maria Lund")
    assert not same_value("Lund, Maria", "Maria Lund") and not same_value("1250 euros", "1250")
    env = envs.get(ENV)
    task = next(t for t in env.tasks(0, 10) if t.metadata["family"] == "top_customer")
    assert env.evaluate(task, f"ANSWER: {task.reference_answer}").success
    assert not env.evaluate(task, "The top client.").success


@needs_sdk
def test_the_requests_are_haystacks_own(runs):
    _, result = runs[0]
    calls = result.recording.calls
    assert [c.agent for c in calls[:3]] == ["lead", "schema_reader", "schema_reader"]
    lead_tools = {t["function"]["name"] for t in calls[0].request["tools"]}
    assert lead_tools == {"schema_reader", "sql_analyst", "calculate"}
    # Haystack's agent-as-tool: a member tool takes a list of chat messages, as Haystack's ChatMessage schema
    for tool in calls[0].request["tools"]:
        if tool["function"]["name"] != "calculate":
            assert "messages" in tool["function"]["parameters"]["properties"]
    analyst = next(c for c in calls if c.agent == "sql_analyst").request["messages"]
    assert analyst[1]["content"].startswith("Find these figures with SQL") and " -> " in analyst[1]["content"]
    assert {t["function"]["name"] for t in next(c for c in calls if c.agent == "sql_analyst").request["tools"]} == {"run_sql"}


@needs_sdk
def test_the_lead_plans_the_members_report_and_the_lead_answers(runs):
    for task, result in runs:
        steps = result.trace.steps
        assert steps[0].agent == "lead" and steps[0].kind == StepKind.plan
        assert steps[0].metadata["delegate"] == "schema_reader"
        for member in ("schema_reader", "sql_analyst"):
            reports = [s for s in steps if s.agent == member and s.kind == StepKind.message]
            assert reports and all(s.tool_name is None for s in reports)
        queries = [s for s in steps if s.tool_name == "run_sql" and s.kind == StepKind.tool_call]
        assert all(q.tool_arguments["query"].startswith("SELECT ") for q in queries)
        assert steps[-1].agent == "lead" and steps[-1].kind == StepKind.final_answer
        assert f"ANSWER: {task.reference_answer}" in steps[-1].content


@needs_sdk
def test_seeds_hold_recovered_mistakes_and_none_without_noise(runs):
    requeried = sum(any(s.kind == StepKind.tool_result and s.tool_name == "run_sql" and
                        s.content.splitlines()[-1] == "NULL" for s in r.trace.steps) for _, r in runs)
    assert requeried >= 1  # the capitalised value queried again (the lead's typographic minus is rarer: 2 families)
    env = envs.get(ENV)
    for task, _ in runs[:5]:
        clean = env.run(task, sim=dict(SIM, noise=0.0))
        assert clean.trace.outcome.success
        two = task.metadata["family"] in ("city_gap", "month_growth")
        # plan, schema read and result, schema report, request, one query and its result per figure, report,
        # (calculation and its result), answer
        assert len(clean.trace.steps) == (13 if two else 9)


@needs_sdk
def test_the_lead_follows_its_plan_so_a_tool_the_team_lacks_ends_the_run(runs):
    from faultlens.injectors.generators import Generated

    _, seed = runs[0]
    plan = seed.trace.steps[0].content
    attempt = inject_at(ENV, seed, 0, "PL.2", Generated(plan.replace("2. sql_analyst:", "2. query_warehouse:"), "x"))
    assert attempt.status == "kept" and attempt.trace.gold.agent == "lead"
    called = [s for s in attempt.trace.steps if s.kind == StepKind.tool_call and s.agent == "lead"]
    assert called[0].tool_name == "query_warehouse"
    assert "could not carry out step 2" in attempt.trace.steps[-1].content


@needs_sdk
def test_mixed_up_keys_from_the_schema_reader_make_a_join_that_runs_and_is_wrong(runs):
    from faultlens.injectors.envs.sql_desk.mistakes import _c2_keys
    from faultlens.injectors.generators import gen_input

    _, seed = runs[0]
    t = next(s.index for s in seed.trace.steps if s.agent == "schema_reader" and s.kind == StepKind.message)
    generated = _c2_keys(gen_input(seed.trace, t, "C.2", random.Random(0), envs.get(ENV)))
    attempt = inject_at(ENV, seed, t, "C.2", generated)
    assert attempt.status == "kept"
    result = next(s for s in attempt.trace.steps if s.kind == StepKind.tool_result and s.tool_name == "run_sql")
    assert not result.content.startswith("error")  # the query ran: the figure is wrong, not missing


@needs_sdk
def test_inject_keeps_failures_of_many_modes_each_labelled_with_its_step():
    assert_inject_keeps_many_modes(ENV, modes=10)


@needs_sdk
def test_runs_are_captured_as_haystacks_openinference_spans_and_import(tmp_path):
    imported, seed_run = captured_seed(ENV, tmp_path, "openinference.instrumentation.haystack")
    assert imported.source.framework == "haystack"
    # Agents: the `Agent.run` spans named by their system prompts (the haystack span adapter); each model call is
    # the agent's whose run it is in, in the order of the recorded calls.
    assert [a.name for a in imported.agents] == ["lead", "schema_reader", "sql_analyst"]
    llm = [s for s in imported.steps if s.kind == StepKind.llm_call]
    assert [s.agent for s in llm] == [c.agent for c in seed_run.recording.calls]
    assert imported.task.query == seed_run.trace.task.query
