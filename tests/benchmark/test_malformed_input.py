"""No importer crashes: every `faultlens.sources` importer that reads files (whowhen,
whowhenpro, trail, taubench, jsonl, otlp) turns a mutated valid file (a wrong
type, a list where an object is expected and back, a missing key, a null, a
truncation) into an InputError naming the file, and stores nothing.

One Hypothesis property per importer, bounded (a few seconds each) so they run in `make test`."""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultlens.benchmark import load_dataset
from faultlens.middleware.errors import InputError
from faultlens.middleware.otlp.convert import trace_to_otlp
from faultlens.middleware.sources import load_traces
from faultlens.middleware.store import open_store

from .conftest import FIXTURES

PUBLISHED = FIXTURES / "whowhenpro" / "published"
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

# -- mutations of a JSON document --------------------------------------------------------

_DELETE, _TRUNCATE = "delete", "truncate"
WRONG_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x", [], {}, [None], {"a": None}]


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in the document: the root, each key of each object, each item of each list."""
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*path, i))
    return found


def _swap(value: Any) -> Any:
    """A list where an object was, an object where a list was, else a wrapped value."""
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    return [value]


def _mutate(doc: Any, path: tuple, how: Any) -> Any:
    if not path:
        return _swap(doc) if how == "swap" else how
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == _DELETE:
        if isinstance(parent, dict):
            del parent[last]
        else:
            parent.pop(last)
    elif how == "swap":
        parent[last] = _swap(parent[last])
    else:
        parent[last] = how
    return doc


@st.composite
def mutated(draw, text: str) -> str:
    """`text` (a JSON document) with one mutation, or cut short."""
    how = draw(st.sampled_from([_TRUNCATE, _DELETE, "swap", "value"]))
    if how == _TRUNCATE:
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    doc = json.loads(text)
    paths = _paths(doc)
    path = draw(st.sampled_from(paths[1:] if how == _DELETE else paths))
    value = draw(st.sampled_from(WRONG_VALUES)) if how == "value" else how
    return json.dumps(_mutate(doc, path, value))


def _import_never_crashes(folder: Path, file: Path, text: str, spec: str) -> None:
    """Write `text` to `file` in a copy of `folder`, import `spec` into a store holding one trace:
    either it imports, or it is an InputError naming the file, and the store is unchanged."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "in"
        shutil.copytree(folder, root)
        (root / file).write_text(text)
        store = open_store(Path(tmp) / "t.db")
        store.save_traces(load_dataset(f"whowhenpro:{PUBLISHED}").traces()[:1])
        before = [t.model_dump() for t in store.iter_traces()]
        try:
            store.save_traces(load_traces(spec.format(root=root)))
        except InputError as err:
            # the file itself, or the file the mutated one no longer matches (a label naming a missing step)
            assert err.source.startswith(str(root)) or str(root) in err.source, str(err)
            assert [t.model_dump() for t in store.iter_traces()] == before


# -- one property per importer -----------------------------------------------------------


def _whowhenpro_text() -> str:
    return (PUBLISHED / "data" / "traces" / "simpleqa_river.json").read_text()


@pytest.mark.parametrize("name", ["lvbench_kite.json", "mmsearch_lamp.json", "simpleqa_river.json", "macnet_square.json"])
@EXAMPLES
@given(data=st.data())
def test_whowhenpro_never_crashes(name, data):
    text = (PUBLISHED / "data" / "traces" / name).read_text()
    _import_never_crashes(PUBLISHED, Path("data/traces") / name, data.draw(mutated(text)), "whowhenpro:{root}/data/traces")


@EXAMPLES
@given(data=st.data())
def test_whowhen_never_crashes(data):
    folder = FIXTURES / "whowhen"
    text = (folder / "Hand-Crafted" / "1.json").read_text()
    _import_never_crashes(folder, Path("Hand-Crafted/1.json"), data.draw(mutated(text)), "whowhen:{root}")


