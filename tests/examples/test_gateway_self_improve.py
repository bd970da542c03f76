"""examples/gateway_self_improve.py runs offline through the gateway: tables per framework, lifts, a plot, the JSON."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gateway_self_improve.py"


@pytest.mark.skipif(__import__("importlib.util").util.find_spec("agents") is None, reason="needs openai-agents (the frameworks extra)")
def test_a_small_run_learns_through_the_gateway_and_reports(tmp_path):
    out = subprocess.run([sys.executable, str(EXAMPLE), "--envs", "agents_desk", "--seeds", "1", "--rounds", "3", "--tasks", "6",
                          "--workers", "1", "--plot", str(tmp_path / "plot.png"), "--json", str(tmp_path / "out.json")],
                         capture_output=True, text=True, timeout=600, check=True,
                         env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "160"}).stdout
    assert "OpenAI Agents SDK (agents_desk) through the gateway" in out and "lift over none" in out
    assert (tmp_path / "plot.png").stat().st_size > 10_000
    data = json.loads((tmp_path / "out.json").read_text())
    jobs = data["jobs"]
    assert set(jobs) == {f"agents_desk/{arm}/0" for arm in ("none", "terminal", "attribution", "oracle")}
    for job in jobs.values():
        assert job["calls"] == job["recorded"] > 0  # every call through the gateway became a step
    assert jobs["agents_desk/none/0"]["lessons"] == 0 and jobs["agents_desk/none/0"]["lessons_shown"] == 0
    assert jobs["agents_desk/oracle/0"]["lessons"] > 0 and jobs["agents_desk/oracle/0"]["lessons_shown"] > 0
    rates = data["results"]["agents_desk"]
    assert all(len(rates[arm][0]) == 3 and all(0 <= r <= 1 for r in rates[arm][0]) for arm in rates)
