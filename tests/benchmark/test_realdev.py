"""The real-trace importers (TRAIL, AgentRx tau-bench) on the real files in ../shared/realdev, and on broken copies."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from faultlens.benchmark.datasets import load_dataset
from faultlens.benchmark.trail import read_json_file, realdev_sides, realdev_split
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.trace import StepKind, StepRole
from faultlens.middleware.sources import load_traces

REALDEV = Path(__file__).resolve().parents[3] / "shared" / "realdev"
TRAIL, AGENTRX = REALDEV / "trail", REALDEV / "agentrx"
needs_realdev = pytest.mark.skipif(not TRAIL.is_dir() or not AGENTRX.is_dir(), reason="../shared/realdev is not there")


@needs_realdev
def test_trail_runs_map_through_the_openinference_span_mapping():
    traces = load_dataset(f"trail:{TRAIL}").traces()
    # 139 runs, 4 of them with no annotated error (not failures by TRAIL's labels).
    assert len(traces) == 135
    assert {t.source.subset for t in traces} == {"GAIA", "SWE"}
    for t in traces:
        assert t.source.format == "trail" and t.failed and t.gold.agent is None
        kinds = {s.kind for s in t.steps}
        assert StepKind.llm_call in kinds
        # TOOL spans are tool results (evidence), LLM spans decisions.
        assert all(s.role == StepRole.tool_result for s in t.steps if s.kind == StepKind.tool_call)
        assert all(s.role == StepRole.decision for s in t.steps if s.kind == StepKind.llm_call)
        info = t.metadata["trail"]
        assert t.gold.step in info["error_steps"]
        assert t.steps[t.gold.step].span_id == t.gold.native_step
        # The gold rule: the earliest error step of the highest impact present.
        best = next(i for i in ("HIGH", "MEDIUM", "LOW") if any(e["impact"] == i for e in info["errors"]))
        assert t.gold.step == min(e["step"] for e in info["errors"] if e["impact"] == best)
        assert t.task.query
    # The one annotation whose location is no span id is kept aside, not dropped silently.
    unlocated = [e for t in traces for e in t.metadata["trail"]["unlocated_errors"]]
    assert [e["location"] for e in unlocated] == ["Span ID not found for this shard"]


@needs_realdev
def test_trail_split_halves_are_disjoint_and_cover_the_set():
    train = {t.id for t in load_traces(f"trail:{TRAIL}:train")}
    holdout = {t.id for t in load_traces(f"trail:{TRAIL}:holdout")}
    assert train and holdout and not train & holdout
    assert len(train | holdout) == 135
    assert all(realdev_split(i.split("/")[-1]) == "holdout" for i in holdout - {"trail:GAIA/d7f2f823ff4d4d8bbec1039c6c302a06"})


@needs_realdev
@pytest.mark.parametrize("spec, size", [(f"trail:{TRAIL}", 135), (f"taubench:{AGENTRX}", 29)])
def test_runs_of_one_scenario_sit_on_one_side(spec, size):
    everything = load_dataset(spec).traces()
    sides = {}
    for sp in ("train", "holdout"):
        for t in load_dataset(f"{spec}:{sp}").traces():
            assert t.metadata["split"] == sp
            sides.setdefault(t.metadata["scenario"], set()).add(sp)
    assert len(everything) == size and all(len(s) == 1 for s in sides.values())
    # Some scenario has more than one run, or the test would prove nothing.
    assert len(sides) < size


def test_a_scenario_takes_the_side_of_its_first_run():
    ids = [f"run-{i}" for i in range(40)]
    alone = realdev_sides({i: i for i in ids})
    assert alone == {i: realdev_split(i) for i in ids}
    # Both halves occur among 40 ids, so grouping them all moves some runs.
    grouped = realdev_sides({i: "one task" for i in ids})
    assert set(alone.values()) == {"train", "holdout"}
    assert set(grouped.values()) == {realdev_split(min(ids))}


@needs_realdev
def test_taubench_messages_roles_and_root_cause_gold():
    traces = load_dataset(f"taubench:{AGENTRX}").traces()
    assert len(traces) == 29
    truth = {x["trajectory_id"]: x for x in read_json_file(AGENTRX / "tau_ground_truth.json.gz")}
    for t in traces:
        label = truth[int(t.task.id)]
        root = next(f for f in label["failures"] if f["failure_id"] == label["root_cause"]["failure_id"])
        assert t.gold.step == root["step_number"] - 1 and t.gold.agent == root["failed_agent"]
        assert t.steps[0].agent == "System" and t.steps[0].role == StepRole.control
        for s in t.steps:
            if s.agent == "Tool":
                assert s.kind == StepKind.tool_result and s.role == StepRole.tool_result
            else:
                assert s.role in (StepRole.decision, StepRole.control)
        assert any(s.kind == StepKind.tool_call and s.tool_name for s in t.steps)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@needs_realdev
def test_plain_json_files_are_read_too(tmp_path):
    root = _copy(AGENTRX, tmp_path / "agentrx")
    for gz in root.glob("*.json.gz"):
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    assert len(load_dataset(f"taubench:{root}").traces()) == 29


@needs_realdev
def test_taubench_bad_step_number_names_file_record_and_field(tmp_path):
    root = _copy(AGENTRX, tmp_path / "agentrx")
    path = root / "tau_ground_truth.json.gz"
    labels = json.loads(gzip.decompress(path.read_bytes()))
    labels[0]["failures"][0]["step_number"] = 999
    labels[0]["root_cause"]["failure_id"] = labels[0]["failures"][0]["failure_id"]
    path.write_bytes(gzip.compress(json.dumps(labels).encode()))
    with pytest.raises(InputError) as info:
        load_dataset(f"taubench:{root}").traces()
    message = str(info.value)
    assert "tau_ground_truth.json.gz" in message and f"trajectory_id {labels[0]['trajectory_id']}" in message
    assert "step_number" in message


@needs_realdev
def test_trail_bad_span_names_file_record_and_field(tmp_path):
    root = tmp_path / "trail"
    (root / "GAIA").mkdir(parents=True)
    shutil.copytree(TRAIL / "processed_annotations_gaia", root / "processed_annotations_gaia")
    run = sorted((TRAIL / "GAIA").glob("*.json.gz"))[0]
    data = json.loads(gzip.decompress(run.read_bytes()))
    data["spans"][0]["child_spans"][0]["duration"] = "ten seconds"
    (root / "GAIA" / run.name.removesuffix(".gz")).write_text(json.dumps(data))
    with pytest.raises(InputError) as info:
        load_dataset(f"trail:{root}").traces()
    message = str(info.value)
    assert run.name.removesuffix(".gz") in message and "spans[0].child_spans[0]" in message and "duration" in message


@needs_realdev
def test_trail_run_without_annotation_is_an_error(tmp_path):
    root = tmp_path / "trail"
    (root / "GAIA").mkdir(parents=True)
    (root / "processed_annotations_gaia").mkdir()
    run = sorted((TRAIL / "GAIA").glob("*.json.gz"))[0]
    shutil.copy(run, root / "GAIA" / run.name)
    with pytest.raises(InputError, match="no annotation file"):
        load_dataset(f"trail:{root}").traces()


def test_missing_directory_is_an_error(tmp_path):
    with pytest.raises(InputError, match="no such directory"):
        load_dataset(f"trail:{tmp_path / 'nope'}").traces()
    with pytest.raises(InputError, match="no such directory"):
        load_dataset(f"taubench:{tmp_path / 'nope'}").traces()


def test_a_tau_bench_scenario_is_its_user_else_the_run():
    from faultlens.benchmark.taubench import scenario

    assert scenario({"info": {"task": {"user_id": "yusuf_rossi_9620"}}}, "taubench:2/trial-2") == "tau-bench user yusuf_rossi_9620"
    # No usable user: the run is its own scenario (it keeps its by-run side).
    for run in ({}, {"info": None}, {"info": {"task": "x"}}, {"info": {"task": {"user_id": ""}}}, {"info": {"task": {"user_id": 7}}}):
        assert scenario(run, "taubench:9/trial-9") == "taubench:9/trial-9"
