"""Every importer sets a step's role: executors' output, tool results and control steps are not decisions."""

from __future__ import annotations

import json

from faultlens.benchmark.datasets import load_dataset
from faultlens.middleware.jsonl import read_jsonl
from faultlens.middleware.model.trace import StepKind, StepRole
from faultlens.middleware.otlp.convert import read_otlp_file, trace_to_otlp


def test_whowhen_executor_participants_are_executor_output(tmp_path):
    record = {"question": "Sum the prices.", "ground_truth": "42", "mistake_agent": "assistant", "mistake_step": "0",
              "mistake_reason": "wrong column",
              "history": [{"role": "assistant", "name": "assistant", "content": "```python\nprint(sum(p))\n```"},
                          {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1\nNameError: p"},
                          {"role": "assistant", "name": "assistant", "content": "The total is 41."}]}
    (tmp_path / "1.json").write_text(json.dumps(record))
    [trace] = load_dataset(f"whowhen:{tmp_path}").traces()
    assert [s.role for s in trace.steps] == [StepRole.decision, StepRole.executor_output, StepRole.decision]


def test_whowhenpro_system_messages_are_control_and_tool_messages_results():
    traces = load_dataset("whowhenpro:tests/benchmark/fixtures/whowhenpro").traces()
    steps = [s for t in traces for s in t.steps]
    assert all(s.role == StepRole.tool_result for s in steps if s.kind == StepKind.tool_result)
    assert all(s.role == StepRole.control for s in steps if s.metadata.get("kind") == "system")


def test_otlp_round_trip_keeps_roles_and_reads_tool_spans_as_results(tmp_path):
    from faultlens.middleware.model.trace import Outcome, Step, Task, Trace

    trace = Trace(id="r", task=Task(query="q"), outcome=Outcome(success=False), steps=[
        Step(index=0, agent="a", kind=StepKind.tool_call, tool_name="t", tool_arguments={"x": 1}),
        Step(index=1, agent="a", kind=StepKind.tool_call, role=StepRole.tool_result, tool_name="t", tool_result={"y": 2}),
        Step(index=2, agent="terminal", kind=StepKind.message, role=StepRole.executor_output, content="ok"),
    ])
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(trace_to_otlp(trace)))
    [back] = read_otlp_file(path)
    assert [s.role for s in back.steps] == [StepRole.decision, StepRole.tool_result, StepRole.executor_output]


def test_jsonl_written_before_roles_reads_with_the_role_its_kind_implies():
    # The bundled benchmark was written before steps had roles.
    trace = next(iter(read_jsonl("benchmark/data/test.jsonl.gz")))
    assert all(s.role == (StepRole.tool_result if s.kind == StepKind.tool_result else StepRole.decision) for s in trace.steps)
