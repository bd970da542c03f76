"""The measure for failure patterns (issue 45, item 5): do the patterns of a team's failed runs recover its tendencies?

    nice -n 10 .venv/bin/python scripts/patterns_eval.py --json patterns_eval.json [--tasks 300] [--teams ag2_experts,chart_desk | new | all]
        [--method blend|verify] [--mode-from base|correction] [--seed 40000] [--workers 2]

For each of the eight framework teams (the replay lab's, with its tendencies,
`injectors.replay_lab.LAB_TENDENCIES`; `--teams new` the frameworks added since, whose `frameworks2` teams run their
program in their virtualenv's interpreter, every call over HTTP to a gateway served here), in one process per team:

1. run `--tasks` fresh tasks in process with every model call through a
   gateway (`middleware.capture.live_gateway.Gateway`, recording each call as a
   step of the run into an in-memory store) whose upstream is the team's
   simulated agents (`injectors.replay_lab.SimulatedAgents`); no lessons are
   shown, so the slips are the tendencies' alone. Each run's outcome is posted
   to the store. The first slip of a run is its gold, kept here and never
   stored.
2. attribute each failed run with `--method` (default `blend`, the default
   method) through `feedback.loop.attribute_and_reflect`, as the server's
   worker does. `--method verify`: the worker of `faultlens serve --rerun CMD`,
   a `rerun.verify.Verifier` over `blend`: every call of the run a candidate
   (k = its calls, `--draws` 3), the team's program re-run in process as a
   callable `Program` (its framework here, its calls over HTTP to the re-run's
   gateway, answered by the same simulated agents, drawn anew), judged by the
   environment's evaluator; the verdict is stored, so `find_patterns` groups
   by it. `--mode-from correction` reads a verified verdict's mode from what
   the correction changed (`attributors.methods.correction`), else it is
   blend's;
3. `feedback.patterns.find_patterns(store)` and score it against the first
   slips: a *tendency* is an (agent, mode) that is the first slip of at least
   `MIN_SLIPS` failed runs; it is recovered when a pattern among the top 5
   names that agent and mode. `purity_top5` is the mean over the top 5
   patterns of the share of a pattern's runs whose first slip is its agent and
   mode.

Beside these, per team, what explains a shortfall: `agent_accuracy`,
`mode_accuracy` and `step_accuracy` (the verdict at the first slip's own call)
of the verdicts against the first slips, `verdicts_by_tendency` (what the
verdicts of each tendency's runs said), and the same two
scores for patterns found from the gold itself (`oracle_*`: each failed run's
verdict replaced by its first slip, so only the grouping is measured).

Prints a markdown table (with `--method verify`, the verified runs and the verdict at the slip's call in place of the
gold verdicts' columns) and the time taken; `--json OUT` writes
`{teams: {name: {tendencies_recovered, tendencies, purity_top5, runs, failed, ...}}, mean: {...}, settings: {...}}`.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The replay lab's eight teams (the default, issue 45's measure), then the frameworks added since (issue 47: `--teams new`
# or by name, `--teams all` for both). A team whose framework is not importable here (the `frameworks2` extra: CrewAI,
# Semantic Kernel, CAMEL) runs its program in its virtualenv's interpreter, through a gateway served over HTTP.
RECORD_TEAMS = ("ag2_experts", "smol_analyst", "magentic_team", "agents_desk", "supervisor_team", "chart_desk", "adk_team",
                "workflow_team")
NEW_TEAMS = ("docs_team", "airline_desk", "schedule_desk", "code_desk", "clip_desk", "search_crew", "ledger_chat", "math_society")
TEAMS = RECORD_TEAMS + NEW_TEAMS
SHORTHANDS = {"record": RECORD_TEAMS, "new": NEW_TEAMS, "all": TEAMS}
SEED = 40_000  # the tasks' seed: fresh tasks, neither the bundled benchmark's nor the replay lab's (30_000)
DRAWS = 3  # `--method verify`: draws of a candidate call whose new draw changed it without fixing the run
MIN_SLIPS = 5  # first slips an (agent, mode) needs to count as a tendency
TOP = 5
SCORES = ("tendencies_recovered", "tendencies", "purity_top5", "runs", "failed", "attributed", "agents_named", "agent_accuracy", "mode_accuracy",
          "step_accuracy", "verified",
          "oracle_tendencies_recovered", "oracle_purity_top5")

Slip = tuple[str, str]  # (agent, mode) of a run's first slip


@dataclass
class TeamRuns:
    """A team's runs through the gateway: the store they were recorded in and each failed run's first slip."""

    team: str
    store: Any
    runs: int = 0
    crashed: int = 0
    failed: list[str] = field(default_factory=list)
    first_slip: dict[str, Slip | None] = field(default_factory=dict)  # failed run -> its first slip (None: no slip)
    first_call: dict[str, int] = field(default_factory=dict)  # failed run -> the call of its first slip
    agents: Any = None  # the team's SimulatedAgents, kept to answer the re-runs of `--method verify`
    tasks: dict[str, Any] = field(default_factory=dict)  # failed run -> its task (what a re-run runs again)


def run_team(team: str, tasks: int, store: Any, *, seed: int = SEED, tendencies: dict[str, dict[str, float]] | None = None,
             say: Callable[[str], None] = print) -> TeamRuns:
    """Run `tasks` fresh tasks of `team` in process, every model call through a gateway recording into `store`."""
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.envs.framework import routed_through
    from faultlens.injectors.replay_lab import SimulatedAgents
    from faultlens.middleware.capture.live_gateway import RUN_HEADER, TASK_HEADER, Gateway
    from faultlens.middleware.capture.upstream import CallableUpstream

    env = get_env(team)
    agents = SimulatedAgents(env, tendencies)
    gateway = Gateway(CallableUpstream(agents), store)  # no lessons provider: nothing is shown, every slip is a tendency's
    out = TeamRuns(team, store, agents=agents)
    headers: dict[str, str] = {}

    def through_gateway(_inner: Callable[[str, dict[str, Any]], dict[str, Any]]) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
        def call(agent: str, request: dict[str, Any]) -> dict[str, Any]:
            answer = gateway.handle(agent, request, headers)
            if answer.status != 200:
                raise RuntimeError(f"the gateway answered {answer.status} to {agent}'s call: {answer.body[:300]!r}")
            return json.loads(answer.body)

        return call

    if env.missing():  # its framework runs in another interpreter: its program in a process of its own
        return run_team_elsewhere(env, agents, tasks, store, seed=seed, say=say)
    for task in env.tasks(seed, tasks):
        run_id = task.id or f"{team}-{out.runs}"
        run = agents.record(task, run_id)
        headers.update({RUN_HEADER: run_id, TASK_HEADER: task.query})
        out.runs += 1
        try:
            with routed_through(through_gateway):
                result = env.run(task, sim={"seed": 0}, trace_id=f"{team}-{run_id}")
        except Exception as exc:  # a framework's crash is a run lost, not the measure's end
            out.crashed += 1
            say(f"  {run_id}: the team crashed ({type(exc).__name__}: {str(exc)[:200]})")
            continue
        gateway.flush(30)  # the run's steps are in the store before its outcome arrives
        outcome = result.trace.outcome
        store.set_outcome(run_id, outcome)  # what POST /api/runs/{id}/outcome does
        tally_run(out, run_id, task, run, outcome)
    gateway.close()
    return out


def tally_run(out: TeamRuns, run_id: str, task: Any, run: Any, outcome: Any) -> None:
    """Keep a finished run's failure and its first slip."""
    if outcome is None or outcome.success:
        return
    out.failed.append(run_id)
    out.tasks[run_id] = task
    first = run.slips[0] if run.slips else None
    out.first_slip[run_id] = (first.agent, first.mode) if first else None
    if first is not None:
        out.first_call[run_id] = first.call


