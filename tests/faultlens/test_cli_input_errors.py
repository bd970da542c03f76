"""Issue #20 item 10: every bad input to `faultlens traces import` and `faultlens attribute` is a message naming
the file (and record and field where there is one) with a non-zero exit, never a traceback, and nothing stored."""

from __future__ import annotations

import json
import os
import sqlite3
import traceback

import pytest
from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.middleware.jsonl import write_jsonl
from faultlens.middleware.model.trace import GoldLabel, Outcome, Source, Step, StepKind, Task, Trace

GOOD = Trace(
    id="good",
    task=Task(query="2+2?"),
    source=Source(format="native"),
    steps=[Step(index=0, agent="solver", kind=StepKind.final_answer, content="5")],
    outcome=Outcome(success=False),
    gold=GoldLabel(agent="solver", step=0, mode="R.3"),
)


def span(**fields) -> dict:
    base = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "chat m", "startTimeUnixNano": "1700000000000000000",
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}
    base.update(fields)
    return base


def otlp(*spans) -> dict:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


# The JSON shapes of item 3, as OTLP files.
SHAPES = {
    "status_string": otlp(span(status="ERROR")),
    "status_list": otlp(span(status=[1])),
    "kind_object": otlp(span(kind={})),
    "code_list": otlp(span(status={"code": [2]})),
    "key_number": otlp(span(attributes=[{"key": 5, "value": {"stringValue": "x"}}])),
    "key_list": otlp(span(attributes=[{"key": [1], "value": {"stringValue": "x"}}])),
    "scopespans_string": {"resourceSpans": [{"scopeSpans": "abc"}]},
    "resourcespans_number": {"resourceSpans": [1]},
    "resourcespans_list": {"resourceSpans": [[]]},
    "events_string": otlp(span(events="x")),
    "huge_time": otlp(span(startTimeUnixNano=1.5e30)),
    "digits_time": otlp(span(startTimeUnixNano="9" * 400)),
    "bad_messages_on_workflow": otlp(span(name="invoke_workflow w", attributes=[
        {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
        {"key": "gen_ai.input.messages", "value": {"stringValue": "{not json"}}])),
}


def make_inputs(root) -> dict[str, tuple[str, str | None]]:
    """name → (the argument to pass, a text the message must contain besides the path)."""
    root.mkdir(exist_ok=True)
    out: dict[str, tuple[str, str | None]] = {}
    (root / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    (root / "binary.json").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    latin = json.dumps(GOOD.model_dump(mode="json")).replace("2+2?", "caf\u00e9").encode("latin-1")
    (root / "latin1.jsonl").write_bytes(latin + b"\n")
    (root / "latin1.json").write_bytes(latin)
    (root / "plain.jsonl.gz").write_text(GOOD.model_dump_json() + "\n")
    write_jsonl([GOOD, GOOD.model_copy(update={"id": "good2"})] * 50, root / "whole.jsonl.gz")
    whole = (root / "whole.jsonl.gz").read_bytes()
    (root / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (root / "empty.jsonl").write_text("")
    (root / "dir").mkdir(exist_ok=True)
    for name, arg, must in [
        ("binary jsonl", "binary.jsonl", "UTF-8"),
        ("binary json", "binary.json", "UTF-8"),
        ("latin-1 jsonl", "latin1.jsonl", "UTF-8"),
        ("latin-1 json", "latin1.json", "UTF-8"),
        ("non-gzip .gz", "plain.jsonl.gz", "gzip"),
        ("truncated .jsonl.gz", "truncated.jsonl.gz", "truncated"),
        ("empty jsonl", "empty.jsonl", None),
    ]:
        out[name] = (str(root / arg), must)
    for name, body in SHAPES.items():
        (root / f"{name}.json").write_text(json.dumps(body))
        out[f"otlp shape {name}"] = (str(root / f"{name}.json"), "field")
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("bad"))


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        pytest.fail("".join(traceback.format_exception(result.exception)))
    return result


def stored(db) -> int:
    if not os.path.exists(db):
        return 0
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM traces").fetchone()[0]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "cli.db"
    good = tmp_path / "good.jsonl"
    write_jsonl([GOOD], good)
    assert run("traces", "import", "--db", str(path), str(good)).exit_code == 0
    return str(path)


NAMES = sorted([
    "binary jsonl", "binary json", "latin-1 jsonl", "latin-1 json", "non-gzip .gz", "truncated .jsonl.gz", "empty jsonl",
    *[f"otlp shape {n}" for n in SHAPES],
])


@pytest.mark.parametrize("name", NAMES)
def test_traces_import_names_the_file_and_exits_non_zero(inputs, db, name):
    path, must = inputs[name]
    result = run("traces", "import", "--db", db, path)
    assert result.exit_code != 0, result.output
    assert path in result.output and "Traceback" not in result.output and "Aborted" not in result.output
    if must:
        assert must in result.output, result.output
    assert "imported 0" not in result.output and "trace(s) from" not in result.output
    assert stored(db) == 1  # the good trace is still there, nothing added


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("otlp shape")])
def test_attribute_names_the_file_and_exits_non_zero(inputs, db, name):
    path, must = inputs[name]
    result = run("attribute", "--db", db, path)
    assert result.exit_code != 0, result.output
    assert path in result.output and "Traceback" not in result.output and "Aborted" not in result.output
    if must:
        assert must in result.output, result.output
    assert stored(db) == 1


