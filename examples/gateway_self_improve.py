"""Self-improvement for any framework: every model call through the live gateway, lessons given back at its door.

Four teams on four real agent frameworks (the bundled framework environments:
AG2 `ag2_experts`, smolagents `smol_analyst`, AutoGen Magentic-One
`magentic_team`, the OpenAI Agents SDK `agents_desk`) run their framework's own
orchestration against simulated agents. Every model call of a run goes through
one `middleware.capture.live_gateway.Gateway` (`injectors.slipping_team.GatewayTeam`): the
gateway records it as a step of the run in the store, and, for the agents it
is enabled for, adds the lessons memory holds for that agent and the run's
task to the system message (`feedback.gateway_lessons.GatewayLessons`). Nothing in the
frameworks' code knows about lessons.

Each team runs several rounds of fresh tasks (a task is never seen twice) in
four arms, each with its own empty store and memory:

- ``none``: no lessons (the gateway records, nothing is shown);
- ``terminal``: Reflexion-style, one lesson per failed run written from the task and
  the final answer (`TerminalReflector`), shown to every agent;
- ``attribution``: faultlens. The failed run the gateway recorded is attributed
  (`--attributor`, default ``counterfactual`` over ``learned``: the team is re-run
  with each candidate step drawn anew, earliest first, and the first whose new draw
  makes the task succeed is blamed, its mode read from what the correction
  changed), the offline reflector writes a lesson for the
  blamed agent, and the gateway shows it to that agent on similar tasks;
- ``oracle``: the same loop fed the exact gold label of each failure (the first
  slip of the run, known by construction) instead of an attributor's guess.

The simulated agents slip with per-agent, per-mode tendencies
(`injectors.slipping_team.TENDENCIES`; the slip is the environment's own error
rule of that mode) and follow a lesson shown to them under the rule of the
`research_desk` team: its mode is one of the agent's tendencies and its
situation shares a word with the task. A lesson for the wrong agent or mode
does nothing, so the attribution arm's lift measures how often the gateway's
recording, the attributor and the reflector route the right lesson to the
right agent. After each run the outcome is recorded (as `POST /api/runs/{id}/outcome`
would) and the loop's worker is waited for, so results are deterministic.

    python examples/gateway_self_improve.py                       # offline, all four frameworks
    python examples/gateway_self_improve.py --envs agents_desk --seeds 1 --rounds 3

Prints, per framework, the success rate per round and arm (mean ± sd over seeds),
each arm's lift over no feedback and the share of the oracle's lift (rounds 2
onward, paired by seed), and draws one plot.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import click

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ARMS = ("none", "terminal", "attribution", "oracle")
ENVS = ("ag2_experts", "smol_analyst", "magentic_team", "agents_desk")
FRAMEWORK_OF = {"ag2_experts": "AG2", "smol_analyst": "smolagents", "magentic_team": "Magentic-One", "agents_desk": "OpenAI Agents SDK"}


class OracleAttributor:
    """Attributes a run with its gold label: the first slip the simulated agents made (what a perfect attributor would say)."""

    name = "oracle"

    def __init__(self, golds: dict):
        self.golds = golds

    def attribute(self, trace):
        from faultlens.middleware.model.trace import Attribution, AttributionStatus

        gold = self.golds.get(trace.id)
        if gold is None:
            return Attribution(trace_id=trace.id, method=self.name, status=AttributionStatus.error, error="no slip in this run")
        return Attribution(trace_id=trace.id, method=self.name, agent=gold.agent, step=gold.step, mode=gold.mode,
                           reason=gold.reason, confidence=1.0, backend="gold")

    async def aattribute(self, trace):
        return self.attribute(trace)


CANDIDATES = 30  # counterfactual re-runs up to learned's top 30 steps (a run has 5 to 30 calls), earliest first
DRAWS = 2


def make_attributor(name: str, team, candidates: int = CANDIDATES, draws: int = DRAWS):
    """The attribution arm's attributor. ``counterfactual`` re-runs the team (`GatewayTeam` is its rerunner):
    each candidate step drawn anew, earliest first; the first whose new draw makes the task succeed is blamed,
    and the mode is read from what that correction changed."""
    from faultlens.attributors import get

    if name != "counterfactual":
        return get(name)
    return get("counterfactual", base="learned", k=candidates, draws=draws, max_reruns=candidates * draws,
               mode_from="correction", rerunner=team)


def run_arm(env_name: str, arm: str, seed: int, rounds: int, per_round: int, attributor: str) -> dict:
    """Success rate per round of one arm on one seed's tasks, and what the gateway counted."""
    import logging

    from faultlens.feedback import FeedbackLoop, LessonMemory, TerminalReflector
    from faultlens.feedback.gateway_lessons import EVERY_AGENT, GatewayLessons
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.slipping_team import GatewayTeam
    from faultlens.middleware.capture.live_gateway import Gateway
    from faultlens.middleware.capture.upstream import CallableUpstream
    from faultlens.middleware.store import open_store

    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    # AG2's and Magentic-One's code executors work in a folder per task under the temporary directory; jobs of
    # other arms run the same tasks at the same time, so each job gets a temporary directory of its own.
    scratch = tempfile.mkdtemp(prefix="faultlens-gateway-")
    tempfile.tempdir = scratch
    env = get_env(env_name)
    tasks = env.tasks(20_000 + seed, rounds * per_round)  # fresh tasks, never repeated (10_002 trips an ag2_experts task bug)
    store = open_store(":memory:")
    memory = LessonMemory(store)
    team = GatewayTeam(env)
    gateway = Gateway(CallableUpstream(team.upstream), store, GatewayLessons(memory, [EVERY_AGENT] if arm != "none" else []))
    team.gateway = gateway
    golds: dict = {}
    loop = None
    if arm == "terminal":
        loop = FeedbackLoop(store=store, attributor=None, memory=memory, reflector=TerminalReflector())
    elif arm == "attribution":
        loop = FeedbackLoop(store=store, attributor=make_attributor(attributor, team), memory=memory)
    elif arm == "oracle":
        loop = FeedbackLoop(store=store, attributor=OracleAttributor(golds), memory=memory)
    rates, slips, followed = [], 0, 0
    for r in range(rounds):
        wins = 0
        for task in tasks[r * per_round:(r + 1) * per_round]:
            run_id = f"{arm}-{seed}-{task.id}"
            record = team.run(task, run_id, seed=seed)
            gateway.flush()  # the run's steps are in the store before its outcome arrives
            outcome = record.trace.outcome
            golds[run_id] = record.gold
            slips += len(record.slips)
            followed += record.followed
            if loop is not None:
                loop.record_outcome(run_id, outcome)  # what POST /api/runs/{id}/outcome does
                loop.wait()  # a lesson is ready for the very next task: deterministic
            else:
                store.set_outcome(run_id, outcome)
            wins += outcome.success
        rates.append(wins / per_round)
    if loop is not None:
        loop.close()
    status = gateway.status()
    gateway.close()
    tempfile.tempdir = None
    shutil.rmtree(scratch, ignore_errors=True)
    return {"rates": rates, "slips": slips, "followed": followed, "calls": status["calls"], "recorded": status["recorded"],
            "lessons_shown": status["lessons_shown"], "lessons": len(memory.lessons(include_retired=True))}


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarise(per_seed: dict[str, list[list[float]]]) -> dict[str, dict[str, float]]:
    """Each arm's lift over `none` on rounds 2.. (paired by seed), its share of the oracle's, and attribution − terminal."""
    later = {arm: [statistics.fmean(s[1:]) for s in series] for arm, series in per_seed.items()}
    out: dict[str, dict[str, float]] = {}
    for arm in per_seed:
        if arm == "none" or "none" not in later:
            continue
        diffs = [a - b for a, b in zip(later[arm], later["none"])]
        m, d = _mean_sd(diffs)
        out[arm] = {"lift": m, "sd": d, "min": min(diffs)}
    oracle = out.get("oracle", {}).get("lift")
    for arm in out:
        if arm != "oracle" and oracle:
            out[arm]["share_of_oracle"] = out[arm]["lift"] / oracle if oracle > 0 else float("nan")
    if "attribution" in later and "terminal" in later:
        diffs = [a - t for a, t in zip(later["attribution"], later["terminal"])]
        out.setdefault("attribution", {})["over_terminal"] = statistics.fmean(diffs)
        out["attribution"]["over_terminal_min"] = min(diffs)
    return out


