"""`faultlens traces`, `attribute`, `lessons`, `bench` and `worker` with a postgresql:// URL, as --db and as $FAULTLENS_DB."""

from __future__ import annotations

import json
from itertools import islice

from click.testing import CliRunner

from faultlens.benchmark.datasets import load_dataset
from faultlens.cli import cli
from faultlens.middleware import open_store, write_jsonl
from tests.middleware.model.test_trace import sample_trace


def invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


def test_traces_attribute_lessons_and_worker_take_a_url(pg_url, tmp_path):
    trace = sample_trace()
    write_jsonl([trace], tmp_path / "runs.jsonl")
    result = invoke("traces", "import", str(tmp_path / "runs.jsonl"), "--db", pg_url)
    assert result.exit_code == 0 and "imported 1 trace(s)" in result.output and "postgresql://" in result.output

    listed = invoke("traces", "list", "--json", "--db", pg_url)
    assert [json.loads(line)["id"] for line in listed.output.splitlines()] == [trace.id]
    # $FAULTLENS_DB works the same way as --db.
    assert trace.id in invoke("traces", "list", "--json", env={"FAULTLENS_DB": pg_url}).output
    assert invoke("traces", "show", trace.id, "--db", pg_url).exit_code == 0

    result = invoke("attribute", trace.id, "--method", "heuristic", "--db", pg_url)
    assert result.exit_code == 0
    assert len(open_store(pg_url).attributions(trace.id)) == 1

    # A failed run queued in the store; `faultlens worker` attributes it and writes the lesson.
    store = open_store(pg_url)
    store.submit_job(trace.id)
    result = invoke("worker", "--db", pg_url, "--exit-when-idle", "--poll", "0.05")
    assert result.exit_code == 0, result.output
    job = store.get_job(trace.id)
    assert job.state == "done" and any(a.id == job.key for a in store.attributions(trace.id))
    lessons = invoke("lessons", "list", "--all", "--db", pg_url)
    assert lessons.exit_code == 0 and "1 lesson(s)" in lessons.output


def test_bench_runs_on_the_traces_of_a_postgresql_store(pg_url, tmp_path):
    traces = list(islice(load_dataset("bundled:test").traces(), 12))
    open_store(pg_url).save_traces(traces)
    result = invoke("bench", "run", "--dataset", f"store:{pg_url}", "--method", "heuristic", "--no-progress", "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert "12/12 trace(s) predicted" in result.output
