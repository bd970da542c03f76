"""docs/phoenix.md's three commands, as a Phoenix user runs them: start Phoenix, run the agents (examples/phoenix_agents.py), sync."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("phoenix.client", reason="needs the phoenix extra: pip install 'faultlens[phoenix]'")
pytest.importorskip("smolagents", reason="needs the frameworks extra: pip install 'faultlens[frameworks]'")

from tests.faultlens.phoenix.server import PhoenixServer, require_phoenix  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "phoenix_agents.py"
FAULTLENS = Path(sys.executable).with_name("faultlens")
# Starting Phoenix takes most of a minute on a loaded 2-core machine (docs/phoenix.md, "Measured"), some tests start it three times.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_start_phoenix_run_the_agents_sync(tmp_path):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    server = PhoenixServer(require_phoenix(), tmp_path / "phoenix").start()
    try:
        agents = subprocess.run([sys.executable, str(EXAMPLE), server.url, "--project", "agents"], capture_output=True, text=True,
                                timeout=300, env=env, check=True).stdout.splitlines()
        failed = [line.split()[0] for line in agents if line.endswith("correctness=incorrect")]
        assert failed and len(failed) < len(agents)
        sync = subprocess.run([str(FAULTLENS), "phoenix", "sync", server.url, "--project", "agents", "--failed-if", "correctness=incorrect",
                               "--db", str(tmp_path / "faultlens.db")], capture_output=True, text=True, timeout=300, env=env)
        assert sync.returncode == 0, sync.stderr
        assert re.search(rf"failed\s*│\s*{len(failed)}\s*│", sync.stdout), sync.stdout
        assert re.search(rf"annotations written\s*│\s*{2 * len(failed)}\s*│", sync.stdout), sync.stdout
        spans = httpx.get(f"{server.url}/v1/projects/agents/spans", params={"limit": 1000}).json()["data"]
        found = httpx.get(f"{server.url}/v1/projects/agents/span_annotations",
                          params={"span_ids": [s["context"]["span_id"] for s in spans], "limit": 1000}).json()["data"]
        blamed = {a["metadata"]["faultlens_run"] for a in found if a["name"] == "faultlens.decisive_error"}
        assert blamed == set(failed)
    finally:
        server.stop()
