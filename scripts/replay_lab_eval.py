"""The replay lab's measure (issue 44, item 5): `blend` leave-one-system-out, and `verify` over it, on eight framework teams.

    .venv/bin/python scripts/replay_lab_eval.py --json replay_lab.json [--tasks 12] [--teams ag2_experts,chart_desk | new | all]
        [--k 30] [--draws 3] [--controls 2] [--min-scored 8 --min-succeeded 20 --max-tasks 72] [--workers 2] [--adapt 3] [--adapt-draws 1] [--own-share 0.5] [--realdev ../shared/realdev] [--cache DIR]

For each team (its framework's real orchestration, `injectors.replay_lab.program`,
run as a separate process that sends every model call over HTTP to a live
gateway, `faultlens.gateway_cli.build_gateway_app`, whose upstream is the team's
simulated agents in this process, `injectors.replay_lab.SimulatedAgents`):

1. run `--tasks` fresh tasks through the gateway, each recorded as a run of the
   store; keep the failed runs in which an agent slipped. The gold is the first
   slip that fails the run by itself (`decisive_slip`: for a run with one slip,
   that slip; a first slip the agents recovered from is not the decisive error),
   known here only: the stored run has no label, and every method is given
   `attributor_view` of it. `first_slip_decisive` is the share of runs whose
   first slip is the gold, `verified_first_slip` verify's step accuracy against
   the first slip.
2. `loso_*`: the verdict of `blend` whose `learned` model was trained as the
   shipped one is (`benchmark.loso.datasets`) but without a run of the team's
   framework (`benchmark.loso.score_systems`'s folds; one model per framework,
   trained in a background process while the teams run, cached in `--cache`).
3. `verified_*`: `faultlens.rerun.verify.verify` over that base on the same
   runs: the team's program re-run as a subprocess with the candidate call
   corrected (drawn anew with the verdict's lesson; `--draws` draws of a changed
   candidate), judged by the environment's evaluator on the program's stdout.
   A verdict not verified is the base's. `reruns_*` and `not_verifiable` are of
   these verdicts (a verdict's reruns count the program's re-runs, controls
   included; a new draw that changes nothing is one model call, not a re-run).
4. `adapted_*` (with `--adapt`): `faultlens adapt` on the team's own successful runs of step 1
   (each call drawn anew from the agents, and errors injected, by re-running its program; the failures kept with
   exact labels), then
   `blend` whose `learned` model is the fold's training data plus those runs, on the same
   failed runs as `loso_*`.

Prints a markdown table and the time taken; `--json OUT` writes
`{teams: {name: {n, loso_step, ...}}, mean: {...}, runs: {...}, settings: {...}}`.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from faultlens.attributors.learned.model import OWN_SHARE  # noqa: E402
from faultlens.middleware.model.trace import GoldLabel, Task  # noqa: E402

# The eight teams of issue 44's measure of record (the default), then the frameworks added since (issue 47), run with
# `--teams new` (or by name; `--teams all`: both). CrewAI, Semantic Kernel and CAMEL run in the `frameworks2`
# virtualenv's interpreter (`replay_lab.program_command`), the lab itself in this one.
RECORD_TEAMS = {"ag2_experts": "AG2", "smol_analyst": "smolagents", "magentic_team": "Magentic-One", "agents_desk": "OpenAI Agents SDK",
                "supervisor_team": "LangGraph supervisor", "chart_desk": "PydanticAI", "adk_team": "Google ADK",
                "workflow_team": "LlamaIndex"}
NEW_TEAMS = {"docs_team": "Haystack", "airline_desk": "Agno", "schedule_desk": "DSPy", "code_desk": "Strands Agents",
             "clip_desk": "Agno, video", "search_crew": "CrewAI", "ledger_chat": "Semantic Kernel", "math_society": "CAMEL"}
TEAMS = {**RECORD_TEAMS, **NEW_TEAMS}
SHORTHANDS = {"record": list(RECORD_TEAMS), "new": list(NEW_TEAMS), "all": list(TEAMS)}
KEYS = ("n", "loso_step", "loso_agent", "verified_step", "verified_agent", "adapted_step", "adapted_agent",
        "reruns_median", "reruns_p90", "not_verifiable", "first_slip_decisive", "verified_first_slip")
ROOT = Path(__file__).resolve().parents[1]
SEED = 30_000  # the tasks' seed: fresh tasks, not the bundled benchmark's


@dataclass
class Case:
    """A failed run of a team whose agents slipped: what verify is given (the run id) and what it is scored on (gold)."""

    run_id: str
    task: Task
    gold: GoldLabel  # the first decisive slip (`decisive_slip`)
    slips: int
    calls: int
    first_step: int  # the step of the run's first slip (the gold when it is decisive)


@dataclass
class Recorded:
    """What running a team's tasks through the gateway gave."""

    team: str
    agents: Any  # the team's SimulatedAgents, kept for its re-runs
    store: Any
    cases: list[Case] = field(default_factory=list)
    succeeded: list[Task] = field(default_factory=list)  # the tasks of its successful runs (what `adapt` injects into)
    runs: int = 0
    failed: int = 0
    failed_without_slip: int = 0
    crashed: int = 0
    seconds: float = 0.0


