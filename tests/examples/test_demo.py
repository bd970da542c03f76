"""`faultlens demo`: the bundled team offline, its failed run attributed and turned into a lesson."""

from click.testing import CliRunner

from faultlens.attributors.registry import DEFAULT_METHOD
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
    assert attribution.method == DEFAULT_METHOD and attribution.status.value == "ok"
    # the lookup of Munich failed at step 3 and the researcher's report went on without Munich: that report
    # (its model call or its returned output) is the decisive step, not the failed lookup nor the analyst's sum
    failed_lookup = next(s.index for s in failed.steps if s.failed)
    blamed = failed.steps[attribution.step]
    assert attribution.step > failed_lookup and attribution.agent == "researcher" == blamed.agent
    assert "Rome" in blamed.content and "Munich" not in blamed.content
    lessons = store.lessons()
    assert lessons and all(lesson.agent == attribution.agent and lesson.trace_id == failed.id for lesson in lessons)
    assert "attribution" in result.output and f"lesson for {attribution.agent}" in result.output


def test_the_demo_verdict_says_why_in_words_and_its_lesson_names_the_slip(tmp_path):
    """The why of the demo's verdict comes from the evidence: the failed Munich lookup the report leaves out."""
    db = tmp_path / "demo.db"
    assert invoke("demo", "--db", str(db)).exit_code == 0
    store = open_store(db)
    failed = store.get_trace(next(s.id for s in store.list_traces() if s.success is False))
    [attribution] = store.attributions(failed.id)
    lookup = next(s for s in failed.steps if s.failed)
    # the researcher's report is blamed, for leaving out the item whose lookup failed: not a wrong tool
    assert attribution.agent == "researcher" and "Rome" in failed.steps[attribution.step].content
    assert attribution.mode != "A.1" and attribution.mode == "V.3"
    assert "Munich" in attribution.reason and f"failed at step {lookup.index}" in attribution.reason
    assert lookup.tool_name in attribution.reason and "does not say so" in attribution.reason
    assert "content." not in attribution.reason and "z." not in attribution.reason  # no feature names for a person
    assert attribution.details["top_features"]  # ...they are kept for developers
    [lesson] = store.lessons()
    assert "Munich" in lesson.advice and "missing" in lesson.advice and "never leave it out" in lesson.advice
    assert lesson.advice != "Choose the tool or action that matches the current sub-goal; check the options before acting."
