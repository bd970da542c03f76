"""Who&When Pro as published: the four trajectory shapes, media relative to the
dataset root, gold labels per shape, and the answer-revealing fields that no
attributor may see. The fixtures (fixtures/whowhenpro/published) are written
from issue #16's description, laid out as the project page lays them out:
data/traces/*.json beside assets/examples/<name>/frame_0000.jpg."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from faultlens.benchmark import load_dataset
from faultlens.benchmark.runner import read_predictions, run_benchmark
from faultlens.middleware.answer_key import ANSWER_KEY, attributor_view, has_answer_key
from faultlens.middleware.errors import InputError
from faultlens.middleware.model import Attribution, StepKind, Trace

from .conftest import FIXTURES

PUBLISHED = FIXTURES / "whowhenpro" / "published"
TRACES = PUBLISHED / "data" / "traces"
SPEC = f"whowhenpro:{PUBLISHED}"
FILES = {"wwp-pub-eva-bounce": "eva_bounce.json", "wwp-pub-smol-chart": "smolagents_chart.json",
         "wwp-pub-m1-population": "magentic_one_population.json", "wwp-pub-macnet-sum": "macnet_sum.json"}
LEAKING_KEYS = {"injected", "is_injected", "is_replayed", "eval_error_preview", "ground_truth", ANSWER_KEY, "injection"}
LEAKING_PHASES = {"replayed", "injected", "live"}


def _traces() -> dict[str, Trace]:
    return {t.id: t for t in load_dataset(SPEC)}


def _raw(trace_id: str) -> dict:
    return json.loads((TRACES / FILES[trace_id]).read_text())


def _marked(raw: dict) -> list[int]:
    """Indices of the entries the leaking fields mark as the injected one."""
    return [i for i, e in enumerate(raw["trajectory"])
            if e.get("injected") is True or e.get("is_injected") is True or e.get("phase") == "injected"]


def _digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


# -- the four shapes ---------------------------------------------------------------


def test_chat_shape_video_frames_from_the_dataset_root():
    before = _digest(PUBLISHED)
    t = _traces()["wwp-pub-eva-bounce"]
    assert t.metadata["trajectory_shape"] == "chat" and t.source.modality == "video" and t.source.framework == "eva"
    assert [s.kind for s in t.steps] == [StepKind.message, StepKind.human, StepKind.tool_call, StepKind.tool_result,
                                         StepKind.message, StepKind.message]
    assert t.steps[2].tool_name == "sample_frames" and t.steps[2].tool_arguments == {"start_s": 0, "end_s": 3, "n": 3}
    assert t.steps[3].tool_name == "sample_frames" and t.steps[3].metadata["tool_call_id"] == "call_1"
    frames = t.steps[3].media
    # `assets/examples/...` is relative to the dataset root, two folders above the trace file.
    assert [Path(m.path) for m in frames] == [(PUBLISHED / f"assets/examples/eva_bounce/frame_000{i}.jpg").resolve() for i in range(3)]
    assert [(m.frame_index, m.timestamp_s, m.mime_type) for m in frames] == [(0, 0.0, "image/jpeg"), (1, 1.5, "image/jpeg"), (2, 3.0, "image/jpeg")]
    assert all(Path(m.path).read_bytes().startswith(b"\xff\xd8") for m in frames)  # real JPEG files
    assert t.task.metadata["video_context"]["video_id"] == "bounce01" and t.task.options[1] == "B. 3"
    # gold `step` is the entry's 0-based index: the entry marked `injected`.
    assert t.gold.step == 4 == _marked(_raw(t.id))[0] and t.gold.native_step == "4" and t.gold.agent is None and t.gold.mode == "P.3"
    assert _digest(PUBLISHED) == before


def test_planning_action_shape_step_0_is_the_plan_and_n_the_action_numbered_n():
    t = _traces()["wwp-pub-smol-chart"]
    assert t.metadata["trajectory_shape"] == "planning/action"
    assert [s.kind for s in t.steps] == [StepKind.human, StepKind.plan, StepKind.tool_call, StepKind.tool_call, StepKind.final_answer]
    assert [s.native_id for s in t.steps] == ["#0", "0", "1", "2", "3"]
    assert t.steps[2].content == "Crop the region with the tallest bar." and t.steps[2].tool_arguments.startswith("region = crop(")
    assert t.steps[3].error == "ValueError: no bar found in the region"
    assert Path(t.steps[0].media[0].path).name == "frame_0000.png" and Path(t.steps[2].media[0].path).name == "frame_0001.png"
    assert Path(t.task.attachments[0].path).read_bytes().startswith(b"\x89PNG")
    raw = _raw(t.id)
    assert t.gold.step == 2 and raw["trajectory"][t.gold.step]["step_number"] == raw["ground_truth"]["step"] == 1


def test_planning_gold_step_0_is_the_planning_entry(tmp_path):
    folder = _copy(tmp_path, "smolagents_chart.json", lambda d: d["ground_truth"].update(step=0, mode="PL.1"))
    (t,) = load_dataset(f"whowhenpro:{folder}")
    assert t.gold.step == 1 and t.steps[1].kind is StepKind.plan and t.gold.native_step == "0"


def test_agent_turns_shape_gold_round_dot_position():
    t = _traces()["wwp-pub-m1-population"]
    assert t.metadata["trajectory_shape"] == "agent turns"
    assert [a.name for a in t.agents] == ["Orchestrator", "WebSurfer", "Coder", "user"]  # `agents` as [{id, role}]
    assert t.agents[1].role == "web browsing"
    assert [s.native_id for s in t.steps] == ["#0", "1.0", "1.1", "2.0", "2.1", "3.0"]
    assert t.steps[1].metadata["ledger"]["next_speaker"] == "WebSurfer"
    assert t.steps[2].kind is StepKind.tool_call and t.steps[2].tool_name == "web_search"
    assert all("phase" not in s.metadata for s in t.steps)  # its values give the answer away
    assert t.gold.step == 4 == _marked(_raw(t.id))[0] and t.gold.native_step == "2.1" and t.gold.agent == "WebSurfer"


def test_graph_nodes_shape_gold_is_agent_layer_and_rank_among_its_entries():
    t = _traces()["wwp-pub-macnet-sum"]
    assert t.metadata["trajectory_shape"] == "graph nodes"
    assert [s.agent for s in t.steps] == ["user", "0", "1", "1", "2", "2"]  # the final answer is the one sink node's
    assert [s.native_id for s in t.steps] == ["#0", "0:0.0", "1:1.0", "1:1.1", "2:2.0", "#5"]
    assert t.steps[3].metadata == {"role": "reviser", "stage": "revise", "round": 1, "position": 1}
    assert t.steps[5].kind is StepKind.final_answer and t.steps[5].content == "79"
    # agent 1, round (layer) 1, position 1: agent 1's second entry, the one marked is_injected.
    assert t.gold.step == 3 == _marked(_raw(t.id))[0] and t.gold.agent == "1" and t.gold.native_step == "1:1.1"
    assert t.multi_agent


# -- the answer key: kept for provenance, never shown ---------------------------------


def test_leaking_fields_are_kept_under_the_answer_key_only():
    traces = _traces()
    for trace_id, t in traces.items():
        raw = _raw(trace_id)
        key = t.metadata[ANSWER_KEY]
        assert key["ground_truth"] == raw["ground_truth"] and key["eval_error_preview"] == raw["eval_error_preview"]
        for i in _marked(raw):
            assert any(v in (True, "injected") for v in key["entries"][str(i)].values())
    m1 = traces["wwp-pub-m1-population"].metadata[ANSWER_KEY]["entries"]
    assert {i: e["phase"] for i, e in m1.items()} == {"1": "replayed", "2": "replayed", "3": "replayed", "4": "injected", "5": "live"}
    assert traces["wwp-pub-macnet-sum"].metadata[ANSWER_KEY]["entries"]["1"] == {"is_injected": False, "is_replayed": True}
    assert not traces["wwp-pub-smol-chart"].metadata[ANSWER_KEY].get("entries")  # the shape carries no per-entry marks


def _leaks(value: Any, path: str = "") -> list[str]:
    """Every leaking key or phase value anywhere inside a dumped trace."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in LEAKING_KEYS:
                found.append(f"{path}.{k}")
            if k == "phase" and v in LEAKING_PHASES:
                found.append(f"{path}.phase={v}")
            found += _leaks(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _leaks(v, f"{path}[{i}]")
    return found


def _assert_blind(seen: Trace, original: Trace, raw: dict) -> None:
    dumped = seen.model_dump(mode="json")
    assert _leaks(dumped) == [], seen.id
    assert seen.gold is None and not has_answer_key(seen)
    text = json.dumps(dumped)
    assert raw["eval_error_preview"] not in text
    # ... and nothing else was lost: the same steps, in the same order.
    assert [s.model_dump() for s in seen.steps] == [s.model_dump() for s in attributor_view(original).steps]
    assert [s.content for s in seen.steps] == [s.content for s in original.steps]


class Spy:
    """Records the trace it is given; blames the first step."""

    name = "test-double:spy"

    def __init__(self) -> None:
        self.seen: list[Trace] = []

    def attribute(self, trace: Trace) -> Attribution:
        self.seen.append(trace)
        return Attribution(trace_id=trace.id, method=self.name, step=0, agent=trace.steps[0].agent)

    async def aattribute(self, trace: Trace) -> Attribution:
        return self.attribute(trace)


def test_the_runner_never_shows_an_attributor_the_leaking_fields(tmp_path):
    originals = _traces()
    assert all(_leaks(t.model_dump(mode="json")) for t in originals.values())  # the check can fail: they are there
    method, baseline = Spy(), Spy()
    run_benchmark(SPEC, "test-double:spy", attributor=method, baselines={"baseline:spy": baseline},
                  out=tmp_path / "run", progress=False)
    for spy in (method, baseline):
        assert sorted(t.id for t in spy.seen) == sorted(originals)
        for seen in spy.seen:
            _assert_blind(seen, originals[seen.id], _raw(seen.id))
            assert seen.task.reference_answer is None  # not without --with-reference-answer
    assert all(ANSWER_KEY in t.metadata for t in originals.values())  # the originals keep it


def test_faultlens_attribute_hides_them_too(tmp_path):
    from faultlens.attributors import register
    from faultlens.cli import cli
    from faultlens.middleware.store import open_store

    db = tmp_path / "t.db"
    assert CliRunner().invoke(cli, ["traces", "import", "--db", str(db), SPEC]).exit_code == 0
    spy = Spy()
    register("test-double:spy", lambda **options: spy)
    for trace_id in FILES:
        result = CliRunner().invoke(cli, ["attribute", trace_id, "--db", str(db), "-m", "test-double:spy", "--json"])
        assert result.exit_code == 0, result.output
    stored = {t: open_store(db).get_trace(t) for t in FILES}
    for seen in spy.seen:
        _assert_blind(seen, stored[seen.id], _raw(seen.id))
    assert all(stored[t].metadata[ANSWER_KEY]["ground_truth"] == _raw(t)["ground_truth"] for t in FILES)  # stored intact


# -- the CLI on a folder laid out as the project page lays it out ---------------------------


def test_bench_run_learned_on_the_published_layout(tmp_path):
    from faultlens.cli import cli

    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["bench", "run", "--dataset", SPEC, "--method", "learned", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    records = {r["trace_id"]: r for r in read_predictions(out / "predictions.jsonl")}
    assert set(records) == set(FILES)
    assert {r["status"] for r in records.values()} == {"ok"} and {r["backend"] for r in records.values()} != {None}
    assert {k: r["gold"]["native_step"] for k, r in records.items()} == {
        "wwp-pub-eva-bounce": "4", "wwp-pub-smol-chart": "1", "wwp-pub-m1-population": "2.1", "wwp-pub-macnet-sum": "1:1.1"}
    for r in records.values():  # the predicted step is named in the same native ids
        assert r["predicted"]["native_step"] in [s.native_id for s in _traces()[r["trace_id"]].steps]


def test_traces_show_displays_the_frames(tmp_path):
    from faultlens.cli import cli

    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), SPEC])
    assert result.exit_code == 0 and "imported 4 trace(s)" in result.output, result.output
    result = CliRunner().invoke(cli, ["traces", "show", "--db", str(db), "wwp-pub-eva-bounce"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    for i in range(3):
        assert f"image/jpeg frame {i}: {(PUBLISHED / f'assets/examples/eva_bounce/frame_000{i}.jpg').resolve()}" in result.output
    result = CliRunner().invoke(cli, ["traces", "show", "--db", str(db), "wwp-pub-smol-chart"], env={"COLUMNS": "400"})
    assert "smol_chart/frame_0000.png" in result.output and "smol_chart/frame_0001.png" in result.output


# -- media found nowhere, --media-root, bad input --------------------------------------


def _traces_only(tmp_path: Path) -> Path:
    """The trace files without the assets tree beside them."""
    folder = tmp_path / "only" / "data" / "traces"
    shutil.copytree(TRACES, folder)
    return folder.parent.parent


def test_media_found_nowhere_names_file_entry_and_field_and_media_root_fixes_it(tmp_path):
    from faultlens.cli import cli

    root = _traces_only(tmp_path)
    with pytest.raises(InputError) as err:
        list(load_dataset(f"whowhenpro:{root}"))
    assert err.value.source == str(root / "data" / "traces" / "eva_bounce.json")
    assert (err.value.record, err.value.field) == ("trajectory[3]", "frames[0].path")
    assert "assets/examples/eva_bounce/frame_0000.jpg" in str(err.value) and "--media-root" in str(err.value)

    traces = {t.id: t for t in load_dataset(f"whowhenpro:{root}", media_root=PUBLISHED)}
    assert Path(traces["wwp-pub-eva-bounce"].steps[3].media[0].path) == (PUBLISHED / "assets/examples/eva_bounce/frame_0000.jpg").resolve()

    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), f"whowhenpro:{root}"])
    assert result.exit_code != 0 and "trajectory[3]" in result.output and "frames[0].path" in result.output
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), f"whowhenpro:{root}", "--media-root", str(PUBLISHED)])
    assert result.exit_code == 0 and "imported 4 trace(s)" in result.output, result.output
    result = CliRunner().invoke(cli, ["bench", "run", "--dataset", f"whowhenpro:{root}", "--method", "baseline:first-step",
                                      "--out", str(tmp_path / "run"), "--no-progress", "--media-root", str(PUBLISHED)])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run" / "run.json").read_text())["media_root"] == str(PUBLISHED)