def program_env(root: str, task: Task) -> dict[str, str]:
    return {**os.environ, "FAULTLENS_GATEWAY": root, "FAULTLENS_TASK": task.query, "OPENAI_API_KEY": "faultlens-lab"}


def record_team(team: str, n: int, store: Any, *, seed: int = SEED, timeout: float = 300.0,
                tendencies: dict[str, dict[str, float]] | None = None, min_scored: int = 0, max_tasks: int = 0,
                min_succeeded: int = 0, say: Callable[[str], None] = print) -> Recorded:
    """Run `n` tasks of `team` as separate processes through a live gateway recording into `store`
    (`tendencies`: the agents', default `LAB_TENDENCIES`); then more of the same seed's tasks, up to `max_tasks`
    in all, until `min_scored` failed runs with a slip are kept (a team whose agents rarely fail is otherwise
    scored on a handful of runs) and `min_succeeded` runs succeeded (what `adapt` reads)."""
    from faultlens.gateway_cli import build_gateway_app
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.replay_lab import SimulatedAgents, program_command
    from faultlens.injectors.slipping_team import first_slip
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.middleware.replay.gateway_calls import call_steps
    from faultlens.server.run import ServerThread

    started = time.monotonic()
    env = get_env(team)
    agents = SimulatedAgents(env, tendencies)
    out = Recorded(team, agents, store)
    app, gateway = build_gateway_app(store, CallableUpstream(agents), workers=0)
    with ServerThread(app) as server:
        for task in env.tasks(seed, max(n, max_tasks)):
            if out.runs >= n and len(out.cases) >= min_scored and len(out.succeeded) >= min_succeeded:
                break
            run_id = task.id or f"{team}-{out.runs}"
            run = agents.record(task, run_id)
            done = subprocess.run(program_command(team, run_id), shell=True, env=program_env(f"{server.url}/run/{run_id}", task),
                                  capture_output=True, text=True, timeout=timeout)
            gateway.flush(30)
            out.runs += 1
            if done.returncode != 0:
                out.crashed += 1
                say(f"  {run_id}: the program exited {done.returncode}: {done.stderr.strip()[-300:]}")
                success, detail = False, f"the program exited {done.returncode}"
            else:
                outcome = env.evaluate(task, done.stdout.strip() or None)
                success, detail = outcome.success, outcome.detail or ""
            posted = httpx.post(f"{server.url}/api/runs/{run_id}/outcome", json={"success": success, "detail": detail}, timeout=30)
            posted.raise_for_status()
            if success:
                out.succeeded.append(task)
                continue
            out.failed += 1
            first = run.gold
            steps = call_steps(store.get_trace(run_id))
            if first is None or first.step >= len(steps) or done.returncode != 0:
                out.failed_without_slip += first is None
                continue
            gold = first_slip([decisive_slip(agents, run, store.get_trace(run_id), team, timeout)]) or first
            # Call i of the run is the run's i-th recorded call step.
            out.cases.append(Case(run_id, task, gold.model_copy(update={"step": steps[gold.step]}), len(run.slips), run.calls,
                                  steps[first.step]))
    gateway.close()
    out.seconds = time.monotonic() - started
    return out


