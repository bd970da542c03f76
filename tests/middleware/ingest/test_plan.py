"""The ingest planner: spans to a plan of headers, links and steps, without a store."""

import inspect
import json

from faultlens.middleware.ingest.plan import plan_ingest
from tests.middleware.spans.test_mapping import oi, record, sid


def test_the_planner_takes_no_store():
    assert list(inspect.signature(plan_ingest).parameters) == ["records", "source"]


def test_a_plan_of_a_run_with_its_root():
    root = record(sid(1), "invoke_workflow w", start=1, end=4, **{"gen_ai.operation.name": "invoke_workflow", "faultlens.task": json.dumps({"query": "the task"})})
    agent = oi(sid(2), "Triage", "AGENT", parent=sid(1), start=2, end=3, **{"agent.name": "Triage"})
    llm = oi(sid(3), "generation", "LLM", parent=sid(2), start=2, end=3, **{"llm.output_messages.0.message.content": "hi"})
    orphan = oi(sid(4), "generation", "LLM", parent=sid(9), start=2, end=3)
    (run,) = plan_ingest([root, agent, llm, orphan]).runs
    assert run.root is root and run.header.task.query == "the task"
    assert set(run.links) == {sid(1), sid(2), sid(3), sid(4)}
    assert [(r.span_id, step["agent"], missing) for r, step, missing, _ in run.steps] == [(sid(3), "Triage", None), (sid(4), "agent", sid(9))]
