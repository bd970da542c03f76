"""A person's label of a run: checked against the trace, stored by both backends, set from the CLI."""

import json

import pytest
from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.middleware import open_store
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.labels import decision_behind, label_for
from faultlens.middleware.model.trace import Step, StepKind, StepRole, Task, Trace
from faultlens.middleware.store import TraceNotFound
from tests.middleware.model.test_trace import sample_trace


def run_with_a_tool_result() -> Trace:
    return Trace(id="r1", task=Task(query="q"), steps=[
        Step(index=0, agent="worker", kind=StepKind.tool_call, tool_name="search", tool_arguments={"q": "x"}),
        Step(index=1, agent="search", kind=StepKind.tool_result, role=StepRole.tool_result, tool_name="search",
             tool_result={"error": "bad query"}, error="bad query"),
        Step(index=2, agent="worker", kind=StepKind.final_answer, content="done"),
    ])


def test_a_label_takes_the_steps_agent_and_a_normalised_mode():
    gold = label_for(sample_trace(), 2, mode=" a.2 ", reason="misread the chart")
    assert (gold.step, gold.agent, gold.mode, gold.reason) == (2, "viewer", "A.2", "misread the chart")
    assert label_for(sample_trace(), 2, agent="planner").agent == "planner"


@pytest.mark.parametrize("kwargs, field, words", [
    ({"step": 4}, "step", "no step 4; the run has steps 0 to 3"),
    ({"step": -1}, "step", "no step -1"),
    ({"step": 1, "agent": "bob"}, "agent", "'bob' takes no part"),
    ({"step": 1, "mode": "Z.9"}, "mode", "unknown failure mode 'Z.9'"),
])
def test_a_label_that_does_not_fit_the_trace_names_the_field(kwargs, field, words):
    trace = sample_trace()
    with pytest.raises(InputError) as caught:
        label_for(trace, **kwargs)
    assert caught.value.field == field and words in str(caught.value) and trace.id in str(caught.value)


def test_a_run_that_succeeded_is_not_labelled():
    trace = sample_trace()
    trace.outcome.success = True
    with pytest.raises(InputError, match="the run succeeded") as caught:
        label_for(trace, 1)
    assert caught.value.field == "outcome"
    trace.outcome = None  # an imported run without an outcome may be labelled
    assert label_for(trace, 1).step == 1


def test_a_label_on_a_tool_result_points_to_its_call():
    trace = run_with_a_tool_result()
    assert decision_behind(trace, 1) == 0
    assert decision_behind(trace, 0) is None and decision_behind(trace, 2) is None


def test_the_store_sets_and_removes_a_label(store_target):
    store = open_store(store_target)
    trace = sample_trace().model_copy(update={"gold": None})
    store.save_trace(trace)
    gold = label_for(trace, 1, mode="A.2", reason="key sk-proj-abcdefghijklmnopqrstuv in the query")
    store.set_gold(trace.id, gold)
    stored = store.get_trace(trace.id)
    assert stored.gold.step == 1 and stored.gold.mode == "A.2"
    assert "abcdefghijklmnopqrstuv" not in stored.gold.reason  # redacted like everything stored
    assert stored.steps == trace.steps  # the run itself is untouched
    store.set_gold(trace.id, None)
    assert store.get_trace(trace.id).gold is None
    with pytest.raises(TraceNotFound):
        store.set_gold("no-such-run", gold)
    store.close()


def test_faultlens_traces_label(tmp_path):
    db = str(tmp_path / "l.db")
    store = open_store(db)
    trace = run_with_a_tool_result()
    store.save_trace(trace)

    def label(*args):
        result = CliRunner().invoke(cli, ["traces", "label", *args, "--db", db])
        result.text = " ".join(result.output.split())  # rich wraps long lines
        return result

    result = label(trace.id, "--step", "0", "--mode", "A.2", "--reason", "searched for the wrong thing")
    assert result.exit_code == 0 and "labelled r1: step 0 by worker, A.2" in result.text
    assert open_store(db).get_trace(trace.id).gold.reason == "searched for the wrong thing"

    result = label(trace.id, "--step", "1")
    assert result.exit_code == 0 and "label step 0, the decision it is about" in result.text

    result = label(trace.id, "--step", "9")
    assert result.exit_code != 0 and "no step 9" in result.text
    assert open_store(db).get_trace(trace.id).gold.step == 1  # a refused label leaves the stored one as it was

    assert label(trace.id, "--clear", "--step", "1").exit_code != 0
    assert label(trace.id, "--clear").exit_code == 0 and open_store(db).get_trace(trace.id).gold is None
    assert label(trace.id).exit_code != 0  # no --step
    assert "A.2" in CliRunner().invoke(cli, ["traces", "label", "--modes"]).output


def test_runs_are_listed_by_whether_they_are_labelled(store_target):
    store = open_store(store_target)
    labelled, unlabelled = sample_trace(), sample_trace().model_copy(update={"gold": None})
    store.save_traces([labelled, unlabelled])
    assert {s.id: s.labelled for s in store.list_traces()} == {labelled.id: True, unlabelled.id: False}
    assert [s.id for s in store.list_traces(labelled=True)] == [labelled.id]
    assert [s.id for s in store.list_traces(labelled=False, status="failed")] == [unlabelled.id]
    store.set_gold(labelled.id, None)
    assert store.list_traces(labelled=True) == []
    store.close()


def test_faultlens_traces_list_shows_and_filters_labels(tmp_path):
    db = str(tmp_path / "l.db")
    store = open_store(db)
    labelled, unlabelled = sample_trace(), sample_trace().model_copy(update={"gold": None})
    store.save_traces([labelled, unlabelled])
    out = CliRunner().invoke(cli, ["traces", "list", "--db", db, "--unlabelled", "--json"]).output
    assert [json.loads(line)["id"] for line in out.splitlines()] == [unlabelled.id]
    table = CliRunner().invoke(cli, ["traces", "list", "--db", db]).output
    assert "label" in table and "✓" in table