def decisive_slip(agents: Any, run: Any, trace: Any, team: str, timeout: float) -> Any:
    """The run's first slip that fails it by itself, or its first slip when none does alone.

    A run whose first slip was harmless (its agents recovered) failed by a later one: re-run with the recorded
    calls replayed through a slip's call and no agent slipping after it (the lab's oracle: it can stop its agents
    slipping, no method can), the run fails again only from a slip that decides it. A run's only slip decides it.
    """
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.replay_lab import program_command
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.middleware.replay.gateway_calls import call_steps, recording_of
    from faultlens.rerun.contract import Judge, Program
    from faultlens.rerun.trial import TrialSpec, run_trial

    if len(run.slips) < 2:
        return run.slips[0]
    env = get_env(team)
    recording, calls = recording_of(trace), call_steps(trace)
    judge = Judge(lambda stdout: env.evaluate(run.task, stdout.strip() or None).success)
    program = Program(program_command(team, run.run_id), timeout=timeout)
    for slip in run.slips:
        agents.rerun(run.task, slips=False)
        trial, _ = run_trial(TrialSpec(recording, slip.call, calls[slip.call], run.task.query, control=True), program, judge,
                             CallableUpstream(agents))
        if trial.outcome == "failure":
            return slip
    return run.slips[0]