def test_the_trace_folder_given_alone_looks_up_to_its_parent_only(tmp_path):
    # DIR = data/traces: the lookup stops at data/, so assets/ (beside data/) needs --media-root.
    with pytest.raises(InputError, match="image file not found"):
        list(load_dataset(f"whowhenpro:{TRACES}"))
    assert len(list(load_dataset(f"whowhenpro:{TRACES}", media_root=PUBLISHED))) == 4


def test_only_data_traces_is_read_in_the_published_layout(tmp_path):
    root = tmp_path / "release"
    shutil.copytree(PUBLISHED, root)
    (root / "assets" / "examples" / "eva_bounce" / "clip.json").write_text('{"fps": 2}')  # not a trace
    traces = list(load_dataset(f"whowhenpro:{root}"))
    assert sorted(t.id for t in traces) == sorted(FILES) and {t.source.subset for t in traces} == {None}


def test_media_root_is_only_for_whowhenpro(tmp_path):
    with pytest.raises(InputError, match="only whowhenpro"):
        load_dataset(f"whowhen:{tmp_path}", media_root=tmp_path)
    with pytest.raises(InputError, match="no such directory"):
        load_dataset(SPEC, media_root=tmp_path / "absent")


def _copy(tmp_path: Path, name: str, edit) -> Path:
    root = tmp_path / "pub"
    shutil.copytree(PUBLISHED / "assets", root / "assets")
    (root / "data" / "traces").mkdir(parents=True)
    data = json.loads((TRACES / name).read_text())
    edit(data)
    (root / "data" / "traces" / name).write_text(json.dumps(data))
    return root


