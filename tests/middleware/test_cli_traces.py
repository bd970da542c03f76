"""`faultlens traces import | export | list | show` through click's CliRunner."""

import json

from click.testing import CliRunner

from faultlens.middleware import open_store, write_jsonl
from faultlens.cli import cli
from tests.middleware.model.test_trace import sample_trace


def invoke(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def test_import_export_list_show(tmp_path):
    db = str(tmp_path / "c.db")
    trace = sample_trace()
    write_jsonl([trace], tmp_path / "runs.jsonl")

    result = invoke("traces", "import", str(tmp_path / "runs.jsonl"), "--db", db)
    assert result.exit_code == 0 and "imported 1 trace" in result.output

    result = invoke("traces", "export", trace.id, "--format", "otlp", "-o", str(tmp_path / "t.json"), "--db", db)
    assert result.exit_code == 0
    payload = json.loads((tmp_path / "t.json").read_text())
    assert payload["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"].startswith("invoke_workflow")

    # import the OTLP export into a second store: the same trace comes back
    db2 = str(tmp_path / "d.db")
    assert invoke("traces", "import", f"otlp:{tmp_path / 't.json'}", "--db", db2).exit_code == 0
    assert open_store(db2).get_trace(trace.id) == open_store(db).get_trace(trace.id)

    result = invoke("traces", "list", "--db", db2, "--json")
    [row] = [json.loads(line) for line in result.output.splitlines()]
    assert row["id"] == trace.id and row["n_steps"] == 4 and row["success"] is False

    result = invoke("traces", "show", trace.id, "--db", db2)
    assert result.exit_code == 0 and "How many moons?" in result.output and "✗1" in result.output

    result = invoke("traces", "export", trace.id, "--db", db2)
    assert json.loads(result.output)["id"] == trace.id


def test_import_of_bad_input_is_one_clear_error_and_stores_nothing(tmp_path):
    db = str(tmp_path / "c.db")
    (tmp_path / "bad.json").write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}')
    result = CliRunner().invoke(cli, ["traces", "import", str(tmp_path / "bad.json"), "--db", db])
    assert result.exit_code != 0
    assert "spans[0]" in result.output and "traceId" in result.output and "Traceback" not in result.output
    assert open_store(db).count_traces() == 0
