"""Warm-start injection: exact replay, drift, gold labels, caught errors, determinism."""

import json
import random
import re

import pytest
from click.testing import CliRunner

from faultlens.injectors import envs
from faultlens.injectors.generators import Generated, TemplateGenerator, gen_input
from faultlens.injectors.pipeline import InjectConfig, choose_pairs, inject_one, run_seed
from faultlens.middleware.model.trace import StepKind, Trace
from faultlens.middleware.replay.session import Drift, Recording, Session

from .conftest import ENVS, SIM


@pytest.mark.parametrize("name", ENVS)
def test_unchanged_replay_reproduces_the_seed_with_zero_drift(seed_runs, name):
    env = envs.get(name)
    for task, seed in seed_runs[name][:4]:
        recording = Recording.loads(seed.recording.dumps())
        session = Session(recording, replay_until=None)
        again = env.run(task, session=session, sim=SIM, trace_id=seed.trace.id)
        assert session.live == 0 and session.replayed == len(recording)
        assert again.trace.model_dump() == seed.trace.model_dump()


@pytest.mark.parametrize("name", ENVS)
def test_changed_recorded_request_is_caught_as_drift(seed_runs, name):
    env = envs.get(name)
    task, seed = seed_runs[name][0]
    recording = Recording.loads(seed.recording.dumps())
    k = next(c.index for c in recording.calls if c.kind == "model" and c.index > 0)
    recording.calls[k].request["messages"][-1]["content"] += " (edited)"
    with pytest.raises(Drift) as info:
        env.run(task, session=Session(recording, replay_until=k + 1), sim=SIM)
    assert info.value.index == k
    attempt = inject_one(env, seed.trace, recording, k + 1, "R.1", Generated("Answer: 1", "test"), model=None, sim=SIM,
                         trace_id="x")
    assert attempt.status == "drifted"


def _kept(seed_runs, name, want=6):
    env = envs.get(name)
    kept = []
    for task, seed in seed_runs[name]:
        rng = random.Random(1)
        for t, mode in choose_pairs(seed.trace, rng, rotate=0)[:12]:
            generated = TemplateGenerator().generate(gen_input(seed.trace, t, mode, random.Random(t), env))
            if generated is None:
                continue
            attempt = inject_one(env, seed.trace, seed.recording, t, mode, generated, model=None, sim=SIM,
                                 trace_id=f"{task.id}-{t}-{mode}")
            if attempt.status == "kept":
                kept.append((seed, attempt))
        if len(kept) >= want:
            break
    return kept


@pytest.mark.parametrize("name", ENVS)
def test_kept_trace_gold_is_the_injected_step_and_only_step_t_differs(seed_runs, name):
    kept = _kept(seed_runs, name)
    assert len(kept) >= 3
    for seed, attempt in kept:
        trace = attempt.trace
        assert trace.failed and seed.trace.outcome.success
        t = attempt.t
        assert trace.gold.step == t and trace.gold.mode == attempt.mode
        assert trace.gold.agent == trace.steps[t].agent == seed.trace.steps[t].agent
        assert trace.gold.reason
        # the prefix is the seed's, step t is the injected action, nothing before it changed
        assert [s.model_dump() for s in trace.steps[:t]] == [s.model_dump() for s in seed.trace.steps[:t]]
        assert trace.steps[t].content != seed.trace.steps[t].content
        info = trace.metadata["injection"]
        assert info["seed_action"] == seed.trace.steps[t].content
        assert info["injected_action"] == trace.steps[t].content
        assert info["seed_outcome"]["success"] is True and info["seed_replayed_without_drift"] is True
        assert info["replayed_calls"] == t


def test_research_verifier_catches_a_misreported_value_and_the_run_succeeds(seed_runs):
    env = envs.get("research_team")
    caught = 0
    for task, seed in seed_runs["research_team"]:
        for step in seed.trace.steps:
            m = re.match(r"^The (.+) is (.+) \(source (D\d+)\)\.$", step.content)
            if step.agent != "reader" or m is None:
                continue
            value = m.group(2)
            wrong = "8,765" if re.fullmatch(r"[\d,]+", value) else "Odile Zeller"
            generated = Generated(step.content.replace(f" is {value} ", f" is {wrong} "), "misreported")
            attempt = inject_one(env, seed.trace, seed.recording, step.index, "C.2", generated, model=None, sim=SIM,
                                 trace_id="caught")
            assert attempt.status == "succeeded"  # filtered out: not kept
            rerun = env.run(task, session=Session(seed.recording, replay_until=step.index,
                                                  overrides={step.index: lambda r: {"content": generated.text}}), sim=SIM)
            assert rerun.trace.steps[step.index + 1].content.startswith("Corrected:")
            caught += 1
            break
    assert caught >= 3


def test_table_check_catches_broken_code_and_the_run_succeeds(seed_runs):
    env = envs.get("table_qa")
    caught = 0
    for task, seed in seed_runs["table_qa"]:
        t = next(s.index for s in seed.trace.steps if s.kind == StepKind.tool_call and "# look" not in s.content)
        generated = TemplateGenerator().generate(gen_input(seed.trace, t, "A.4", random.Random(0), env))
        assert generated is not None
        attempt = inject_one(env, seed.trace, seed.recording, t, "A.4", generated, model=None, sim=SIM, trace_id="c")
        if attempt.status == "succeeded":
            caught += 1
    assert caught >= 3