def run_team_elsewhere(env: Any, agents: Any, tasks: int, store: Any, *, seed: int, say: Callable[[str], None]) -> TeamRuns:
    """`run_team` for a team whose framework is another interpreter's: each task its program
    (`replay_lab.program_command`) in a process of its own, its calls over HTTP to a gateway served here."""
    import subprocess

    from faultlens.gateway_cli import build_gateway_app
    from faultlens.injectors.replay_lab import program_command
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.server.run import ServerThread

    out = TeamRuns(env.name, store, agents=agents)
    app, gateway = build_gateway_app(store, CallableUpstream(agents), workers=0)  # no worker: attributed below
    with ServerThread(app) as server:
        for task in env.tasks(seed, tasks):
            run_id = task.id or f"{env.name}-{out.runs}"
            run = agents.record(task, run_id)
            out.runs += 1
            done = subprocess.run(program_command(env.name, run_id), shell=True, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "FAULTLENS_GATEWAY": f"{server.url}/run/{run_id}", "FAULTLENS_TASK": task.query})
            gateway.flush(30)
            if done.returncode != 0:
                out.crashed += 1
                say(f"  {run_id}: the program exited {done.returncode}: {done.stderr.strip()[-200:]}")
                continue
            outcome = env.evaluate(task, done.stdout.strip() or None)  # the environment's evaluator, as in process
            store.set_outcome(run_id, outcome)
            tally_run(out, run_id, task, run, outcome)
    gateway.close()
    return out