def verify_team(recorded: Recorded, base: Any, *, k: int, draws: int, controls: int = 1, timeout: float = 300.0,
                say: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """`verify` each kept run of the team over `base`; one row per run: the gold, the base's and verify's verdicts."""
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.replay_lab import program_command
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.rerun.contract import Judge, Program
    from faultlens.rerun.verify import verdict_json, verify

    env = get_env(recorded.team)
    rows = []
    for case in recorded.cases:
        recorded.agents.rerun(case.task)
        judge = Judge(lambda stdout, task=case.task: env.evaluate(task, stdout.strip() or None).success)
        program = Program(program_command(recorded.team, case.run_id), timeout=timeout)
        started = time.monotonic()
        verdict = verdict_json(verify(recorded.store, case.run_id, program, CallableUpstream(recorded.agents), judge=judge,
                                      method=base, k=k, draws=draws, max_reruns=k * draws + controls,
                                      controls=controls))
        trace = recorded.store.get_trace(case.run_id)
        base_step = verdict["base_step"]
        rows.append({"run": case.run_id, "gold_step": case.gold.step, "gold_agent": case.gold.agent, "gold_mode": case.gold.mode,
                     "first_slip_step": case.first_step,
                     "slips": case.slips, "steps": len(trace.steps), "base_step": base_step,
                     "base_agent": trace.steps[base_step].agent if base_step is not None else None,
                     "step": verdict["step"], "agent": verdict["agent"], "verified": verdict["verified"],
                     "reruns": verdict["reruns"], "not_verifiable": verdict["not_verifiable"],
                     "outcomes": [t.get("outcome") for t in verdict["trials"]], "seconds": round(time.monotonic() - started, 2)})
        say(f"  {case.run_id}: gold {case.gold.step} ({case.gold.agent} {case.gold.mode}), base {base_step}, "
            f"verify {verdict['step']} {'verified' if verdict['verified'] else 'not verified'} after {verdict['reruns']} re-run(s)")
    return rows


# -- leave-one-system-out models -------------------------------------------------------------------------------
def training_specs(realdev: Path) -> list[str]:
    """The shipped model's training sets (`benchmark.loso.datasets`); the bundled dev split alone without the real sets."""
    from faultlens.benchmark.loso import datasets
    from faultlens.benchmark.train import SHIPPED_BUNDLED

    return datasets(realdev)[0] if (realdev / "trail").is_dir() and (realdev / "agentrx").is_dir() else [SHIPPED_BUNDLED]


def _cache_key(specs: list[str], system: str) -> str:
    learned = ROOT / "attributors" / "learned"
    parts = [json.dumps(specs), system] + [(learned / f).read_text() for f in ("model.py", "features.py")]
    parts += [str((ROOT / "benchmark" / "data" / "dev.jsonl.gz").stat().st_size)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def fold_path(cache: Path, specs: list[str], system: str) -> Path:
    """Where the model trained without `system` is kept (its name changes with the training data and code)."""
    return cache / f"loso-{system}-{_cache_key(specs, system)}.joblib"


def train_folds(systems: list[str], specs: list[str], cache: str) -> dict[str, str]:
    """One `learned` model per system, in this order, trained on `specs` without a run of that system; their paths.

    A model already in `cache` is not trained again; each appears at its path whole (written, then renamed)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from faultlens.attributors.learned import fit, trace_features
    from faultlens.attributors.learned.model import save
    from faultlens.benchmark.loso import system_of
    from faultlens.benchmark.train import training_set

    paths = {s: fold_path(Path(cache), specs, s) for s in systems}
    missing = [s for s in systems if not paths[s].exists()]
    if missing:
        train, sources, _ = training_set(specs)
        features = {t.id: trace_features(t) for t in train}
        for system in missing:
            model = fit([t for t in train if system_of(t) != system], seed=0, features=features, sources=sources)
            partial = save(model, paths[system].with_suffix(".partial"))
            os.replace(partial, paths[system])
    return {s: str(p) for s, p in paths.items()}


def wait_for(path: Path, limit: float = 3600.0) -> Path:
    """`path` once the training process has written it."""
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no fold model at {path} after {limit:.0f} s")
        time.sleep(1.0)
    return path


def team_job(team: str, tasks: int, seed: int, k: int, draws: int, timeout: float, model: str, scratch: str,
             adapt_per_run: int = 0, specs: list[str] | None = None, system: str = "", own_share: float = 0.5,
             controls: int = 1, min_scored: int = 0, max_tasks: int = 0, adapt_draws: int = 1, min_succeeded: int = 0) -> dict[str, Any]:
    """One team, start to end: its runs through the gateway, then verify over its fold's `blend` (a worker's job)."""
    import logging

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    from faultlens.attributors.learned import Blend
    from faultlens.attributors.learned.model import load
    from faultlens.middleware.store.sqlite import open_store

    def say(line: str) -> None:
        print(line, flush=True)

    rec = record_team(team, tasks, open_store(Path(scratch) / f"{team}.db"), seed=seed, timeout=timeout, min_scored=min_scored,
                      max_tasks=max_tasks, min_succeeded=min_succeeded, say=say)
    say(f"{team}: {rec.runs} runs in {rec.seconds:.0f} s, {rec.failed} failed, {len(rec.cases)} kept "
        f"({rec.failed_without_slip} failed with no slip, {rec.crashed} crashed)")
    waited = time.monotonic()
    base = Blend(model=load(wait_for(Path(model))))
    started = time.monotonic()
    rows = verify_team(rec, base, k=k, draws=draws, controls=controls, timeout=timeout, say=say)
    seconds = time.monotonic() - started
    say(f"{team}: {len(rows)} run(s) verified in {seconds:.0f} s ({started - waited:.0f} s waiting for its fold model)")
    scores = team_scores(rows)
    adapted: dict[str, Any] = {}
    if adapt_per_run and specs is not None:
        adapted_base, adapted = adapt_team(rec, specs, system, Path(scratch) / f"{team}-adapt", per_run=adapt_per_run, own_share=own_share,
                                           timeout=timeout, draws=adapt_draws, say=say)
        scores.update(adapted_scores(rec, adapted_base))
    return {"scores": scores,
            "runs": {"runs": rec.runs, "failed": rec.failed, "kept": len(rec.cases), "failed_without_slip": rec.failed_without_slip,
                     "crashed": rec.crashed, "record_seconds": round(rec.seconds, 1), "verify_seconds": round(seconds, 1),
                     "rows": rows, "adapt": adapted}}


def adapt_team(rec: Recorded, specs: list[str], system: str, out: Path, *, per_run: int, timeout: float, own_share: float,
               draws: int = 1, say: Callable[[str], None] = print) -> tuple[Any, dict[str, Any]]:
    """`faultlens adapt` on the team's successful runs (the program re-run as a subprocess per attempt), then `blend`
    with `learned` trained on the fold's data (without the team's framework) plus the injected failures."""
    from faultlens.attributors.learned import Blend, fit
    from faultlens.benchmark.loso import system_of
    from faultlens.benchmark.train import training_set
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.replay_lab import program_command
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.rerun.adapt import adapt, kind_of
    from faultlens.rerun.contract import Judge, Program

    env = get_env(rec.team)
    by_query = {rec.store.get_trace(task.id).task.query: task for task in rec.succeeded if task.id}
    current: dict[str, Task] = {}

    def program(variables: Any) -> str:
        task = by_query[variables["FAULTLENS_TASK"]]
        current["task"] = task
        rec.agents.rerun(task)
        done = subprocess.run(program_command(rec.team, str(task.id)), shell=True, env={**os.environ, **variables},
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"the program exited {done.returncode}: {done.stderr.strip()[-200:]}")
        return done.stdout

    judge = Judge(lambda stdout: env.evaluate(current["task"], stdout.strip() or None).success)
    started = time.monotonic()
    # adapt draws a call anew before re-running the program: the agents answer it for the task whose run asked it.
    agents = CallableUpstream(rec.agents.for_recorded(rec.store, rec.succeeded))
    result = adapt(rec.store, Program(program, timeout=timeout), agents, out, judge=judge,
                   runs=len(rec.succeeded) or None, per_run=per_run, draws=draws)
    say(f"{rec.team}: adapt made {len(result.traces)} labelled failure(s) from {len(rec.succeeded)} successful run(s) "
        f"in {time.monotonic() - started:.0f} s; yield {result.yield_by_mode()}")
    train, sources, _ = training_set(specs)
    kept = [t for t in train if system_of(t) != system]
    sources.update({t.id: f"adapt:{kind_of(t)}" for t in result.traces})
    model = fit(kept + result.traces, seed=0, sources=sources, own={t.id for t in result.traces}, own_share=own_share)
    return Blend(model=model), {"injected": len(result.traces), "attempts": len(result.attempts), "yield": result.yield_by_mode()}


def adapted_scores(rec: Recorded, base: Any) -> dict[str, Any]:
    """Step and agent accuracy of `base` on the team's scored failed runs (the gold never shown to it)."""
    from faultlens.middleware.model.answer_key import attributor_view

    rows = []
    for case in rec.cases:
        trace = rec.store.get_trace(case.run_id)
        verdict = base.attribute(attributor_view(trace))
        rows.append((verdict.step == case.gold.step, verdict.agent == case.gold.agent))
    n = len(rows) or 1
    return {"adapted_step": round(sum(s for s, _ in rows) / n, 4) if rows else None,
            "adapted_agent": round(sum(a for _, a in rows) / n, 4) if rows else None}


