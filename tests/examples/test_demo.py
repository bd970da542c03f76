"""`faultlens demo`: the bundled team offline, its failed run attributed and turned into a lesson."""

from click.testing import CliRunner

from faultlens.middleware import open_store
from faultlens.cli import cli


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_demo_runs_offline_and_stores_a_failed_and_a_succeeded_trace(tmp_path):
    db = tmp_path / "demo.db"
    result = invoke("demo", "--db", str(db))
    assert result.exit_code == 0, result.output
    summaries = open_store(db).list_traces()
    assert sorted(s.success for s in summaries) == [False, True]
    failed = open_store(db).get_trace(next(s.id for s in summaries if s.success is False))
    # the failed run shows the tool error and the wrong final answer
    assert [s.tool_name for s in failed.steps if s.failed] == ["lookup_population"]
    assert failed.steps[-1].kind.value == "final_answer" and "2761" in failed.steps[-1].content
    assert {s.agent for s in failed.steps} == {"planner", "researcher", "analyst"}
    assert "no entry for 'Munich'" in result.output and "failed" in result.output

    # ...and ends with the offline attribution of that run and a lesson for the blamed agent
    store = open_store(db)
    [attribution] = store.attributions(failed.id)
    assert attribution.method == "learned" and attribution.status.value == "ok"
    # the lookup of Munich failed at step 3 and the researcher's report went on without Munich: that report
    # (its model call or its returned output) is the decisive step, not the failed lookup nor the analyst's sum
    failed_lookup = next(s.index for s in failed.steps if s.failed)
    blamed = failed.steps[attribution.step]
    assert attribution.step > failed_lookup and attribution.agent == "researcher" == blamed.agent
    assert "Rome" in blamed.content and "Munich" not in blamed.content
    lessons = store.lessons()
    assert lessons and all(lesson.agent == attribution.agent and lesson.trace_id == failed.id for lesson in lessons)
    assert "attribution" in result.output and f"lesson for {attribution.agent}" in result.output