def plot(results: dict[str, dict[str, list[list[float]]]], out: Path, title: str) -> None:
    """One panel per framework: success rate per round and arm (mean ± sd over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"none": "#888888", "terminal": "#d08c2b", "attribution": "#2b6cd0", "oracle": "#2ba36b"}
    envs = list(results)
    fig, axes = plt.subplots(1, len(envs), figsize=(4.2 * len(envs), 3.8), squeeze=False, sharey=True)
    for ax, env in zip(axes[0], envs):
        for arm, series in results[env].items():
            rounds = range(1, len(series[0]) + 1)
            stats = [_mean_sd([s[i] for s in series]) for i in range(len(series[0]))]
            mean = [m for m, _ in stats]
            # terminal often equals none exactly: dashed over solid keeps both visible
            ax.plot(rounds, mean, marker="o", label=arm, color=colors.get(arm), linestyle="--" if arm == "terminal" else "-")
            ax.fill_between(rounds, [m - d for m, d in stats], [m + d for m, d in stats], alpha=0.12, color=colors.get(arm))
        ax.set_title(f"{FRAMEWORK_OF.get(env, env)} ({env})", fontsize=9)
        ax.set_xlabel("round (fresh tasks each round)")
        ax.set_xticks(list(rounds))
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("success rate")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--envs", default=",".join(ENVS), show_default=True, help="Comma-separated framework environments.")
@click.option("--rounds", default=5, show_default=True, help="Rounds of fresh tasks per arm.")
@click.option("--tasks", "per_round", default=8, show_default=True, help="Tasks per round.")
@click.option("--seeds", default=3, show_default=True, help="Independent repetitions (different tasks and agent randomness).")
@click.option("--arms", default=",".join(ARMS), show_default=True, help="Comma-separated arms to run.")
@click.option("--attributor", default="counterfactual", show_default=True,
              help="Attribution method of the attribution arm: counterfactual (re-runs the team) or any name `attributors.get` accepts.")
@click.option("--workers", default=2, show_default=True, help="Processes running (framework, arm, seed) jobs in parallel.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("docs/gateway_self_improve.png"), show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write every per-seed result as JSON.")
def main(envs: str, rounds: int, per_round: int, seeds: int, arms: str, attributor: str, workers: int, plot_path: Path,
         json_path: Path | None) -> None:
    """Run each framework team through the gateway for several rounds in each arm and compare success rates."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 140)
    chosen_envs = [e.strip() for e in envs.split(",") if e.strip()]
    chosen = [a.strip() for a in arms.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in ARMS] + [e for e in chosen_envs if e not in ENVS]
    if unknown:
        raise click.BadParameter(f"unknown arm(s) or environment(s) {', '.join(unknown)}; arms: {', '.join(ARMS)}; "
                                 f"environments: {', '.join(ENVS)}")
    if rounds < 2:
        raise click.BadParameter("lifts are measured from round 2 on: give --rounds 2 or more", param_hint="--rounds")
    started = time.perf_counter()
    jobs = [(env, arm, seed) for env in chosen_envs for seed in range(seeds) for arm in chosen]
    done: dict[tuple[str, str, int], dict] = {}
    if workers <= 1:
        for job in jobs:
            done[job] = run_arm(*job, rounds, per_round, attributor)
    else:
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(run_arm, *job, rounds, per_round, attributor): job for job in jobs}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
    seconds = time.perf_counter() - started

    results = {env: {arm: [done[env, arm, seed]["rates"] for seed in range(seeds)] for arm in chosen} for env in chosen_envs}
    summary = {}
    for env in chosen_envs:
        table = Table(title=f"{FRAMEWORK_OF[env]} ({env}) through the gateway: success rate per round, mean ± sd over {seeds} seeds "
                            f"({per_round} tasks/round)")
        table.add_column("arm")
        for r in range(rounds):
            table.add_column(f"r{r + 1}", justify="right")
        table.add_column(f"r2–r{rounds}", justify="right")
        table.add_column("slips", justify="right")
        table.add_column("lessons", justify="right")
        for arm in chosen:
            cells = [f"{m:.2f}±{d:.2f}" for m, d in (_mean_sd([s[r] for s in results[env][arm]]) for r in range(rounds))]
            m, d = _mean_sd([statistics.fmean(s[1:]) for s in results[env][arm]])
            runs = [done[env, arm, seed] for seed in range(seeds)]
            table.add_row(arm, *cells, f"{m:.2f}±{d:.2f}", str(sum(x["slips"] for x in runs)), str(sum(x["lessons"] for x in runs)))
        console.print(table)
        summary[env] = summarise(results[env])
        for arm, s in summary[env].items():
            if "lift" not in s:
                continue
            share = f", {s['share_of_oracle']:.0%} of the oracle's" if "share_of_oracle" in s else ""
            console.print(f"  {arm}: lift over none, rounds 2–{rounds}: {s['lift']:+.3f} (sd {s['sd']:.3f}, smallest {s['min']:+.3f}){share}")
        if "over_terminal" in summary[env].get("attribution", {}):
            a = summary[env]["attribution"]
            console.print(f"  attribution − terminal, rounds 2–{rounds}: {a['over_terminal']:+.3f} (smallest over seeds {a['over_terminal_min']:+.3f})")
        calls = sum(x["calls"] for x in (done[env, arm, seed] for arm in chosen for seed in range(seeds)))
        recorded = sum(x["recorded"] for x in (done[env, arm, seed] for arm in chosen for seed in range(seeds)))
        console.print(f"  gateway: {calls} calls, {recorded} recorded as steps")
    runs = len(jobs) * rounds * per_round
    console.print(f"{runs} runs in {seconds:.0f} s ({workers} worker process(es))")
    plot(results, plot_path, f"Teams on four frameworks, every call through the faultlens gateway: mean ± sd over {seeds} seeds")
    console.print(f"plot: {plot_path}")
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"rounds": rounds, "tasks_per_round": per_round, "seeds": seeds, "attributor": attributor,
                                         "results": results, "summary": summary, "seconds": seconds,
                                         "jobs": {f"{e}/{a}/{s}": v for (e, a, s), v in done.items()}}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