def attribute(store: Any, run_ids: list[str], method: str | Any = "blend") -> int:
    """Attribute each failed run with `method` as the loop's worker does; how many got a usable verdict."""
    from faultlens.feedback.loop import attribute_and_reflect
    from faultlens.middleware.model.trace import AttributionStatus

    return sum(attribute_and_reflect(store, run_id, method).attribution.status == AttributionStatus.ok for run_id in run_ids)


def in_process_program(team: str, task: Any) -> Any:
    """The team's program on `task` as a callable `Program`: its framework runs in this process, every model call sent
    over HTTP to the re-run's gateway (`$FAULTLENS_GATEWAY`), as `replay_lab.program` does in a process of its own."""
    import httpx

    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.envs.framework import routed_through
    from faultlens.injectors.replay_lab.program import over_http
    from faultlens.rerun.contract import Program

    env = get_env(team)
    if env.missing():  # its framework is another interpreter's: the program in a process of its own
        from faultlens.injectors.replay_lab import program_command

        return Program(program_command(team, str(task.id)), timeout=300.0)

    def run(variables: Any) -> str:
        with httpx.Client(timeout=120.0) as client, routed_through(over_http(variables["FAULTLENS_GATEWAY"].rstrip("/"), client)):
            return env.run(task, sim={"seed": 0}, trace_id=f"{team}-{task.id}").answer or ""

    return Program(run, timeout=300.0)


def verify_runs(runs: TeamRuns, *, base: str = "blend", draws: int = DRAWS, mode_from: str = "base",
                say: Callable[[str], None] = print) -> tuple[int, int]:
    """Each failed run attributed by `Verifier` over `base` (as `faultlens serve --rerun CMD`'s worker does), its verdict
    stored: the team's program re-run in process, judged by the environment's evaluator, every call a candidate
    (`draws` draws each). (How many got a usable verdict, how many of those a re-run verified.)"""
    from faultlens.attributors import build
    from faultlens.feedback.patterns import latest_verdict
    from faultlens.injectors.envs import get as get_env
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.middleware.replay.gateway_calls import call_steps
    from faultlens.rerun.contract import Judge
    from faultlens.rerun.verify import Verifier

    env = get_env(runs.team)
    ranker = build(base)  # one model, loaded once, ranks every run
    upstream = CallableUpstream(runs.agents)
    usable = verified = 0
    for run_id in runs.failed:
        task = runs.tasks[run_id]
        runs.agents.rerun(task)  # the re-runs' draws are not the recorded run's slips
        k = max(1, len(call_steps(runs.store.get_trace(run_id))))
        judge = Judge(lambda stdout, task=task: env.evaluate(task, stdout.strip() or None).success)
        verifier = Verifier(in_process_program(runs.team, task), upstream, judge=judge, method=ranker, k=k, draws=draws,
                            max_reruns=k * draws, mode_from=mode_from)
        usable += attribute(runs.store, [run_id], verifier)
        verdict = latest_verdict(runs.store, run_id)
        verified += bool(verdict is not None and verdict.details.get("verified"))
    say(f"{runs.team}: {verified} of {len(runs.failed)} failed run(s) verified by re-run")
    return usable, verified