def test_run_seed_keeps_failures_and_counts_the_rest(seed_runs):
    task = envs.get("table_qa").tasks(5, 1)[0]
    result = run_seed("table_qa", 0, task, InjectConfig(envs=["table_qa"], per_seed=6, seed=5))
    assert result.seed_success
    statuses = {a.status for a in result.attempts}
    assert statuses <= {"kept", "succeeded", "drifted"} and "kept" in statuses
    assert len(result.attempts) <= 6
    assert len({(a.t, a.mode) for a in result.attempts}) == len(result.attempts)


@pytest.mark.slow
def test_cli_output_is_byte_identical_twice(tmp_path):
    from faultlens.injectors.cli import inject

    runner = CliRunner()
    outputs = []
    for run in range(2):
        out = tmp_path / f"run{run}.jsonl"
        result = runner.invoke(inject, ["--env", "research_team", "--env", "table_qa", "--seeds", "3", "--per-seed",
                                        "4", "--seed", "7", "--workers", "2", "--out", str(out),
                                        "--summary", str(tmp_path / f"s{run}.json")])
        assert result.exit_code == 0, result.output
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    lines = outputs[0].decode().splitlines()
    assert len(lines) >= 5
    traces = [Trace.model_validate_json(line) for line in lines]
    assert {t.source.benchmark for t in traces} == {"research_team", "table_qa"}
    assert all(t.gold is not None and t.failed for t in traces)
    summary = json.loads((tmp_path / "s0.json").read_text())
    assert sum(r["kept"] for r in summary["yield"]) == len(lines)


def test_cli_list_envs_prints_names_first():
    from faultlens.injectors.cli import inject

    result = CliRunner().invoke(inject, ["--list-envs"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "research_team" in lines and "table_qa" in lines
    assert lines == sorted(lines)


def test_llm_generator_in_the_pipeline_counts_unusable_answers_as_unparsed(monkeypatch):
    """An LLM generator whose answers cannot be used: attempts are 'unparsed' with the raw text, nothing is kept."""
    import faultlens.injectors.pipeline as pipeline
    from faultlens.injectors.generators import LLMGenerator

    monkeypatch.setattr(pipeline, "get_generator",
                        lambda spec: LLMGenerator(spec, mock_response="This step contains an injected error."))
    task = envs.get("table_qa").tasks(5, 1)[0]
    result = run_seed("table_qa", 0, task, InjectConfig(envs=["table_qa"], per_seed=3, seed=5, generator="openai/x"))
    assert [a.status for a in result.attempts] == ["unparsed"] * 3
    assert all(a.reason == "This step contains an injected error." for a in result.attempts)
    from faultlens.injectors.pipeline import InjectResult

    rows = InjectResult([], [result]).summary()
    assert sum(r["unparsed"] for r in rows) == 3 and sum(r["kept"] for r in rows) == 0


def test_table_row_count_check_catches_a_filter_that_matches_nothing(seed_runs):
    """The analyst's check (rows matched) sees 0 and rewrites the query from its plan: the run succeeds."""
    env = envs.get("table_qa")
    caught = checked = 0
    for task, seed in seed_runs["table_qa"]:
        t = next(s.index for s in seed.trace.steps if s.kind == StepKind.tool_call and "# look" not in s.content)
        code = seed.trace.steps[t].content
        m = re.search(r"= '(\w+)'", code)
        if m is not None:
            broken = code.replace(f"'{m.group(1)}'", f"'{m.group(1)[:-1]}'", 1)  # a value no row has
        else:
            broken = re.sub(r"year = \d{4}", "year = 2032", code, count=1)  # a year the table does not cover
        attempt = inject_one(env, seed.trace, seed.recording, t, "A.2", Generated(broken, "typo"), model=None, sim=SIM,
                             trace_id="check")
        assert attempt.status == "succeeded"
        rerun = env.run(task, session=Session(seed.recording, replay_until=t, overrides={t: lambda r: {"content": broken}}),
                        sim=SIM)
        after = rerun.trace.steps[t + 1:]
        # an empty result or a crash makes the analyst rewrite at once; a count of 0 passes, and the check catches it
        from faultlens.injectors.envs.table_qa.env import code_failed

        assert code_failed(after[0].content) or after[0].content == "0"
        if after[0].content == "0":
            assert after[2].content == "0" and after[3].content.startswith("No rows matched")
            checked += 1
        caught += 1
    assert caught >= 4 and checked >= 1


def test_with_a_store_every_seed_and_injected_run_goes_through_the_tracer(tmp_path):
    from faultlens.middleware.store import open_store

    db = str(tmp_path / "runs.db")
    task = envs.get("research_team").tasks(5, 1)[0]
    result = run_seed("research_team", 0, task, InjectConfig(envs=["research_team"], per_seed=3, seed=5, db=db))
    store = open_store(db)
    ids = {s.id for s in store.list_traces(limit=100)}
    assert ids == {f"{task.id}-seed"} | {f"{task.id}-t{a.t}-{a.mode}" for a in result.attempts}
    for a in result.attempts:
        stored = store.get_trace(f"{task.id}-t{a.t}-{a.mode}")
        assert stored.outcome.success == (a.status == "succeeded")
        if a.trace is not None:
            assert [(s.agent, s.kind, s.content) for s in stored.steps] == [(s.agent, s.kind, s.content) for s in a.trace.steps]
