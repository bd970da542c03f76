"""Failure patterns over a store (SQLite and PostgreSQL): grouping, trend, examples, the lesson and its measured effect;
the CLI, the API, the page and the runs list filtered by a pattern; the page in headless Chromium."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from faultlens.cli import cli
from faultlens.feedback.patterns import MIN_RUNS, find_patterns, signature_of
from faultlens.middleware.model.trace import Attribution, Lesson, Outcome, Step, StepKind, Task, Trace
from faultlens.middleware.store import open_store
from faultlens.server import create_app

DAY = 86400.0
T0 = 1_790_000_000.0


def run(run_id: str, *, failed: bool | None, created: float, lessons: tuple[str, ...] = (), tool: str = "lookup") -> Trace:
    steps = [Step(index=0, agent="planner", kind=StepKind.message, content="plan: look it up"),
             Step(index=1, agent="researcher", kind=StepKind.tool_call, tool_name=tool, content=f"{tool}(x)", lessons=list(lessons)),
             Step(index=2, agent="writer", kind=StepKind.final_answer, content="42")]
    outcome = None if failed is None else Outcome(success=not failed)
    return Trace(id=run_id, task=Task(query="How many?"), steps=steps, outcome=outcome, created_at=created)


def blame(run_id: str, step: int, agent: str, mode: str, kind: str | None = None) -> Attribution:
    evidence = [{"kind": kind, "mode": mode, "steps": [step], "text": "t", "advice": "a", "items": []}] if kind else []
    return Attribution(trace_id=run_id, method="blend", agent=agent, step=step, mode=mode, reason=f"{agent} slipped",
                       details={"evidence": evidence})


@pytest.fixture
def store(store_target):
    store = open_store(store_target)
    # 6 runs where the researcher repeats its lookup (A.6), over three days; 2 where the writer miscalculates (R.3).
    for i in range(6):
        store.save_trace(run(f"rep-{i}", failed=True, created=T0 + (i % 3) * DAY + i))
        store.save_attribution(blame(f"rep-{i}", 1, "researcher", "A.6", "repeats"))
    for i in range(2):
        store.save_trace(run(f"calc-{i}", failed=True, created=T0 + i))
        store.save_attribution(blame(f"calc-{i}", 2, "writer", "R.3"))
    store.save_trace(run("unattributed", failed=True, created=T0))  # no verdict: in no pattern
    lesson = Lesson(id="L1", agent="researcher", mode="A.6", situation="s", mistake="m", advice="do not repeat a lookup",
                    attribution_id=store.attributions("rep-0")[-1].id, created_at=T0 + 3 * DAY, shown=7)
    store.save_lesson(lesson)
    # After the lesson: 7 runs shown it (1 failed), 5 not shown it (3 failed).
    for i in range(7):
        store.save_trace(run(f"shown-{i}", failed=i == 0, created=T0 + 4 * DAY + i, lessons=("L1",)))
    for i in range(5):
        store.save_trace(run(f"unshown-{i}", failed=i < 3, created=T0 + 4 * DAY + i))
    yield store
    store.close()


def test_patterns_group_by_agent_mode_and_evidence_with_trend_and_lesson_effect(store):
    found = find_patterns(store)
    top = found[0]
    assert top.key == "researcher|A.6|repeats:lookup" and top.count == 6 and top.title() == "researcher · A.6 · repeats:lookup"
    assert top.per_day == {"2026-09-21": 2, "2026-09-22": 2, "2026-09-23": 2}
    assert top.first_seen == T0 and top.last_seen == T0 + 2 * DAY + 5 and len(top.examples) == 3
    assert top.share == pytest.approx(6 / 8)  # of the attributed failed runs (the unshown-* runs failed with no verdict)
    assert top.lesson is not None and top.lesson.id == "L1"
    effect = top.effect
    assert (effect.shown_runs, effect.shown_failed, effect.unshown_runs, effect.unshown_failed) == (7, 1, 5, 3)
    assert effect.enough and "14% of 7 runs shown it against 60% of 5" in effect.sentence()
    writer = next(p for p in found if p.agent == "writer")
    assert writer.signature == "final_answer" and writer.count == 2 and writer.lesson is None


def test_an_effect_below_the_floor_says_too_few_runs(store):
    for i in range(5 - MIN_RUNS + 1):
        store.delete_trace(f"unshown-{i}")
    effect = find_patterns(store)[0].effect
    assert not effect.enough and effect.sentence().startswith("too few runs")


def test_since_and_suspected_runs(store):
    assert [p.count for p in find_patterns(store, since=T0 + DAY)][:1] == [4]
    store.save_trace(run("maybe", failed=None, created=T0))
    store.save_attribution(blame("maybe", 1, "researcher", "A.6", "repeats"))
    top = find_patterns(store, suspected=["maybe"])[0]
    assert top.count == 7 and top.suspected == 1


def test_signature_names_the_tool_the_evidence_points_at():
    trace = run("x", failed=True, created=T0)
    llm = trace.steps[0]
    assert signature_of(trace, blame("x", 0, "planner", "V.3", None)) == llm.kind.value
    pointed = Attribution(trace_id="x", method="m", agent="planner", step=0, mode="V.3",
                          details={"evidence": [{"kind": "dropped_after_failure", "steps": [1]}]})
    assert signature_of(trace, pointed) == "dropped_after_failure:lookup"


def test_cli_api_page_and_runs_filter(store, store_target):
    result = CliRunner().invoke(cli, ["patterns", "--db", store_target, "--json"])
    assert result.exit_code == 0, result.output
    assert [p["count"] for p in json.loads(result.output)] == [6, 2]
    table = CliRunner().invoke(cli, ["patterns", "--db", store_target])
    assert "researcher" in table.output and "2 pattern(s) over 8" in table.output
    client = TestClient(create_app(store, workers=0), base_url="http://127.0.0.1")
    api = client.get("/api/patterns").json()
    assert api[0]["key"] == "researcher|A.6|repeats:lookup" and api[0]["effect"]["enough"] is True
    page = client.get("/patterns").text
    assert 'class="sparkline"' in page and "do not repeat a lookup" in page and "60% of 5" in page
    runs = client.get("/", params={"pattern": "writer|R.3|final_answer"}).text
    assert "calc-0" in runs and "calc-1" in runs and "rep-0" not in runs


@pytest.mark.browser
def test_the_patterns_page_in_chromium(store, tmp_path):
    from selenium.webdriver.common.by import By

    from faultlens.server.run import ServerThread
    from tests.faultlens.server.browser import chrome

    driver = chrome(tmp_path)
    try:
        with ServerThread(create_app(store, workers=0)) as server:
            driver.get(server.url + "/patterns")
            rows = driver.find_elements(By.CSS_SELECTOR, "table#patterns tr.pattern")
            assert [r.get_attribute("data-key") for r in rows] == ["researcher|A.6|repeats:lookup", "writer|R.3|final_answer"]
            bars = rows[0].find_elements(By.CSS_SELECTOR, "svg.sparkline rect")
            assert len(bars) == 3 and bars[0].size["height"] > 0
            driver.save_screenshot(str(tmp_path / "patterns.png"))
            rows[1].find_element(By.CSS_SELECTOR, "td.num a").click()
            assert driver.find_element(By.ID, "pattern-filter").is_displayed()
            assert len(driver.find_elements(By.CSS_SELECTOR, "table#runs tr.run")) == 2
    finally:
        driver.quit()