TRAIL_RUN = {
    "trace_id": "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "spans": [{
        "span_id": "aaaaaaaaaaaaaaaa", "parent_span_id": None, "span_name": "CodeAgent.run", "span_kind": "Internal",
        "timestamp": "2025-03-01T10:00:00.000000Z", "duration": "PT4.5S", "status_code": "Ok", "status_message": "",
        "span_attributes": {"openinference.span.kind": "AGENT", "input.value": "{\"task\": \"How tall is the Quenby tower?\"}"},
        "resource_attributes": {"service.name": "trail-fixture"}, "events": [],
        "child_spans": [{
            "span_id": "bbbbbbbbbbbbbbbb", "parent_span_id": "aaaaaaaaaaaaaaaa", "span_name": "LiteLLMModel.__call__",
            "span_kind": "Internal", "timestamp": "2025-03-01T10:00:01.000000Z", "duration": "PT1S", "status_code": "Ok",
            "status_message": "",
            "span_attributes": {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
                                "llm.input_messages.0.message.content": "How tall is the Quenby tower?",
                                "llm.output_messages.0.message.role": "assistant",
                                "llm.output_messages.0.message.content": "It is 12 m tall."},
            "resource_attributes": {"service.name": "trail-fixture"},
            "events": [{"Name": "note", "Timestamp": "2025-03-01T10:00:01.500000", "Attributes": {"k": "v"}}],
            "child_spans": []}],
    }],
}
TRAIL_ANNOTATION = {"errors": [{"category": "Language-only", "location": "bbbbbbbbbbbbbbbb", "evidence": "12 m",
                                "description": "Invents the height.", "impact": "HIGH"}]}


def _trail_folder(tmp: Path) -> Path:
    (tmp / "GAIA").mkdir(parents=True)
    (tmp / "processed_annotations_gaia").mkdir()
    (tmp / "GAIA" / f"{TRAIL_RUN['trace_id']}.json").write_text(json.dumps(TRAIL_RUN))
    (tmp / "processed_annotations_gaia" / f"{TRAIL_RUN['trace_id']}.json").write_text(json.dumps(TRAIL_ANNOTATION))
    return tmp


@pytest.mark.parametrize("which", ["GAIA", "processed_annotations_gaia"])
@EXAMPLES
@given(data=st.data())
def test_trail_never_crashes(which, data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = _trail_folder(Path(tmp) / "trail")
        assert len(load_dataset(f"trail:{folder}").traces()) == 1  # the unmutated file imports
        file = Path(which) / f"{TRAIL_RUN['trace_id']}.json"
        _import_never_crashes(folder, file, data.draw(mutated((folder / file).read_text())), "trail:{root}")


TAU_RUNS = [{"task_id": 3, "reward": 0.0, "trial": 0,
             "info": {"task": {"user_id": "ada_lee_1", "instruction": "You want to return the lamp you ordered."}},
             "traj": [{"role": "system", "content": "You are a retail agent. Follow the policy."},
                      {"role": "user", "content": "I want to return my lamp."},
                      {"role": "assistant", "content": "", "tool_calls": [
                          {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{\"order_id\": \"#W1\"}"}}]},
                      {"role": "tool", "content": "{\"status\": \"delivered\"}", "name": "get_order", "tool_call_id": "c1"},
                      {"role": "assistant", "content": "Done: I exchanged the lamp."}]}]
TAU_LABELS = [{"trajectory_id": 3, "failure_summary": "exchanged instead of returned",
               "failures": [{"failure_id": "f1", "step_number": 5, "step_reason": "exchanges, not returns",
                             "failure_category": "Instruction adherence", "category_reason": "ignores the request",
                             "failed_agent": "Assistant"}],
               "root_cause": {"failure_id": "f1", "reason_for_root_cause": "the wrong action"}}]


@pytest.mark.parametrize("which", ["tau_dataset_failed.json", "tau_ground_truth.json"])
@EXAMPLES
@given(data=st.data())
def test_taubench_never_crashes(which, data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tau"
        folder.mkdir()
        (folder / "tau_dataset_failed.json").write_text(json.dumps(TAU_RUNS))
        (folder / "tau_ground_truth.json").write_text(json.dumps(TAU_LABELS))
        assert len(load_dataset(f"taubench:{folder}").traces()) == 1
        _import_never_crashes(folder, Path(which), data.draw(mutated((folder / which).read_text())), "taubench:{root}")


@functools.cache
def _a_trace():
    """One valid trace, made once (its `created_at` must not change between examples)."""
    return next(t for t in load_dataset(f"whowhenpro:{PUBLISHED}").traces() if t.metadata["trajectory_shape"] == "agent turns")


NATIVE_FILES = {"jsonl": ("runs.jsonl", lambda t: t.model_dump_json() + "\n"), "otlp": ("spans.json", lambda t: json.dumps(trace_to_otlp(t)))}


@pytest.mark.parametrize("source", ["jsonl", "otlp"])
@EXAMPLES
@given(data=st.data())
def test_jsonl_and_otlp_never_crash(source, data):
    name, write = NATIVE_FILES[source]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / source
        folder.mkdir()
        text = write(_a_trace())
        (folder / name).write_text(text)
        assert len(list(load_traces(f"{source}:{folder / name}"))) == 1  # the unmutated file imports
        _import_never_crashes(folder, Path(name), data.draw(mutated(text.strip())) + "\n", f"{source}:{{root}}/{name}")