def score(patterns: list[Any], first_slip: dict[str, Slip | None], *, min_slips: int = MIN_SLIPS, top: int = TOP) -> dict[str, Any]:
    """Tendencies (an (agent, mode) first slip of >= `min_slips` failed runs) named by a top pattern, and the top's purity."""
    counts = Counter(slip for slip in first_slip.values() if slip is not None)
    tendencies = sorted(slip for slip, n in counts.items() if n >= min_slips)
    best = patterns[:top]
    named = {(p.agent, p.mode) for p in best}
    agents = {p.agent for p in best}
    purities = [sum(first_slip.get(r) == (p.agent, p.mode) for r in p.runs) / p.count for p in best if p.count]
    return {"tendencies_recovered": sum(t in named for t in tendencies), "tendencies": len(tendencies),
            "agents_named": sum(a in agents for a, _ in tendencies),  # the tendency's agent named, whatever the mode
            "purity_top5": round(statistics.fmean(purities), 4) if purities else None,
            "missed": [f"{a} {m} ({counts[a, m]} first slips)" for a, m in tendencies if (a, m) not in named],
            "top5": [f"{p.title()} ({p.count})" for p in best]}


def verdict_accuracy(store: Any, first_slip: dict[str, Slip | None]) -> tuple[float | None, float | None]:
    """Shares of the attributed failed runs with a first slip whose verdict names its agent, and its mode."""
    from faultlens.feedback.patterns import latest_verdict

    pairs = [(verdict, slip) for run_id, slip in first_slip.items()
             if slip is not None and (verdict := latest_verdict(store, run_id)) is not None]
    if not pairs:
        return None, None
    return (round(sum(v.agent == s[0] for v, s in pairs) / len(pairs), 4), round(sum(v.mode == s[1] for v, s in pairs) / len(pairs), 4))


def slip_diagnosis(runs: TeamRuns) -> tuple[float | None, dict[str, dict[str, int]]]:
    """The share of failed runs with a first slip whose verdict names its call (the step), and per tendency what the
    verdicts of its runs said (`agent mode`, `+step` when at the slip's own call, `verified` when a re-run confirmed)."""
    from faultlens.feedback.patterns import latest_verdict
    from faultlens.middleware.replay.gateway_calls import call_steps

    right, said = [], {}
    for run_id, slip in runs.first_slip.items():
        verdict = latest_verdict(runs.store, run_id)
        if slip is None or verdict is None:
            continue
        calls = call_steps(runs.store.get_trace(run_id))
        at = runs.first_call.get(run_id, len(calls))
        on_slip = at < len(calls) and verdict.step == calls[at]
        right.append(on_slip)
        label = f"{verdict.agent} {verdict.mode}{' +step' if on_slip else ''}{' verified' if verdict.details.get('verified') else ''}"
        tally = said.setdefault(f"{slip[0]} {slip[1]}", {})
        tally[label] = tally.get(label, 0) + 1
    ordered = {k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in sorted(said.items())}
    return (round(sum(right) / len(right), 4) if right else None), ordered


def oracle_patterns(runs: TeamRuns) -> list[Any]:
    """The patterns of the team's failed runs had each verdict been its first slip (the grouping alone, measured)."""
    from faultlens.feedback.patterns import find_patterns
    from faultlens.middleware.model.trace import Attribution
    from faultlens.middleware.replay.gateway_calls import call_steps
    from faultlens.middleware.store import open_store

    gold_store = open_store(":memory:")
    for run_id, slip in runs.first_slip.items():
        trace = runs.store.get_trace(run_id)
        gold_store.save_trace(trace)
        calls = call_steps(trace)
        if slip is None or runs.first_call[run_id] >= len(calls):
            continue
        gold_store.save_attribution(Attribution(trace_id=run_id, method="gold", agent=slip[0], step=calls[runs.first_call[run_id]],
                                                mode=slip[1], reason="the first slip"))
    found = find_patterns(gold_store)
    gold_store.close()
    return found