# -- the table --------------------------------------------------------------------------------------------------
def _share(rows: list[dict[str, Any]], fn: Callable[[dict[str, Any]], bool]) -> float | None:
    return round(sum(bool(fn(r)) for r in rows) / len(rows), 4) if rows else None


def team_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    reruns = [r["reruns"] for r in rows]
    return {"n": len(rows),
            "loso_step": _share(rows, lambda r: r["base_step"] == r["gold_step"]),
            "loso_agent": _share(rows, lambda r: r["base_agent"] == r["gold_agent"]),
            "verified_step": _share(rows, lambda r: r["step"] == r["gold_step"]),
            "verified_agent": _share(rows, lambda r: r["agent"] == r["gold_agent"]),
            "adapted_step": None, "adapted_agent": None,
            "reruns_median": float(statistics.median(reruns)) if reruns else None,
            "reruns_p90": round(float(np.percentile(reruns, 90)), 2) if reruns else None,
            "not_verifiable": _share(rows, lambda r: r["not_verifiable"]),
            "first_slip_decisive": _share(rows, lambda r: r["first_slip_step"] == r["gold_step"]),
            "verified_first_slip": _share(rows, lambda r: r["step"] == r["first_slip_step"])}


def mean_scores(teams: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each team weighs the same; n is the total."""
    out: dict[str, Any] = {"n": sum(t["n"] for t in teams.values())}
    for key in KEYS[1:]:
        values = [t[key] for t in teams.values() if t[key] is not None]
        out[key] = round(statistics.fmean(values), 4) if values else None
    return out


def markdown(teams: dict[str, dict[str, Any]], mean: dict[str, Any]) -> str:
    head = ("| team (framework) | n | loso step | loso agent | verified step | verified agent | adapted step | adapted agent | reruns median "
            "| reruns p90 | not verifiable | first slip decisive | verified = first slip |")
    lines = [head, "|" + "|".join(["---"] * (len(KEYS) + 1)) + "|"]

    def cell(value: Any) -> str:
        return "–" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)

    for name, scores in [*((f"{t} ({TEAMS.get(t, t)})", s) for t, s in teams.items()), ("**mean**", mean)]:
        lines.append("| " + " | ".join([name] + [cell(scores[k]) for k in KEYS]) + " |")
    return "\n".join(lines)


def chosen_teams(spec: str) -> list[str]:
    """The teams `--teams` names: comma-separated names or shorthands (`SHORTHANDS`), each team once, in order."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    return list(dict.fromkeys(team for name in names for team in SHORTHANDS.get(name, [name])))


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="Write the scores here.")
    parser.add_argument("--teams", default="record", help="Comma-separated framework environments, or `record` (the eight of "
                        "issue 44's measure, the default), `new` (the frameworks added since) or `all`.")
    parser.add_argument("--tasks", type=int, default=12, help="Tasks run per team (only failed runs with a slip are scored).")
    parser.add_argument("--seed", type=int, default=SEED, help="The tasks' seed.")
    parser.add_argument("--k", type=int, default=30, help="Candidates verify tries, earliest first (the base's top k; the "
                        "in-process gateway experiment's 30: every call of these runs).")
    parser.add_argument("--draws", type=int, default=2, help="Draws of a candidate whose new draw changed it without fixing the run "
                        "(the in-process experiment's 2: a slip downstream may undo a correction).")
    parser.add_argument("--controls", type=int, default=2, help="Re-runs with a fixing candidate kept as recorded that must all "
                        "still fail before verify confirms it (`faultlens verify --controls`; these agents sample, so one "
                        "control can fail by a later slip drawn again).")
    parser.add_argument("--min-scored", type=int, default=0, help="Run more of the seed's tasks, up to --max-tasks, until a team "
                        "has this many scored (failed, slipped) runs.")
    parser.add_argument("--min-succeeded", type=int, default=0, help="Run more of the seed's tasks, up to --max-tasks, until a "
                        "team has this many successful runs (what --adapt learns from; their failed runs are scored too).")
    parser.add_argument("--max-tasks", type=int, default=0, help="The most tasks a team runs for --min-scored and --min-succeeded.")
    parser.add_argument("--workers", type=int, default=2, help="Teams run at once (each in its own process).")
    parser.add_argument("--realdev", type=Path, default=ROOT.parent / "shared" / "realdev", help="The real datasets (TRAIL, AgentRx).")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "faultlens-replay-lab",
                        help="Where the fold models are kept (one per framework, reused while the training data and code are the same).")
    parser.add_argument("--timeout", type=float, default=300.0, help="Seconds one run of a team's program may take.")
    parser.add_argument("--adapt", type=int, default=0, metavar="PER_RUN",
                        help="Also run `faultlens adapt` on each team's successful runs, PER_RUN injections a run (0: not).")
    parser.add_argument("--adapt-draws", type=int, default=1, metavar="N",
                        help="adapt's new draws of each call of a successful run (`faultlens adapt --draws`; 0: injections only).")
    parser.add_argument("--own-share", type=float, default=OWN_SHARE, help="The share of the training weight the team's adapted "
                        "runs get (`learned.model.OWN_SHARE`; 0: weighed as one more source).")
    args = parser.parse_args(argv)

    from faultlens.injectors.envs import get as get_env

    teams = chosen_teams(args.teams)
    unknown = [t for t in teams if t not in TEAMS]
    if unknown:
        parser.error(f"unknown team(s) {', '.join(unknown)}; teams: {', '.join(TEAMS)} (or {', '.join(SHORTHANDS)})")
    started = time.monotonic()
    systems = {t: get_env(t).framework for t in teams}
    specs = training_specs(args.realdev)
    print(f"leave-one-system-out models: learned trained on {' + '.join(specs)} without each team's framework "
          f"(a background process; cached in {args.cache})", flush=True)
    context = get_context("spawn")
    trainer = ProcessPoolExecutor(max_workers=1, mp_context=context)
    folds: Future = trainer.submit(train_folds, list(dict.fromkeys(systems.values())), specs, str(args.cache))
    scratch = tempfile.mkdtemp(prefix="faultlens-replay-lab-")
    with ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=context) as pool:
        jobs = {team: pool.submit(team_job, team, args.tasks, args.seed, args.k, args.draws, args.timeout,
                                  str(fold_path(args.cache, specs, systems[team])), scratch, args.adapt, specs, systems[team],
                                  args.own_share, args.controls, args.min_scored, args.max_tasks, args.adapt_draws,
                                  args.min_succeeded)
                for team in teams}
        done = {team: job.result() for team, job in jobs.items()}
    folds.result()
    trainer.shutdown()
    scores = {team: done[team]["scores"] for team in teams}
    runs = {team: done[team]["runs"] for team in teams}
    mean = mean_scores(scores)
    seconds = time.monotonic() - started
    print(markdown(scores, mean))
    print(f"{sum(r['runs'] for r in runs.values())} runs, {sum(len(r['rows']) for r in runs.values())} verified, "
          f"in {seconds:.0f} s ({args.workers} worker(s))")
    if args.json_path is not None:
        settings = {"tasks": args.tasks, "seed": args.seed, "k": args.k, "draws": args.draws, "controls": args.controls,
                    "min_scored": args.min_scored, "min_succeeded": args.min_succeeded, "max_tasks": args.max_tasks,
                    "adapt_per_run": args.adapt, "adapt_draws": args.adapt_draws,
                    "own_share": args.own_share, "training": specs,
                    "base": "blend (learned trained without the team's framework)", "seconds": round(seconds, 1),
                    "workers": args.workers}
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps({"teams": scores, "mean": mean, "runs": runs, "settings": settings}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