@pytest.mark.parametrize("spec", ["otlp:{dir}", "jsonl:{dir}"])
def test_a_directory_given_as_a_file_is_a_message(inputs, db, tmp_path, spec):
    directory = os.path.dirname(inputs["empty jsonl"][0]) + "/dir"
    result = run("traces", "import", "--db", db, spec.format(dir=directory))
    assert result.exit_code != 0 and directory in result.output and "directory" in result.output


def test_an_otlp_shape_error_names_the_record_and_field(inputs, db):
    path, _ = inputs["otlp shape status_string"]
    result = run("traces", "import", "--db", db, f"otlp:{path}")
    assert "resourceSpans[0].scopeSpans[0].spans[0].status" in result.output


@pytest.mark.slow
def test_a_50_mb_random_file_is_a_message(tmp_path, db):
    for name in ("random.jsonl", "random.json"):
        path = tmp_path / name
        with open(path, "wb") as handle:
            for _ in range(50):
                handle.write(os.urandom(1024 * 1024))
        for args in (("traces", "import", "--db", db, str(path)), ("attribute", "--db", db, str(path))):
            result = run(*args)
            assert result.exit_code != 0 and str(path) in result.output and "UTF-8" in result.output
    assert stored(db) == 1


def test_a_lone_surrogate_in_a_native_trace_is_a_message_naming_the_field(tmp_path, db):
    line = GOOD.model_dump_json().replace('"content":"5"', '"content":"\\ud800"')
    assert "\\ud800" in line
    path = tmp_path / "surrogate.jsonl"
    path.write_text(line + "\n")
    result = run("traces", "import", "--db", db, str(path))
    assert result.exit_code != 0 and str(path) in result.output
    assert "steps[0].content" in result.output and "line 1" in result.output
    assert stored(db) == 1


# -- issue #33 items 6 and 7: a --db that is no store, and the smaller CLI findings ---------------------
@pytest.fixture
def not_stores(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    text = tmp_path / "notes.db"
    text.write_text("these are my notes, not a database\n")
    return {"folder": str(folder), "not sqlite": str(text)}


@pytest.mark.parametrize("kind", ["folder", "not sqlite"])
@pytest.mark.parametrize("command", ["traces import", "traces list", "serve", "attribute"])
def test_a_db_that_is_a_folder_or_not_sqlite_is_a_message(tmp_path, not_stores, kind, command):
    good = tmp_path / "good.jsonl"
    write_jsonl([GOOD], good)
    target = not_stores[kind]
    before = open(target).read() if kind == "not sqlite" else None
    args = {"traces import": ["traces", "import", str(good)], "traces list": ["traces", "list"], "serve": ["serve", "--port", "1"],
            "attribute": ["attribute", str(good)]}[command]
    result = run(*args, "--db", target)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"cannot open the SQLite store at {target}" in result.output, result.output
    assert ("directory" if kind == "folder" else "not a database") in result.output
    if before is not None:
        assert open(target).read() == before  # left as it was


def test_attribute_of_a_file_with_no_steps_exits_non_zero_and_stores_nothing(tmp_path, db):
    path = tmp_path / "no_steps.json"
    path.write_text(GOOD.model_copy(update={"id": "no-steps", "steps": []}).model_dump_json())
    result = run("attribute", "--db", db, str(path))
    assert result.exit_code == 1 and "no steps" in result.output and "nothing stored" in result.output
    assert stored(db) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM attributions").fetchone()[0] == 0


def test_attribute_of_a_directory_says_so(tmp_path, db):
    result = run("attribute", "--db", db, str(tmp_path))
    assert result.exit_code != 0 and str(tmp_path) in result.output and "is a directory" in result.output
    assert "no trace with id" not in result.output


def test_a_file_holding_one_id_twice_is_refused_naming_both_lines(tmp_path, db):
    path = tmp_path / "twice.jsonl"
    other = GOOD.model_copy(update={"id": "other"})
    write_jsonl([other, GOOD.model_copy(update={"id": "again"}), GOOD.model_copy(update={"id": "again", "steps": []})], path)
    result = run("traces", "import", "--db", db, str(path))
    assert result.exit_code != 0 and "imported" not in result.output
    assert "line 3" in result.output and "line 2" in result.output and "'id'" in result.output and "again" in result.output
    assert stored(db) == 1  # nothing of the file, the earlier good trace intact