def team_job(team: str, tasks: int, seed: int, method: str, mode_from: str = "base", draws: int = DRAWS) -> dict[str, Any]:
    """One team, start to end (a worker's job): its runs, their verdicts, the patterns and their scores."""
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    from faultlens.feedback.patterns import find_patterns
    from faultlens.middleware.store import open_store

    def say(line: str) -> None:
        print(line, flush=True)

    started = time.monotonic()
    store = open_store(":memory:")
    runs = run_team(team, tasks, store, seed=seed, say=say)
    ran = time.monotonic()
    verified = None
    if method == "verify":
        attributed, verified = verify_runs(runs, draws=draws, mode_from=mode_from, say=say)
    else:
        attributed = attribute(store, runs.failed, method)
    result = score(find_patterns(store), runs.first_slip)
    agent_accuracy, mode_accuracy = verdict_accuracy(store, runs.first_slip)
    step_accuracy, verdicts = slip_diagnosis(runs)
    oracle = score(oracle_patterns(runs), runs.first_slip)
    store.close()
    seconds = time.monotonic() - started
    print(f"{team}: {runs.runs} runs ({runs.crashed} crashed), {len(runs.failed)} failed, {attributed} attributed; "
          f"{result['tendencies_recovered']}/{result['tendencies']} tendencies recovered; "
          f"{ran - started:.0f} s running, {seconds - (ran - started):.0f} s attributing", flush=True)
    return {**result, "runs": runs.runs, "crashed": runs.crashed, "failed": len(runs.failed), "attributed": attributed,
            "no_slip": sum(s is None for s in runs.first_slip.values()), "agent_accuracy": agent_accuracy,
            "mode_accuracy": mode_accuracy, "step_accuracy": step_accuracy, "verified": verified, "verdicts_by_tendency": verdicts,
            "oracle_tendencies_recovered": oracle["tendencies_recovered"],
            "oracle_purity_top5": oracle["purity_top5"], "oracle_top5": oracle["top5"], "seconds": round(seconds, 1)}


