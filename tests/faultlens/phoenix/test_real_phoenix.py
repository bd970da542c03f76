"""`faultlens phoenix sync` and the `phoenix:URL` source against a real Phoenix (`phoenix serve`, SQLite, loopback, offline).

The spans are smolagents' own OpenInference spans of the bundled `smol_analyst`
environment (seed runs and injected failures), sent to Phoenix's OTLP/HTTP
collector endpoint, plus one small run whose root span has status ERROR. The
failed smolagents runs are marked as an evaluation would: a trace annotation
`correctness=incorrect` (the successful ones get `correct`).
"""

from __future__ import annotations

import re
import time

import pytest

pytest.importorskip("phoenix.client", reason="needs the phoenix extra: pip install 'faultlens[phoenix]'")

from click.testing import CliRunner  # noqa: E402

from faultlens.cli import cli  # noqa: E402
from faultlens.middleware.otlp.convert import read_otlp_file  # noqa: E402
from faultlens.middleware.sources import load_traces  # noqa: E402
from faultlens.middleware.store import open_store  # noqa: E402
from faultlens.phoenix.annotations import DECISIVE_ERROR, VERDICT  # noqa: E402

from .conftest import PROJECT, load_phoenix  # noqa: E402
from .server import PhoenixServer, free_port, require_phoenix  # noqa: E402

# Starting Phoenix takes most of a minute on a loaded 2-core machine (docs/phoenix.md, "Measured"), some tests start it three times.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory, framework_runs):
    server = PhoenixServer(require_phoenix(), tmp_path_factory.mktemp("phoenix")).start()
    try:
        failed = load_phoenix(server, framework_runs)
        yield server, failed
    finally:
        server.stop()


def step_view(trace):
    return [(s.agent, s.kind.value, s.span_id, s.content, s.tool_name, s.error) for s in trace.steps]


def test_the_phoenix_source_reads_each_run_as_otlp_import_reads_its_spans(phoenix, framework_runs):
    server, failed = phoenix
    traces = {t.id: t for t in load_traces(f"phoenix:{server.url}?project={PROJECT}")}
    assert len(traces) == len(framework_runs) + 1
    for run in framework_runs:
        (expected,) = read_otlp_file(run.path)
        got = traces[run.trace_id]
        assert step_view(got) == step_view(expected), run.name
        assert [a.name for a in got.agents] == [a.name for a in expected.agents] == ["CodeAgent", "data_agent"]
        assert got.task.query == expected.task.query and got.task.query
    # a window that ends before the runs holds none of them
    assert list(load_traces(f"phoenix:{server.url}?project={PROJECT}&until=2000-01-01T00:00:00")) == []


def sync(server: PhoenixServer, db, *extra: str):
    args = ["phoenix", "sync", server.url, "--project", PROJECT, "--db", str(db), "--failed-if", "correctness=incorrect", "--page-size", "25", *extra]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.output


def summary_row(output: str, name: str) -> tuple[int, int]:
    m = re.search(rf"{name}\s*│\s*(\d+)\s*│\s*(\d+)", output)
    assert m, output
    return int(m.group(1)), int(m.group(2))


def faultlens_annotations(server: PhoenixServer) -> list[dict]:
    spans = server.wait_for_spans(PROJECT, 0)
    found = server.span_annotations(PROJECT, [s["context"]["span_id"] for s in spans])
    return [a for a in found if a["name"].startswith("faultlens.")]


def test_sync_attributes_each_failed_run_once_and_annotates_the_blamed_span(phoenix, framework_runs, tmp_path):
    server, failed = phoenix
    db = tmp_path / "faultlens.db"
    output = sync(server, db)
    assert summary_row(output, "spans")[0] == sum(r.spans for r in framework_runs) + 3
    assert summary_row(output, "runs seen")[0] == len(framework_runs) + 1
    assert summary_row(output, "failed")[0] == len(failed)
    assert summary_row(output, "attributed")[0] == len(failed)
    assert summary_row(output, "annotations written")[0] == 2 * len(failed)

    store = open_store(str(db))
    roots = {s["context"]["trace_id"]: s["context"]["span_id"] for s in server.wait_for_spans(PROJECT, 0) if not s["parent_id"]}
    annotations = faultlens_annotations(server)
    assert len(annotations) == 2 * len(failed)
    for trace_id in failed:
        (attribution,) = store.attributions(trace_id)  # attributed once, through the job queue
        job = store.get_job(trace_id)
        assert job.state == "done" and job.runs == 1
        assert store.get_outcome(trace_id).success is False
        trace = store.get_trace(trace_id)
        blamed = trace.steps[attribution.step].span_id
        mine = [a for a in annotations if a["metadata"]["faultlens_run"] == trace_id]
        (decisive,) = [a for a in mine if a["name"] == DECISIVE_ERROR]
        (verdict,) = [a for a in mine if a["name"] == VERDICT]
        assert decisive["span_id"] == blamed and decisive["result"]["label"] == attribution.mode
        assert decisive["result"]["score"] == pytest.approx(attribution.confidence)
        assert decisive["result"]["explanation"] == attribution.reason
        assert decisive["annotator_kind"] == verdict["annotator_kind"] == "CODE"  # blend calls no model
        assert decisive["metadata"]["method"] == "blend" and decisive["metadata"]["step"] == attribution.step
        assert verdict["span_id"] == roots[trace_id] and verdict["result"]["label"] == attribution.agent
    for run in framework_runs:
        if not run.failed:
            assert store.attributions(run.trace_id) == []  # a run Phoenix calls correct is not attributed
    # why each run failed is kept on its outcome
    error_run = next(t for t, why in failed.items() if why == "status ERROR")
    assert "status ERROR" in store.get_outcome(error_run).detail

    # A second sync: nothing new is read, attributed or written; the annotations are the same ones.
    again = sync(server, db)
    assert summary_row(again, "spans")[0] == 0 and summary_row(again, "attributed")[0] == 0
    assert summary_row(again, "annotations written") == (0, 2 * len(failed))
    assert sorted(a["id"] for a in faultlens_annotations(server)) == sorted(a["id"] for a in annotations)
    assert all(len(store.attributions(t)) == 1 for t in failed)


