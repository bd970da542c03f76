"""`faultlens adapt` offline: errors injected into a program's successful runs by re-running it; failures kept with exact
labels, marked as injected; an interrupted run resumes without repeating an attempt.

The provider is the test double `sim_upstream.SimUpstream`; the program, the gateway and the store are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner

from faultlens.cli import cli
from faultlens.gateway_cli import build_gateway_app
from faultlens.middleware.capture.upstream import LiteLLMUpstream
from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.store import open_store
from faultlens.injectors.proxy_mistakes import NoErrorForMode
from faultlens.middleware.replay.session import CallRecord, Recording
from faultlens.middleware.model.trace import Trace
from faultlens.rerun.adapt import adapt, argument_values, injected_reply, kind_of, split_by_source, train_adapted
from faultlens.rerun.contract import Judge, Program
from faultlens.server.run import ServerThread
from .sim_upstream import JUDGE, PROGRAM, SimUpstream

CITIES = ("Milan", "Naples", "Turin", "Palermo")


@pytest.fixture(scope="module")
def sim():
    server = SimUpstream()
    yield server
    server.shutdown()


def record(tmp_path, sim):
    """Four successful runs of the program through the live gateway, their outcomes posted: (db, program, judge)."""
    program = tmp_path / "agents.py"
    program.write_text(PROGRAM)
    judge = tmp_path / "judge.py"
    judge.write_text(JUDGE)
    db = tmp_path / "runs.db"
    store = open_store(db)
    app, gateway = build_gateway_app(store, LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim"), workers=0)
    with ServerThread(app) as server:
        for i, city in enumerate(CITIES):
            env = {**os.environ, "FAULTLENS_GATEWAY": f"{server.url}/run/ok-{i}", "FAULTLENS_TASK": f"How many thousand people live in {city}?"}
            done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            assert gateway.flush(20)
            assert httpx.post(f"{server.url}/api/runs/ok-{i}/outcome", json={"success": True}).status_code == 200
    gateway.close()
    cwd = os.getcwd()
    return db, f"{sys.executable} {program}", f"cd {cwd} && {sys.executable} {judge}"


@pytest.fixture
def recorded(tmp_path, sim):
    return record(tmp_path, sim)


def test_adapt_keeps_the_failures_it_makes_with_exact_labels_and_resumes(tmp_path, sim, recorded):
    db, command, judge = recorded
    store = open_store(db)
    out = tmp_path / "adapted"
    seen = []

    def stop_after_two(attempt, n, total):
        seen.append(attempt.key)
        if len(seen) == 2:
            raise KeyboardInterrupt  # the user pressed Ctrl-C

    upstream = LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim")
    with pytest.raises(KeyboardInterrupt):
        adapt(store, Program(command), upstream, out, judge=Judge(judge), per_run=2, modes=("R.3",), draws=0, on_attempt=stop_after_two)
    first = [json.loads(line)["key"] for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert first == seen
    result = adapt(store, Program(command), upstream, out, judge=Judge(judge), per_run=2, modes=("R.3",), draws=0)
    keys = [a.key for a in result.attempts]
    reruns = [a.key for a in result.attempts if a.result != "no_rule"]
    assert len(keys) == len(set(keys)) and len(reruns) == 8 and reruns[:2] == seen  # 2 re-runs a run, each once, the first two not repeated
    injected = [a for a in result.attempts if a.result == "injected"]
    assert injected and len(result.traces) == len(injected)
    for trace in result.traces:
        stored = store.get_trace(trace.id)
        assert stored.metadata["injected"] is True and stored.source.benchmark == "adapt" and stored.outcome.success is False
        gold = stored.gold
        assert gold.mode == "R.3" and stored.steps[gold.step].agent == gold.agent
        assert attributor_view(stored).gold is None  # never shown to a method
    # The injected call's reply holds a number that is not the city's: the error is there, at the gold step.
    trace = result.traces[0]
    assert trace.steps[trace.gold.step].content != store.get_trace(trace.metadata["from_run"]).steps[trace.metadata["from_step"]].content


def test_adapt_cli_shows_progress_and_the_yield_table(tmp_path, sim, recorded):
    db, command, judge = recorded
    out = tmp_path / "cli"
    args = ["adapt", "--db", str(db), "--rerun", command, "--judge", judge, "--upstream", "openai/{agent}", "--api-base", sim.url,
            "--out", str(out), "--per-run", "1", "--modes", "R.3", "--draws", "0", "--no-train"]
    result = CliRunner().invoke(cli, args, env={"OPENAI_API_KEY": "sk-sim"})
    assert result.exit_code == 0, result.output
    assert "yield per mode" in result.output and "R.3" in result.output
    again = CliRunner().invoke(cli, args, env={"OPENAI_API_KEY": "sk-sim"})  # resumes: nothing left to try
    tried = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert again.exit_code == 0 and len([a for a in tried if a["result"] != "no_rule"]) == 4


def test_an_empty_store_is_a_clear_error(tmp_path, sim):
    result = CliRunner().invoke(cli, ["adapt", "--db", str(tmp_path / "empty.db"), "--rerun", "true", "--upstream", "openai/x",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code != 0 and "no successful run recorded through the gateway" in result.output
    assert "Traceback" not in result.output


def test_split_keeps_a_source_runs_injections_on_one_side(recorded, tmp_path):
    from faultlens.middleware.model.trace import GoldLabel, Task, Trace

    traces = [Trace(id=f"adapt:{s}/{c}-R.3", task=Task(query="q"), gold=GoldLabel(step=0), metadata={"from_run": s})
              for s in ("a", "b", "c", "d") for c in range(3)]
    train, test = split_by_source(traces, 0.25)
    assert {t.metadata["from_run"] for t in train}.isdisjoint({t.metadata["from_run"] for t in test}) and len(test) == 3


def test_a_pair_no_rule_applies_to_costs_no_rerun(tmp_path, sim, recorded):
    db, command, judge = recorded
    upstream = LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim")
    # A.2 rewrites a tool call's arguments: these replies make no tool call, so no A.2 rule applies to them.
    result = adapt(open_store(db), Program(command), upstream, tmp_path / "o", judge=Judge(judge), per_run=1, modes=("A.2", "R.3"), draws=0)
    reruns = [a for a in result.attempts if a.result != "no_rule"]
    assert len(reruns) == 4 and {a.mode for a in reruns} == {"R.3"}  # one re-run a run, never of a pair with no rule
    assert all(a.mode == "A.2" for a in result.attempts if a.result == "no_rule")
    assert result.yield_by_mode()["R.3"]["attempts"] == 4


def tool_call_recording(arguments: str) -> Recording:
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}
    request = {"messages": [{"role": "user", "parts": [{"type": "text", "content": "Who supplies Acme Corp?"}]}]}
    return Recording([CallRecord(0, "model", "researcher", request, {"choices": [{"index": 0, "message": message}]})])


def test_a_wrong_argument_swaps_a_value_the_same_argument_took_in_another_run():
    runs = [tool_call_recording(json.dumps({"company": name, "flag": "on"})) for name in ("Acme Corp", "Globex Inc", "Acme Corp")]
    runs.append(tool_call_recording("not json"))
    # Per (tool, argument): values of at least three characters, each once; an argument that took one value is no group.
    assert argument_values(runs) == [["Acme Corp", "Globex Inc"]]
    with pytest.raises(NoErrorForMode):  # no number to change and no value of the domain to swap
        injected_reply(runs[0], 0, "A.2", seed=0)
    reply, reason = injected_reply(runs[0], 0, "A.2", seed=0, distractors=argument_values(runs))
    called = reply["choices"][0]["message"]["tool_calls"][0]["function"]
    assert called["name"] == "lookup" and json.loads(called["arguments"])["company"] == "Globex Inc"
    assert "Globex Inc" in reason and "Acme Corp" in reason


def test_a_new_draw_that_fails_the_run_twice_is_a_labelled_slip_of_that_call(tmp_path):
    sim = SimUpstream(redraw_slips=True)  # the researcher answers right the first time, wrong when asked again
    try:
        db, command, judge = record(tmp_path, sim)
        store = open_store(db)
        upstream = LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim")
        result = adapt(store, Program(command), upstream, tmp_path / "o", judge=Judge(judge), per_run=0, draws=1)
        by_agent = {a.key: a.result for a in result.attempts}
        assert sorted(by_agent.values()) == ["injected"] * 4 + ["unchanged"] * 4  # the writer's new draws are its recorded replies
        assert all(by_agent[f"ok-{i}/1-drawn0"] == "unchanged" for i in range(4))
        for trace in result.traces:
            stored = store.get_trace(trace.id)
            assert stored.gold.step == 0 and stored.gold.agent == "researcher" and stored.gold.mode is None
            assert kind_of(stored) == "drawn"
            assert stored.metadata["injected"] is True and stored.outcome.success is False
            recorded_reply = store.get_trace(stored.metadata["from_run"]).steps[stored.metadata["from_step"]].content
            assert stored.steps[0].content != recorded_reply and "twice" in stored.gold.reason
        assert result.yield_by_mode() == {"drawn": {"attempts": 8, "injected": 4, "unchanged": 4}}
        asked = len(sim.requests)
        again = adapt(store, Program(command), upstream, tmp_path / "o", judge=Judge(judge), per_run=0, draws=1)
        assert len(sim.requests) == asked and len(again.traces) == 4  # resumed: nothing drawn or re-run again
    finally:
        sim.shutdown()


def test_a_new_draw_that_the_run_recovers_from_is_no_label(tmp_path, sim):
    varying = SimUpstream(varying=True)  # the writer's new draws word the answer differently; the number stays right
    try:
        db, command, judge = record(tmp_path, varying)
        upstream = LiteLLMUpstream("openai/{agent}", api_base=varying.url, api_key="sk-sim")
        result = adapt(open_store(db), Program(command), upstream, tmp_path / "o", judge=Judge(judge), per_run=0, draws=1)
        assert not result.traces
        assert sorted(a.result for a in result.attempts) == ["still_succeeded"] * 4 + ["unchanged"] * 4
    finally:
        varying.shutdown()


def test_the_adapted_model_is_trained_on_each_kind_as_its_own_source_and_scored_on_held_out_runs(tmp_path, monkeypatch):
    import faultlens.benchmark.train as train

    monkeypatch.setattr(train, "SHIPPED_DATASETS", ("bundled:dev:math_react",))  # a small stand-in for the shipped data
    sim = SimUpstream(redraw_slips=True)
    try:
        db, command, judge = record(tmp_path, sim)
        upstream = LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim")
        out = tmp_path / "o"
        result = adapt(open_store(db), Program(command), upstream, out, judge=Judge(judge), per_run=1, modes=("R.3",), draws=1)
    finally:
        sim.shutdown()
    assert {kind_of(t) for t in result.traces} == {"drawn", "injected"}
    scores = train_adapted(result, out)
    assert scores["train"] + scores["test"] == len(result.traces) and scores["test"] > 0
    for kind in ("drawn", "injected"):
        written = (out / f"train-{kind}.jsonl").read_text().splitlines()
        assert written and all(kind_of(Trace.model_validate_json(line)) == kind for line in written)
    report = json.loads((out / "report.json").read_text())
    assert report["yield"]["drawn"]["injected"] == 4 and set(report["scores"]["after"]) == {"learned", "blend"}
    from faultlens.attributors.learned.model import load

    assert load(out / "model.joblib").meta["traces"] > scores["train"]  # the stand-in's runs and the adapted ones


def test_attempts_a_failing_upstream_cut_short_are_tried_again_on_resume(tmp_path, sim, recorded):
    db, command, judge = recorded
    store, out = open_store(db), tmp_path / "o"
    down = SimUpstream(status=503)  # the provider is down for the first pass
    try:
        first = adapt(store, Program(command), LiteLLMUpstream("openai/{agent}", api_base=down.url, api_key="sk-sim"), out,
                      judge=Judge(judge), per_run=0, draws=1)
    finally:
        down.shutdown()
    assert [a.result for a in first.attempts] == ["upstream_error"] * 8
    again = adapt(store, Program(command), LiteLLMUpstream("openai/{agent}", api_base=sim.url, api_key="sk-sim"), out,
                  judge=Judge(judge), per_run=0, draws=1)
    assert [a.result for a in again.attempts] == ["unchanged"] * 8  # every draw made again, now answered
    assert len((out / "attempts.jsonl").read_text().splitlines()) == 16  # the history kept: a line per attempt made