def mean_row(teams: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in SCORES:
        values = [row[key] for row in teams.values() if row.get(key) is not None]
        out[key] = round(statistics.fmean(values), 4) if values else None
    recovered = sum(row["tendencies_recovered"] for row in teams.values())
    total = sum(row["tendencies"] for row in teams.values())
    out["recovered_share"] = round(recovered / total, 4) if total else None
    out["teams_all_recovered"] = sum(row["tendencies_recovered"] == row["tendencies"] for row in teams.values())
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def markdown(teams: dict[str, dict[str, Any]], mean: dict[str, Any]) -> str:
    head = ("| team | runs | failed | tendencies recovered | purity top 5 | tendency's agent named | verdict agent acc. | verdict mode acc. "
            "| gold verdicts: recovered | gold verdicts: purity |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, row in teams.items():
        lines.append(f"| {name} | {row['runs']} | {row['failed']} | {row['tendencies_recovered']}/{row['tendencies']} | "
                     f"{_cell(row['purity_top5'])} | {row['agents_named']}/{row['tendencies']} | {_cell(row['agent_accuracy'])} | {_cell(row['mode_accuracy'])} | "
                     f"{row['oracle_tendencies_recovered']}/{row['tendencies']} | {_cell(row['oracle_purity_top5'])} |")
    recovered = sum(row["tendencies_recovered"] for row in teams.values())
    oracle = sum(row["oracle_tendencies_recovered"] for row in teams.values())
    total = sum(row["tendencies"] for row in teams.values())
    named = sum(row["agents_named"] for row in teams.values())
    lines.append(f"| **mean** (tendencies: sum) | {_cell(mean['runs'])} | {_cell(mean['failed'])} | {recovered}/{total} | {_cell(mean['purity_top5'])} | "
                 f"{named}/{total} | "
                 f"{_cell(mean['agent_accuracy'])} | {_cell(mean['mode_accuracy'])} | {oracle}/{total} | "
                 f"{_cell(mean['oracle_purity_top5'])} |")
    return "\n".join(lines)


def verify_markdown(teams: dict[str, dict[str, Any]], mean: dict[str, Any]) -> str:
    """The table of `--method verify` (docs/patterns.md, "Verified verdicts"): the verified runs and the slip's call beside the scores."""
    head = ("| team | runs | failed | verified | tendencies recovered | purity top 5 | verdict agent acc. | verdict mode acc. "
            "| verdict at the slip's call |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, row in teams.items():
        lines.append(f"| {name} | {row['runs']} | {row['failed']} | {_cell(row['verified'])} | {row['tendencies_recovered']}/{row['tendencies']} | "
                     f"{_cell(row['purity_top5'])} | {_cell(row['agent_accuracy'])} | {_cell(row['mode_accuracy'])} | {_cell(row['step_accuracy'])} |")
    recovered = sum(row["tendencies_recovered"] for row in teams.values())
    total = sum(row["tendencies"] for row in teams.values())
    counts = [f"{mean[key]:.0f}" if mean[key] is not None else "–" for key in ("runs", "failed", "verified")]
    lines.append(f"| **mean** (tendencies: sum) | {' | '.join(counts)} | **{recovered}/{total}** | {_cell(mean['purity_top5'])} | "
                 f"{_cell(mean['agent_accuracy'])} | {_cell(mean['mode_accuracy'])} | {_cell(mean['step_accuracy'])} |")
    return "\n".join(lines)


def chosen_teams(spec: str) -> list[str]:
    """The teams `--teams` names: comma-separated names or shorthands (`SHORTHANDS`), each team once, in order."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    return list(dict.fromkeys(team for name in names for team in SHORTHANDS.get(name, (name,))))


def slowest_first(teams: list[str]) -> list[str]:
    """`teams`, those whose program runs in another interpreter first: a process per run makes them several times
    slower, and started last they would run on alone while the other workers stand idle."""
    from faultlens.injectors.envs import get as get_env

    elsewhere = {team for team in teams if get_env(team).missing()}
    return sorted(teams, key=lambda team: team not in elsewhere)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", dest="json_path", type=Path, default=None, help="write the scores here")
    parser.add_argument("--tasks", type=int, default=300, help="tasks per team")
    parser.add_argument("--teams", default="record", help="comma-separated teams, or `record` (the replay lab's eight, the "
                        "default), `new` (the frameworks added since) or `all`")
    parser.add_argument("--method", default="blend", help="the attribution method (default: blend, the default method); "
                        "`verify`: blend's verdict verified by re-running the team's program in process")
    parser.add_argument("--mode-from", choices=("base", "correction"), default="base",
                        help="with --method verify: a verified verdict's mode is blend's, or read from what the correction changed")
    parser.add_argument("--draws", type=int, default=DRAWS, help="with --method verify: draws of each candidate call")
    parser.add_argument("--seed", type=int, default=SEED, help="the tasks' seed")
    parser.add_argument("--workers", type=int, default=2, help="processes running teams in parallel")
    args = parser.parse_args(argv)
    chosen = chosen_teams(args.teams)
    unknown = [t for t in chosen if t not in TEAMS]
    if unknown:
        parser.error(f"unknown team(s) {', '.join(unknown)}; teams: {', '.join(TEAMS)} (or {', '.join(SHORTHANDS)})")
    started = time.monotonic()
    if args.workers <= 1:
        done = {team: team_job(team, args.tasks, args.seed, args.method, args.mode_from, args.draws) for team in chosen}
    else:
        with ProcessPoolExecutor(max_workers=args.workers, mp_context=get_context("spawn")) as pool:
            futures = {team: pool.submit(team_job, team, args.tasks, args.seed, args.method, args.mode_from, args.draws)
                       for team in slowest_first(chosen)}
            done = {team: futures[team].result() for team in chosen}
    seconds = time.monotonic() - started
    mean = mean_row(done)
    print(verify_markdown(done, mean) if args.method == "verify" else markdown(done, mean))
    for name, row in done.items():
        if row["missed"]:
            print(f"{name}: missed {'; '.join(row['missed'])}; top 5: {'; '.join(row['top5'])}")
    print(f"{sum(r['runs'] for r in done.values())} runs of {len(done)} team(s) in {seconds:.0f} s ({args.workers} worker(s))")
    if args.json_path is not None:
        args.json_path.parent.mkdir(parents=True, exist_ok=True)
        args.json_path.write_text(json.dumps({"teams": done, "mean": mean, "seconds": round(seconds, 1),
                                              "settings": {"tasks": args.tasks, "seed": args.seed, "method": args.method,
                                                           "min_slips": MIN_SLIPS, "top": TOP, "mode": "in-process gateway",
                                                           **({"mode_from": args.mode_from, "draws": args.draws, "k": "all calls",
                                                               "base": "blend"} if args.method == "verify" else {})}},
                                             indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
