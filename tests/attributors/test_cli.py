"""`faultlens attribute` through click's CliRunner."""

from __future__ import annotations

import json

from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.middleware.store import open_store

from .conftest import answer, team_trace


def run(*args):
    return CliRunner().invoke(cli, ["attribute", *args], catch_exceptions=False, terminal_width=160)


def test_attribute_a_trace_file_offline(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(team_trace().model_dump_json(), encoding="utf-8")
    db = tmp_path / "f.db"
    result = run(str(path), "--method", "heuristic", "--db", str(db))
    assert result.exit_code == 0, result.output
    assert "who:  searcher" in result.output and "when: step 2" in result.output and "A.2" in result.output
    assert "Marla Voss" in result.output  # the blamed step is shown in the timeline
    store = open_store(db)
    assert store.get_trace("t-team").steps[2].tool_arguments == {"query": "Marla Voss birth year"}
    [stored] = store.attributions("t-team")
    assert (stored.method, stored.step, stored.agent) == ("heuristic", 2, "searcher")


def test_attribute_a_stored_trace_as_json(tmp_path):
    db = tmp_path / "s.db"
    open_store(db).save_trace(team_trace(trace_id="stored-1"))
    result = run("stored-1", "-m", "baseline:last-step", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["step"] == 5 and data["method"] == "baseline:last-step" and data["status"] == "ok"
    assert len(open_store(db).attributions("stored-1")) == 1


def test_attribute_with_an_llm_method(scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("FAULTLENS_CACHE_DIR", str(tmp_path / "cache"))
    double = scripted(lambda m, p: answer(agent="searcher", step=2, mode="A.2", reason="misspelt the name", confidence=0.7))
    path = tmp_path / "run.jsonl"
    path.write_text(team_trace().model_dump_json() + "\n", encoding="utf-8")
    result = run(str(path), "-m", "all_at_once", "--model", "scripted/judge", "--with-reference", "--db", str(tmp_path / "l.db"))
    assert result.exit_code == 0, result.output
    assert "misspelt the name" in result.output and "1 calls" in result.output
    assert "REFERENCE ANSWER" in double.calls[0]["messages"][1]["content"]


def test_budget_exhausted_exits_nonzero_and_still_stores(scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("FAULTLENS_CACHE_DIR", str(tmp_path / "cache"))
    scripted(lambda m, p: answer(decisive=False, mode=None, reason="fine"))
    db = tmp_path / "b.db"
    open_store(db).save_trace(team_trace(trace_id="b-1"))
    result = run("b-1", "-m", "step_by_step", "--model", "scripted/judge", "--max-calls", "2", "--db", str(db))
    assert result.exit_code == 1
    assert "call budget used up" in result.output
    [stored] = open_store(db).attributions("b-1")
    assert stored.status.value == "error" and stored.cost.calls == 2


def test_list_methods():
    result = run("--list")
    assert result.exit_code == 0
    for name in ("heuristic", "all_at_once", "binary_search", "baseline:random-step"):
        assert name in result.output


def test_bad_inputs_are_clear(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"task": {"query": "q"}, "steps": [{"index": 0}]}', encoding="utf-8")
    result = CliRunner().invoke(cli, ["attribute", str(bad), "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0 and "bad.json" in result.output and "steps.0.agent" in result.output
    result = CliRunner().invoke(cli, ["attribute", "no-such-trace", "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0 and "no-such-trace" in result.output
    result = CliRunner().invoke(cli, ["attribute", str(bad), "-m", "heuristic", "--model", "openai/gpt-4o"])
    assert result.exit_code == 2 and "apply to LLM methods" in result.output
    result = CliRunner().invoke(cli, ["attribute", "x", "-m", "crystal_ball", "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0


def test_method_options_reach_the_method(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(team_trace().model_dump_json(), encoding="utf-8")
    result = run(str(path), "-m", "counterfactual", "-O", "base=heuristic", "-O", "k=2", "--db", str(tmp_path / "c.db"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    # a hand-made trace has no agents to re-run: the heuristic's step, and the attribution says so
    assert data["method"] == "counterfactual" and data["step"] == 2
    assert data["details"]["base"] == "heuristic" and data["details"]["k"] == 2 and data["details"]["verified"] is False
    assert "no rerunner" in data["details"]["fallback"]


def test_parse_options():
    from faultlens.attributors.registry import parse_options
    from faultlens.middleware.errors import FaultlensError

    assert parse_options(["k=5", "base=learned", "x=true", "ratio=0.5", "name=a=b"]) == \
        {"k": 5, "base": "learned", "x": True, "ratio": 0.5, "name": "a=b"}
    import pytest

    with pytest.raises(FaultlensError, match="KEY=VALUE"):
        parse_options(["k"])