def _set(path: str, value: Any):
    def edit(d):
        *keys, last = path.split("/")
        for k in keys:
            d = d[int(k)] if isinstance(d, list) else d[k]
        if value is _DELETE:
            del d[last]
        elif isinstance(d, list):
            d[int(last)] = value
        else:
            d[last] = value
    return edit


_DELETE = object()


@pytest.mark.parametrize(("name", "edit", "record", "field", "words"), [
    ("eva_bounce.json", _set("trajectory/3/frames/1/path", "assets/examples/eva_bounce/missing.jpg"), "trajectory[3]", "frames[1].path", "image file not found"),
    ("smolagents_chart.json", _set("task/images/0/path", "assets/nowhere.png"), "task", "images[0].path", "image file not found"),
    ("smolagents_chart.json", _set("trajectory/2/kind", "observation"), "trajectory[2]", "kind", "not an entry of a planning/action trajectory"),
    ("smolagents_chart.json", _set("ground_truth/step", 7), None, "ground_truth.step", "no trajectory entry has step id '7'"),
    ("magentic_one_population.json", _set("ground_truth/agent", "Orchestrator"), None, "ground_truth.agent", "is by 'WebSurfer'"),
    ("magentic_one_population.json", _set("trajectory/2/round", "1"), "trajectory[2]", "round", "expected an integer"),
    ("magentic_one_population.json", _set("agents/1", {"role": "web browsing"}), None, "agents[1]", "`id`"),
    ("macnet_sum.json", _set("trajectory/2/agent_id", 9), "trajectory[2]", "agent_id", "in no layer"),
    ("macnet_sum.json", _set("topology/layers", _DELETE), None, "topology.layers", "needs its layers"),
    ("macnet_sum.json", _set("ground_truth/position", _DELETE), None, "ground_truth.position", "needs `position`"),
    ("macnet_sum.json", _set("ground_truth/position", 2), None, "ground_truth", "no trajectory entry has step id '1:1.2'"),
])
def test_bad_published_input_names_file_entry_and_field(tmp_path, name, edit, record, field, words):
    root = _copy(tmp_path, name, edit)
    with pytest.raises(InputError) as err:
        list(load_dataset(f"whowhenpro:{root}"))
    assert err.value.source == str(root / "data" / "traces" / name)
    assert (err.value.record, err.value.field) == (record, field)
    assert words in str(err.value)
