"""The server-rendered pages (without a browser): order, filters, reports, media, lessons."""

from __future__ import annotations

import base64
import re

from faultlens.middleware.model.trace import Attribution, Lesson, Media, Outcome, Step, Task, Trace
from faultlens.server import create_app

from .conftest import HTTP

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_runs_list_puts_failed_runs_first_and_filters(store, serve):
    ok = Trace(task=Task(query="ok run"), steps=[Step(index=0, agent="a")], outcome=Outcome(success=True), created_at=3000.0)
    failed = Trace(task=Task(query="failed run"), steps=[Step(index=0, agent="b")], outcome=Outcome(success=False), created_at=1000.0)
    pending = Trace(task=Task(query="pending <script>alert(1)</script>"), steps=[Step(index=0, agent="a")], created_at=2000.0)
    store.save_traces([ok, failed, pending])
    server = serve(create_app(store))
    html = HTTP.get(server.url + "/").text
    assert re.findall(r'data-run="([0-9a-f]+)"', html) == [failed.id, pending.id, ok.id]
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html  # task text is escaped
    assert re.findall(r'data-run="([0-9a-f]+)"', HTTP.get(server.url + "/?agent=a").text) == [pending.id, ok.id]
    assert re.findall(r'data-run="([0-9a-f]+)"', HTTP.get(server.url + "/?status=failed").text) == [failed.id]
    store.save_attribution(Attribution(trace_id=failed.id, method="m", agent="b", step=0, mode="R.2"))
    assert "b @ step 0 · R.2" in HTTP.get(server.url + "/").text and "conf " not in HTTP.get(server.url + "/").text
    store.save_attribution(Attribution(trace_id=failed.id, method="m", agent="b", step=0, mode="R.2", confidence=0.125))
    assert "conf 0.12" in HTTP.get(server.url + "/").text  # low confidence: a verdict worth a person's label


def test_trace_page_shows_blame_candidates_and_media(store, serve, tmp_path):
    media_root = tmp_path / "media"
    media_root.mkdir()
    (media_root / "frame.png").write_bytes(PNG)
    (tmp_path / "secret.png").write_bytes(PNG)
    trace = Trace(
        task=Task(query="what is in the picture?"),
        steps=[
            Step(index=0, agent="looker", content="I see a cat", media=[Media(mime_type="image/png", path=str(media_root / "frame.png")), Media(mime_type="image/png", path=str(tmp_path / "secret.png"))]),
            Step(index=1, agent="answerer", kind="final_answer", content="a dog"),
        ],
        outcome=Outcome(success=False),
    )
    store.save_trace(trace)
    store.save_attribution(Attribution(trace_id=trace.id, method="m", agent="looker", step=0, mode="P.1", reason="a cat was called a dog", ranking=[]))
    server = serve(create_app(store, media_root=media_root))
    html = HTTP.get(f"{server.url}/runs/{trace.id}").text
    assert 'class="step blamed' in html and 'id="step-0"' in html
    assert "P.1 visual misidentification" in html and "a cat was called a dog" in html
    # The image under the media root is served; the one outside it is only named.
    assert f'src="/media/{trace.id}/0/0"' in html
    assert f"/media/{trace.id}/0/1" not in html and "secret.png" in html
    image = HTTP.get(f"{server.url}/media/{trace.id}/0/0")
    assert image.status_code == 200 and image.content == PNG
    assert HTTP.get(f"{server.url}/media/{trace.id}/0/1").status_code == 404
    assert HTTP.get(f"{server.url}/runs/nope").status_code == 404


def test_reports_page_renders_a_bench_report_directory(store, serve, tmp_path):
    reports = tmp_path / "report"
    reports.mkdir()
    (reports / "report.md").write_text(
        "# faultlens benchmark report\n\nDatasets: `bundled:test`.\n\n"
        "| method | step accuracy |\n| --- | --- |\n| heuristic | 0.41 [0.30, 0.52] |\n| random step | 0.12 |\n\n"
        "## Plots\n\n![step_accuracy](step_accuracy.png)\n",
        encoding="utf-8",
    )
    (reports / "step_accuracy.png").write_bytes(PNG)
    (reports / "per_trace.csv").write_text("trace,correct\nt1,1\nt2,0\n", encoding="utf-8")
    (reports / "report.json").write_text("{}", encoding="utf-8")
    (tmp_path / "private.txt").write_text("not for the web", encoding="utf-8")
    server = serve(create_app(store, reports_dir=reports))
    html = HTTP.get(server.url + "/reports").text
    assert "<th>step accuracy</th>" in html and "<td>0.41 [0.30, 0.52]</td>" in html
    assert html.count('src="/reports/files/step_accuracy.png"') == 1  # shown once, where report.md puts it
    assert "<td>t2</td>" in html and 'href="/reports/files/report.json"' in html
    assert HTTP.get(server.url + "/reports/files/step_accuracy.png").content == PNG
    assert HTTP.get(server.url + "/reports/files/../private.txt").status_code == 404
    assert HTTP.get(server.url + "/reports/files/%2e%2e/private.txt").status_code == 404
    unconfigured = serve(create_app(store))
    assert "No reports directory configured" in HTTP.get(unconfigured.url + "/reports").text


def test_lessons_page_shows_the_track_record(store, serve):
    store.save_lesson(Lesson(agent="solver", mode="A.2", situation="calculator use", mistake="wrong operand", advice="copy operands", shown=4, helped=3, failed=1))
    store.save_lesson(Lesson(agent="old", situation="s", mistake="m", advice="retired advice", retired=True))
    server = serve(create_app(store))
    html = HTTP.get(server.url + "/lessons").text
    assert "copy operands" in html and "75%" in html and "A.2 wrong tool parameters" in html
    assert "retired advice" not in html
    assert "retired advice" in HTTP.get(server.url + "/lessons?retired=1").text


def test_the_label_form_stores_a_label_and_the_page_shows_it(store, serve):
    trace = Trace(task=Task(query="q"), outcome=Outcome(success=False),
                  steps=[Step(index=0, agent="planner", content="plan"), Step(index=1, agent="solver", kind="final_answer", content="41")])
    store.save_trace(trace)
    store.save_attribution(Attribution(trace_id=trace.id, method="m", agent="solver", step=1, mode="R.2"))
    server = serve(create_app(store))
    html = HTTP.get(f"{server.url}/runs/{trace.id}").text
    assert "No label yet" in html and '<option value="1" selected>' in html  # the form starts at the blamed step

    r = HTTP.post(f"{server.url}/runs/{trace.id}/label", data={"step": "0", "mode": "PL.1", "reason": "planned the wrong sum"},
                  follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/runs/{trace.id}#label"
    gold = store.get_trace(trace.id).gold
    assert (gold.step, gold.agent, gold.mode, gold.reason) == (0, "planner", "PL.1", "planned the wrong sum")
    html = HTTP.get(f"{server.url}/runs/{trace.id}").text
    assert 'id="gold-line"' in html and "planned the wrong sum" in html

    assert HTTP.post(f"{server.url}/runs/{trace.id}/label", data={"step": "5"}).status_code == 422
    assert HTTP.post(f"{server.url}/runs/{trace.id}/label", data={"mode": "A.2"}).status_code == 422
    assert store.get_trace(trace.id).gold.step == 0
