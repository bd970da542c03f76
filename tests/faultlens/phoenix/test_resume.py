"""A Phoenix that goes down mid-sync loses nothing: the next sync goes on where the last one stopped (a real `phoenix serve`)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("phoenix.client", reason="needs the phoenix extra: pip install 'faultlens[phoenix]'")

from faultlens.middleware.store import open_store  # noqa: E402
from faultlens.phoenix.annotations import DECISIVE_ERROR, VERDICT  # noqa: E402
from faultlens.phoenix.client import PhoenixClient, PhoenixUnavailable  # noqa: E402
from faultlens.phoenix.failed import FailureRule  # noqa: E402
from faultlens.phoenix.state import SyncState  # noqa: E402
from faultlens.phoenix.sync import PhoenixSync  # noqa: E402

from .conftest import PROJECT, load_phoenix  # noqa: E402
from .server import PhoenixServer, require_phoenix  # noqa: E402

# Starting Phoenix takes most of a minute on a loaded 2-core machine (docs/phoenix.md, "Measured"), some tests start it three times.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_phoenix_that_goes_down_mid_sync_loses_nothing(tmp_path, framework_runs):
    server = PhoenixServer(require_phoenix(), tmp_path / "phoenix").start()
    try:
        failed = load_phoenix(server, framework_runs)
        total = sum(r.spans for r in framework_runs) + 3
        store = open_store(str(tmp_path / "faultlens.db"))
        state_path = tmp_path / "sync-state.json"

        def new_sync(progress=None) -> PhoenixSync:
            # a new process each time, as a rerun of the command would be: only the store and the state file carry over
            state = SyncState.load(state_path, url=server.url, project=PROJECT)
            client = PhoenixClient(server.url, retries=2, backoff=0)
            return PhoenixSync(client, store, PROJECT, state=state, rule=FailureRule.parse(["correctness=incorrect"]), page_size=20, progress=progress)

        # 1. Phoenix goes down while the spans are read: after the second page.
        def down_after_two_pages(stage, done, of):
            if stage == "spans" and done >= 40 and server.process is not None:
                server.stop()

        with pytest.raises(PhoenixUnavailable, match="did not answer"):
            new_sync(down_after_two_pages).run_once()
        saved = json.loads(state_path.read_text())
        assert saved["spans"] == 40 and saved["cursor"]
        assert all(store.attributions(t) == [] for t in failed)

        # 2. Back up; it goes down again while the verdicts are written: after the first run's.
        server.start()

        def down_after_one_run(stage, done, of):
            if stage == "annotate" and server.process is not None:
                server.stop()

        with pytest.raises(PhoenixUnavailable):
            new_sync(down_after_one_run).run_once()
        state = SyncState.load(state_path, url=server.url, project=PROJECT)
        assert state.spans == total  # the rest of the spans, none read twice
        assert len(state.in_phase("annotated")) == 1 and len(state.in_phase("failed")) == len(failed) - 1
        assert all(store.get_job(t).state == "done" for t in failed)

        # 3. Back up: the sync finishes the rest, and attributes nothing twice.
        server.start()
        summary = new_sync().run_once()
        assert (summary.spans, summary.failed, summary.annotations) == (0, 0, 2 * (len(failed) - 1))
        state = SyncState.load(state_path, url=server.url, project=PROJECT)
        assert sorted(state.in_phase("annotated")) == sorted(failed)
        for trace_id in failed:
            (attribution,) = store.attributions(trace_id)
            assert store.get_job(trace_id).runs == 1
        spans = server.wait_for_spans(PROJECT, total)
        found = [a for a in server.span_annotations(PROJECT, [s["context"]["span_id"] for s in spans]) if a["name"].startswith("faultlens.")]
        assert sorted((a["metadata"]["faultlens_run"], a["name"]) for a in found) == sorted((t, n) for t in failed for n in (DECISIVE_ERROR, VERDICT))
        for a in found:
            if a["name"] == DECISIVE_ERROR:
                (attribution,) = store.attributions(a["metadata"]["faultlens_run"])
                assert a["span_id"] == store.get_trace(attribution.trace_id).steps[attribution.step].span_id
    finally:
        server.stop()
