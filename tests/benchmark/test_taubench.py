"""`taubench:FILE.json`: tau-bench's published runs, every run with its outcome, `info` hidden from every method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultlens.benchmark.datasets import load_dataset
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.answer_key import attributor_view
from faultlens.attributors.detect import detector_view
from faultlens.attributors.prompt_text import render_steps

FIXTURE = Path(__file__).parent / "fixtures" / "taubench_runs" / "historical_trajectories.json"


def _info_values(value) -> list[str]:
    """Every string and number in an info record."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _info_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _info_values(v)]
    return [str(value)] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else []


def test_reads_every_run_with_its_outcome_and_id():
    traces = load_dataset(f"taubench:{FIXTURE}").traces()
    assert [t.id for t in traces] == ["taubench:0/trial-0", "taubench:0/trial-1", "taubench:7/trial-0"]
    assert [t.outcome.success for t in traces] == [True, False, False]
    assert traces[0].outcome.score == 1.0
    first = traces[0]
    assert first.task.query.startswith("Hi, please cancel my order #W1000")
    assert [s.agent for s in first.steps[:4]] == ["System", "User", "Assistant", "Tool"]
    assert first.steps[2].tool_name == "get_order_details" and first.steps[2].tool_arguments == {"order_id": "#W1000"}
    assert first.gold is None


def test_info_reaches_no_method():
    raw = json.loads(FIXTURE.read_text())
    secrets = {v for run in raw for v in _info_values(run.get("info", {}))}
    secrets = {s for s in secrets if s.startswith("SECRET") or s == "ava_lee_101"}  # values no message says
    assert "SECRET-INSTRUCTION-AVA cancel order #W1000" in secrets
    for trace in load_dataset(f"taubench:{FIXTURE}"):
        for view in (attributor_view(trace, with_reference=False), detector_view(trace)):
            dumped = view.model_dump_json()
            assert "SECRET-INSTRUCTION" not in dumped and "ava_lee_101" not in dumped and "reward_info" not in dumped
            prompt = view.task.query + "\n" + render_steps(view.steps, 10_000)
            assert not any(secret in prompt for secret in secrets), prompt
    # the record is kept, as an answer key, on the trace itself (provenance), and only there
    assert "SECRET-INSTRUCTION" in load_dataset(f"taubench:{FIXTURE}").traces()[0].model_dump_json()


@pytest.mark.parametrize(("runs", "record", "field"), [
    ([{"task_id": 1, "trial": 0, "reward": 1.0, "traj": "no"}], "[0] (task_id 1)", "traj"),
    ([{"task_id": 1, "trial": 0, "reward": "high", "traj": []}], "[0] (task_id 1)", "reward"),
    ([{"trial": 0, "reward": 1.0, "traj": []}], "[0]", "task_id"),
    ([{"task_id": 1, "reward": 1.0, "traj": [{"role": "user", "content": "x"}]}], "[0] (task_id 1)", "trial"),
    ([{"task_id": 1, "trial": 0, "reward": 0, "traj": [{"role": "robot", "content": "x"}]}], "[0] (task_id 1), traj[0]", "role"),
    ([{"task_id": 1, "trial": 0, "reward": 0, "info": [1], "traj": [{"role": "user", "content": "x"}]}], "[0] (task_id 1)", "info"),
])
def test_malformed_input_names_file_record_and_field(tmp_path, runs, record, field):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    with pytest.raises(InputError) as caught:
        load_dataset(f"taubench:{path}").traces()
    assert caught.value.source == str(path) and caught.value.record == record and caught.value.field == field


def test_not_a_list_and_not_json(tmp_path):
    path = tmp_path / "runs.json"
    path.write_text('{"task_id": 1}')
    with pytest.raises(InputError, match="expected a list of runs"):
        load_dataset(f"taubench:{path}").traces()
    path.write_text("[{")
    with pytest.raises(InputError, match="not valid JSON"):
        load_dataset(f"taubench:{path}").traces()