def test_a_wrong_project_url_or_dead_phoenix_is_a_clear_error(phoenix, tmp_path):
    server, _ = phoenix
    runner = CliRunner()
    wrong_project = runner.invoke(cli, ["phoenix", "sync", server.url, "--project", "nope", "--db", str(tmp_path / "a.db")])
    assert wrong_project.exit_code == 1
    assert f"no project 'nope' on Phoenix at {server.url}; projects there:" in wrong_project.output and PROJECT in wrong_project.output
    # Phoenix's web UI answers unknown paths with its HTML page
    not_api = runner.invoke(cli, ["phoenix", "sync", f"{server.url}/ui", "--project", PROJECT, "--db", str(tmp_path / "b.db")])
    assert not_api.exit_code == 1 and "is this a Phoenix server's base URL" in not_api.output
    started = time.monotonic()
    dead = runner.invoke(cli, ["phoenix", "sync", f"http://127.0.0.1:{free_port()}", "--db", str(tmp_path / "c.db"), "--retries", "2"])
    assert dead.exit_code == 1 and "did not answer" in dead.output and "run the same command again" in dead.output
    assert time.monotonic() - started < 30
    assert "Traceback" not in wrong_project.output + not_api.output + dead.output


@pytest.mark.browser
def test_screenshot_of_the_trace_view_with_the_verdict(phoenix, tmp_path):
    """Phoenix's own trace view, in headless Chromium, shows the annotations on the blamed and the root span."""
    from selenium.webdriver.common.by import By

    from tests.faultlens.server.browser import chrome, save_for_docs

    server, failed = phoenix
    db = tmp_path / "faultlens.db"
    sync(server, db)
    trace_id = next(t for t, why in failed.items() if why != "status ERROR")
    store = open_store(str(db))
    (attribution,) = store.attributions(trace_id)
    blamed = store.get_trace(trace_id).steps[attribution.step].span_id
    import httpx

    (span,) = httpx.get(f"{server.url}/v1/projects/{PROJECT}/spans", params={"span_id": blamed}).json()["data"]
    project_id = httpx.get(f"{server.url}/v1/projects/{PROJECT}").json()["data"]["id"]
    driver = chrome(tmp_path)
    try:
        driver.get(f"{server.url}/projects/{project_id}/traces/{trace_id}?selectedSpanNodeId={span['id']}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "faultlens.verdict" not in driver.find_element(By.TAG_NAME, "body").text:
            time.sleep(0.5)
        text = driver.find_element(By.TAG_NAME, "body").text
        assert "faultlens.verdict" in text and "faultlens.decisiv" in text
        assert trace_id in text
        time.sleep(1)  # let the span details finish rendering
        shot = tmp_path / "phoenix-trace-annotations.png"
        driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    assert shot.stat().st_size > 10_000
    save_for_docs(shot, "phoenix-trace-annotations.png")


def test_watch_attributes_runs_as_they_arrive_and_are_judged(phoenix, framework_runs, tmp_path):
    """`--watch`: runs sent after the sync started are read, judged (an evaluation may annotate them later) and written back."""
    import threading

    from faultlens.phoenix.client import PhoenixClient
    from faultlens.phoenix.failed import FailureRule
    from faultlens.phoenix.state import SyncState
    from faultlens.phoenix.sync import PhoenixSync, watch

    from .conftest import send_error_run
    from .server import read_json, with_new_ids

    server, _ = phoenix
    project = "watched"
    send_error_run(server, project)  # the project exists before the watch starts
    server.wait_for_spans(project, 3)
    store = open_store(str(tmp_path / "faultlens.db"))
    state = SyncState.load(tmp_path / "state.json", url=server.url, project=project)
    runner = PhoenixSync(PhoenixClient(server.url, retries=2, backoff=0), store, project, state=state,
                         rule=FailureRule.parse(["correctness=incorrect"]), recheck=True)
    stop, passes = threading.Event(), []
    thread = threading.Thread(target=watch, args=(runner,), kwargs={"interval": 0.2, "stop": stop, "on_pass": lambda s, e: passes.append((s, e))})
    thread.start()

    def wait_until(condition, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert condition(), {run_id: run.phase for run_id, run in state.runs.items()}

    try:
        wait_until(lambda: state.in_phase("annotated"))
        assert len(state.in_phase("annotated")) == 1  # the ERROR run, before anything else was sent
        failing = next(r for r in framework_runs if r.failed)
        passing = next(r for r in framework_runs if not r.failed)
        # (under new ids: the module's Phoenix holds these spans already, in another project)
        (failing_doc, failing_id), (passing_doc, passing_id) = with_new_ids(read_json(failing.path), 0x5A), with_new_ids(read_json(passing.path), 0x5A)
        for document in (failing_doc, passing_doc):
            server.send_otlp_json(document, project)
        assert len(server.wait_for_spans(project, 3 + failing.spans + passing.spans)) == 3 + failing.spans + passing.spans
        # the evaluation comes after the watch saw the runs complete (and found them not failed)
        wait_until(lambda: len(state.in_phase("ok")) == 2)
        server.annotate_trace(failing_id, "correctness", "incorrect")
        server.annotate_trace(passing_id, "correctness", "correct")
        wait_until(lambda: failing_id in state.in_phase("annotated"))
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert len(state.in_phase("annotated")) == 2 and state.runs[passing_id].phase == "ok"
    assert all(error is None for _, error in passes) and len(passes) >= 3
    (attribution,) = store.attributions(failing_id)
    assert attribution.step is not None


def test_p_failed_rule_fails_suspected_runs_and_writes_p_failed_on_each_root_span(phoenix, framework_runs, tmp_path):
    """`--failed-if 'p_failed>=X'`: the detector scores every run; each root span gets `faultlens.p_failed`, the runs at or
    above X are attributed like failed ones, the others are not (X is put between the runs' own scores)."""
    from faultlens.attributors.detect import Detector
    from faultlens.phoenix.annotations import P_FAILED

    from .server import read_json, with_new_ids

    server, _ = phoenix
    project = "detected"
    sent = [with_new_ids(read_json(run.path), 0x7D) for run in framework_runs]  # the module's Phoenix holds these ids already
    for document, _ in sent:
        server.send_otlp_json(document, project)
    spans = server.wait_for_spans(project, sum(r.spans for r in framework_runs))
    roots = {s["context"]["trace_id"]: s["context"]["span_id"] for s in spans if not s["parent_id"]}
    # The scores first (a dry sync with a bound no run meets), then a bound between them.
    db = tmp_path / "faultlens.db"
    args = ["phoenix", "sync", server.url, "--project", project, "--db", str(db), "--no-status-error"]
    dry = CliRunner().invoke(cli, [*args, "--failed-if", "p_failed>1", "--state", str(tmp_path / "dry.json")])
    assert dry.exit_code == 0, dry.output
    assert summary_row(dry.output, "failed")[0] == 0 and "p_failed written" in dry.output
    store = open_store(str(db))
    scores = {d.trace_id: d.p_failed for d in Detector().score([store.get_trace(t) for t in roots])}
    assert len(scores) == len(roots) and all(p is not None and 0 <= p <= 1 for p in scores.values())
    found = server.span_annotations(project, list(roots.values()))
    written = {a["span_id"]: a for a in found if a["name"] == P_FAILED}
    assert {span: a["result"]["score"] for span, a in written.items()} == pytest.approx({roots[t]: p for t, p in scores.items()})
    assert all(a["result"]["label"] == "ok" for a in written.values())

    bound = sorted(scores.values())[len(scores) // 2]
    result = CliRunner().invoke(cli, [*args, "--failed-if", f"p_failed>={bound}", "--state", str(tmp_path / "real.json")])
    assert result.exit_code == 0, result.output
    suspected = {t for t, p in scores.items() if p >= bound}
    assert summary_row(result.output, "failed")[0] == len(suspected) and 0 < len(suspected) < len(scores)
    found = server.span_annotations(project, list(roots.values()))
    labels = {a["span_id"]: a["result"]["label"] for a in found if a["name"] == P_FAILED}
    assert labels == {roots[t]: "failed" if t in suspected else "ok" for t in roots}
    for trace_id in roots:
        assert bool(store.attributions(trace_id)) == (trace_id in suspected)
        outcome = store.get_outcome(trace_id)
        assert (outcome is not None and "p_failed" in outcome.detail) == (trace_id in suspected)
