"""Dataset loaders: every format and variant maps to the expected steps and gold labels,
bad input names the file and the field, and input files are never modified."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultlens.benchmark import datasets, load_dataset
from faultlens.benchmark.datasets import load_bundled_spec
from faultlens.middleware.errors import InputError
from faultlens.middleware.jsonl import write_jsonl
from faultlens.middleware.model.trace import StepKind

from .conftest import FIXTURES, synthetic_traces

WHOWHEN = FIXTURES / "whowhen"
PRO = FIXTURES / "whowhenpro"


def _digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _by_id(spec: str) -> dict:
    return {t.id: t for t in load_dataset(spec)}


# -- Who&When -------------------------------------------------------------------


def test_whowhen_subsets_agents_and_gold():
    before = _digest(WHOWHEN)
    traces = _by_id(f"whowhen:{WHOWHEN}")
    assert set(traces) == {"whowhen:Hand-Crafted/1", "whowhen:Algorithm-Generated/7"}

    hand = traces["whowhen:Hand-Crafted/1"]
    assert hand.source.subset == "Hand-Crafted" and hand.source.format == "whowhen"
    assert len(hand.steps) == 12
    # Without a `name`, the agent is the role, parenthetical included.
    assert [s.agent for s in hand.steps[:4]] == ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer"]
    assert hand.steps[0].kind is StepKind.human
    assert [s.native_id for s in hand.steps] == [str(i) for i in range(12)]
    assert hand.gold.step == 1 and hand.gold.native_step == "1" and hand.gold.agent == "Orchestrator"
    assert hand.task.reference_answer == "3" and hand.task.id == "q-hc-1"  # from "groundtruth", as Hand-Crafted spells it
    assert hand.failed

    algo = traces["whowhen:Algorithm-Generated/7"]
    # With a `name`, the name wins over the role ("user"/"assistant").
    assert [s.agent for s in algo.steps] == ["Planner", "Calculator_Expert", "Verifier", "Planner"]
    assert algo.gold.step == 1 and algo.gold.agent == "Calculator_Expert" and algo.gold.mode is None
    assert {a.name for a in algo.agents} >= {"Planner", "Calculator_Expert", "Verifier"}
    assert algo.task.reference_answer == "33.75"
    assert _digest(WHOWHEN) == before


def test_whowhen_one_subset_folder_keeps_its_subset():
    (trace,) = load_dataset(f"whowhen:{WHOWHEN / 'Hand-Crafted'}")
    assert trace.source.subset == "Hand-Crafted" and trace.source.framework == "magentic-one"


def _copy_whowhen(tmp_path: Path, **changes) -> Path:
    data = json.loads((WHOWHEN / "Algorithm-Generated" / "7.json").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    folder = tmp_path / "ww"
    folder.mkdir(exist_ok=True)
    (folder / "bad.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"mistake_step": "two"}, "mistake_step", "not an integer"),
    ({"mistake_step": "9"}, "mistake_step", "outside"),
    ({"mistake_agent": None}, "mistake_agent", "missing"),
    ({"history": "not a list"}, "history", "expected list"),
    ({"history": [{"content": "hi"}]}, "role", "name"),
])
def test_whowhen_malformed_names_file_and_field(tmp_path, changes, field, words):
    folder = _copy_whowhen(tmp_path, **changes)
    with pytest.raises(InputError) as err:
        list(load_dataset(f"whowhen:{folder}"))
    assert str(folder / "bad.json") in str(err.value)
    assert err.value.field == field
    assert words in str(err.value)


def test_whowhen_invalid_json_and_missing_dir(tmp_path):
    (tmp_path / "x.json").write_text("{ nope")
    with pytest.raises(InputError, match=r"x\.json.*not valid JSON"):
        list(load_dataset(f"whowhen:{tmp_path}"))
    with pytest.raises(InputError, match="no such directory"):
        list(load_dataset(f"whowhen:{tmp_path / 'absent'}"))


# -- Who&When Pro -----------------------------------------------------------------


def test_whowhenpro_chat_messages_with_tool_calls_and_frames():
    before = _digest(PRO)
    t = _by_id(f"whowhenpro:{PRO}")["wwp-chat-video-1"]
    assert t.source.modality == "video" and t.source.framework == "openai-agents" and t.source.benchmark == "videoqa"
    assert t.source.subset == "multimodal"
    assert [s.kind for s in t.steps] == [StepKind.message, StepKind.human, StepKind.tool_call, StepKind.tool_result, StepKind.message]
    assert [s.agent for s in t.steps] == ["system", "user", "assistant", "tool", "assistant"]
    call = t.steps[2]
    assert call.tool_name == "sample_frames" and call.tool_arguments == {"every_s": 0.5}
    assert t.steps[3].tool_name == "sample_frames"
    frames = t.steps[1].media
    assert [m.frame_index for m in frames] == [0, 1] and frames[1].timestamp_s == 0.5
    assert all(Path(m.path).is_file() and m.mime_type == "image/png" for m in frames)
    assert t.task.options == ["0", "1", "2"] and t.task.reference_answer == "1"
    assert t.gold.step == 4 and t.gold.native_step == "4" and t.gold.agent is None and t.gold.mode == "P.3"
    assert _digest(PRO) == before


def test_whowhenpro_planning_action_entries_with_hierarchical_ids():
    t = _by_id(f"whowhenpro:{PRO}")["wwp-smol-image-1"]
    assert [s.native_id for s in t.steps] == ["1", "1.1", "1.2", "1.10", "2"]
    assert [s.kind for s in t.steps] == [StepKind.plan, StepKind.tool_call, StepKind.tool_call, StepKind.tool_call, StepKind.final_answer]
    assert {s.agent for s in t.steps} == {"CodeAgent"}  # the one declared agent
    assert t.steps[1].tool_name == "python" and t.steps[1].tool_arguments.startswith("crop(")
    assert t.steps[1].tool_result == "cropped region is empty"
    assert t.steps[2].error == "ValueError: empty region" and t.steps[2].failed
    assert Path(t.steps[1].media[0].path).name == "chart.png"
    inline = t.steps[3].media[0]
    assert inline.data and inline.mime_type == "image/png"  # sniffed from the bytes
    # "1.1" is step index 1, not "1.10" (index 3): ids are matched exactly.
    assert t.gold.native_step == "1.1" and t.gold.step == 1
    assert t.task.attachments[0].path.endswith("chart.png")


def test_whowhenpro_agent_turns_with_round_and_position():
    t = _by_id(f"whowhenpro:{PRO}")["wwp-debate-1"]
    assert [s.native_id for s in t.steps] == ["0:0", "0:1", "1:0", "1:1", "2:0"]
    assert [s.agent for s in t.steps] == ["Solver", "Critic", "Solver", "Critic", "Judge"]
    assert t.steps[3].metadata == {"role": "critic", "round": 1, "position": 1}
    assert t.gold.step == 3 and t.gold.native_step == "1:1" and t.gold.agent == "Critic" and t.gold.mode == "R.3"
    assert t.metadata["topology"]["type"] == "debate"
    assert t.multi_agent and t.source.subset is None


def test_whowhenpro_inline_base64_content_parts():
    t = _by_id(f"whowhenpro:{PRO}")["wwp-chat-inline-1"]
    assert t.steps[0].content == "Which colour is the square?"
    assert t.steps[0].media[0].mime_type == "image/png" and t.steps[0].media[0].data.startswith("iVBOR")
    assert [s.agent for s in t.steps] == ["user", "Describer", "Answerer"]
    assert t.task.attachments[0].data and t.task.attachments[0].mime_type == "image/png"
    assert t.gold.agent == "Describer" and t.gold.step == 1


def _pro_copy(tmp_path: Path, name: str, edit) -> Path:
    folder = tmp_path / "pro"
    shutil.copytree(PRO / "multimodal", folder)
    path = folder / name
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    for other in folder.glob("*.json"):
        if other != path:
            other.unlink()
    return path


def _unknown_entry(d):
    d["trajectory"][2] = {"speaker": "x", "text": "?"}


def _missing_gold_step(d):
    d["ground_truth"]["step"] = "3.7"


def _bad_mode(d):
    d["ground_truth"]["mode"] = "Z.9"


def _missing_image(d):
    d["trajectory"][1]["frames"][0] = "img/nowhere.png"


def _bad_base64(d):
    d["trajectory"][3]["observation_images"] = [{"data": "@@not base64@@"}]


def _duplicate_ids(d):
    d["trajectory"][2]["step_number"] = "1.1"


def _bad_kind(d):
    d["trajectory"][0]["kind"] = "narrator"


def _no_trajectory(d):
    del d["trajectory"]


def _bad_modality(d):
    d["modality"] = "audio"


def _stranger_agent(d):
    d["ground_truth"]["agent"] = "Nobody"


@pytest.mark.parametrize(("name", "edit", "record", "field", "words"), [
    ("chat_video.json", _unknown_entry, "trajectory[2]", None, "unknown trajectory entry shape"),
    ("smol_image.json", _missing_gold_step, None, "ground_truth.step", "no trajectory entry has step id '3.7'"),
    ("smol_image.json", _bad_mode, None, "ground_truth.mode", "not a taxonomy code"),
    ("chat_video.json", _missing_image, "trajectory[1]", "frames[0]", "image file not found"),
    ("smol_image.json", _bad_base64, "trajectory[3]", "observation_images[0]", "not valid base64"),
    ("smol_image.json", _duplicate_ids, "trajectory[2]", "step", "repeats"),
    ("chat_video.json", _bad_kind, "trajectory[0]", "kind", "unknown message kind"),
    ("chat_video.json", _no_trajectory, None, "trajectory", "missing"),
    ("chat_video.json", _bad_modality, None, "modality", "audio"),
    ("chat_inline.json", _stranger_agent, None, "ground_truth.agent", "produced no step"),
])
def test_whowhenpro_malformed_names_file_entry_and_field(tmp_path, name, edit, record, field, words):
    path = _pro_copy(tmp_path, name, edit)
    with pytest.raises(InputError) as err:
        list(load_dataset(f"whowhenpro:{path.parent}"))
    assert err.value.source == str(path)
    assert err.value.record == record
    assert err.value.field == field
    assert words in str(err.value)


# -- bundled, jsonl, the sources registry ---------------------------------------------


def test_bundled_not_built_says_how_to_build(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "DATA_DIR", tmp_path)
    for spec in ("bundled", "bundled:test", "bundled:dev", "bundled:test:qa-team"):
        with pytest.raises(InputError, match=r"not built.*faultlens bench build"):
            list(load_dataset(spec))


def test_bundled_splits_and_environments(tmp_path, monkeypatch):
    traces = synthetic_traces(12)
    write_jsonl(traces[:4], tmp_path / "dev.jsonl.gz")
    write_jsonl(traces[4:], tmp_path / "test.jsonl.gz")
    monkeypatch.setattr(datasets, "DATA_DIR", tmp_path)
    assert len(list(load_dataset("bundled"))) == 12
    assert [t.id for t in load_dataset("bundled:dev")] == [t.id for t in traces[:4]]
    test_ids = [t.id for t in load_dataset("bundled:test:csv-code")]
    assert test_ids == [t.id for t in traces[4:] if t.source.benchmark == "csv-code"] and test_ids
    assert datasets.available_environments("test") == ["csv-code", "qa-team"]
    with pytest.raises(InputError, match="environments present: csv-code, qa-team"):
        list(load_bundled_spec("test:nope", tmp_path))
    both = [t.id for t in load_dataset("bundled:test:qa-team,csv-code")]  # several environments, in file order
    assert both == [t.id for t in traces[4:]] and {t.source.benchmark for t in traces[4:]} == {"csv-code", "qa-team"}
    with pytest.raises(InputError, match="no traces of environment nope; environments present: csv-code, qa-team"):
        list(load_bundled_spec("test:csv-code,nope", tmp_path))
    with pytest.raises(InputError, match="unknown split 'train'"):
        list(load_dataset("bundled:train"))


def test_jsonl_spec_and_limit(synthetic_jsonl):
    ds = load_dataset(f"jsonl:{synthetic_jsonl}")
    assert len(ds.traces()) == 24 and [t.id for t in ds.traces(limit=3)] == ["syn-000", "syn-001", "syn-002"]


def test_traces_import_uses_the_registered_sources(tmp_path):
    from faultlens.cli import cli
    from faultlens.middleware.sources import load_traces
    from faultlens.middleware.store import open_store

    assert {t.id for t in load_traces(f"whowhen:{WHOWHEN}")} == {"whowhen:Hand-Crafted/1", "whowhen:Algorithm-Generated/7"}
    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), f"whowhenpro:{PRO}"])
    assert result.exit_code == 0, result.output
    assert "imported 8 trace(s)" in result.output  # the paper-shaped fixtures and the published-shaped ones
    stored = open_store(db).get_trace("wwp-debate-1")
    assert stored.gold.native_step == "1:1" and stored.steps[3].native_id == "1:1"


def test_whowhenpro_reads_smolagents_plural_observation_names(tmp_path):
    def plural(d):
        entry = d["trajectory"][1]
        entry["observations"] = entry.pop("observation")
        entry["observations_images"] = entry.pop("observation_images")

    path = _pro_copy(tmp_path, "smol_image.json", plural)
    (trace,) = load_dataset(f"whowhenpro:{path.parent}")
    assert trace.steps[1].tool_result == "cropped region is empty"
    assert Path(trace.steps[1].media[0].path).name == "chart.png"
