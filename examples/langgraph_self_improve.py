"""A LangGraph team that gets better from its own failures: faultlens lessons vs. no feedback.

The team is the `research_desk` environment (`injectors/envs/research_desk/env.py`):
planner → researcher (lookup tool) → analyst → reviewer → reporter, one LangGraph
node each. It runs several rounds of fresh tasks (a task is never seen twice) in
four arms, each with its own empty lesson memory:

- ``none``: no feedback.
- ``terminal``: Reflexion-style. After a failed run, one lesson written from the
  task and the final answer alone (`TerminalReflector`), shown to every agent.
- ``attribution``: faultlens. A failed run is attributed in the background,
  the offline reflector writes a lesson for the blamed agent, and the memory
  retrieves it for that agent on similar tasks (`FeedbackLoop`, `LessonMemory`).
  The team can be re-run, so the attributor is ``counterfactual`` over
  ``learned`` (`make_attributor`): it re-runs the failed run with each of
  learned's top steps drawn anew from its agent (earliest first, at most two
  draws a step; the recorded prefix replayed, the agents shown the same
  lessons), blames the first step whose new draw makes the task succeed, and
  names the mode from what that correction changed. `--attributor NAME` uses another method instead.
- ``oracle``: the same loop fed the gold label of each failure (found by
  checking every step against the task's registry, `gold_label`) instead of
  an attributor's guess.

A lesson is available from the next task on (the script waits for the
loop's worker after each run, so results are deterministic). Offline, the agents
are simulated: each has its own error tendencies, and follows a lesson shown to
it when the lesson's failure mode is one of its tendencies and its situation
shares a word with the task (see the environment's docstring). A lesson sent to
the wrong agent, or naming the wrong mode, does nothing; so the lift of the
attribution arm measures how often the loop routes the right lesson to the
right agent.

    python examples/langgraph_self_improve.py                 # offline, simulated agents
    python examples/langgraph_self_improve.py --model openai/gpt-4o-mini --seeds 1 --tasks 8

Prints the success rate per round and arm (mean ± standard deviation over
seeds), the lift over no feedback, the share of the oracle's lift each arm
reaches, and writes a plot.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import click

# Offline: litellm is imported below before faultlens (which sets the same default), and would otherwise
# fetch its model cost map from the network first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ARMS = ("none", "terminal", "attribution", "oracle")
ENV = "research_desk"
CANDIDATES = 10  # counterfactual tries learned's top 10 steps (a run has 9 to 15), earliest first
DRAWS = 2  # a candidate whose new draw changed it without fixing the run is drawn once more


class OracleAttributor:
    """Attributes a research_desk trace with its gold label (what a perfect attributor would say)."""

    name = "oracle"

    def attribute(self, trace):
        from faultlens.injectors.envs.research_desk.env import gold_label
        from faultlens.middleware.model.trace import Attribution, AttributionStatus

        gold = gold_label(trace.task, trace)
        if gold is None:
            return Attribution(trace_id=trace.id, method=self.name, status=AttributionStatus.error,
                               error="no step explains this failure")
        return Attribution(trace_id=trace.id, method=self.name, agent=gold.agent, step=gold.step, mode=gold.mode,
                           reason=gold.reason, confidence=1.0, backend="gold")

    async def aattribute(self, trace):
        return self.attribute(trace)


def make_attributor(name: str, store, candidates: int = CANDIDATES, draws: int = DRAWS):
    """The attribution arm's attributor. ``counterfactual`` re-runs the team (see the module docstring)."""
    from faultlens.attributors import get
    from faultlens.injectors.rerun import EnvironmentRerunner

    if name != "counterfactual":
        return get(name)
    # The simulated agents are deterministic: asked again the same way, an agent slips the same way.
    # `resample="fresh"` draws the candidate step anew; `lessons=` shows the rerun what its run was shown.
    rerunner = EnvironmentRerunner(resample="fresh", lessons=store.get_lesson)
    return get("counterfactual", base="learned", k=candidates, draws=draws, max_reruns=candidates * draws,
               mode_from="correction", rerunner=rerunner)


def _quiet_litellm(env_name: str) -> None:
    import logging

    import litellm

    litellm.suppress_debug_info = True
    # register_model warns that a zero-priced model has no cache prices: true and harmless here.
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    # A zero price for the simulated model: without it litellm searches its
    # price tables on every call, which triples the time of an offline run.
    litellm.register_model({f"faultlens-sim/{env_name}": {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
                                                          "litellm_provider": "faultlens-sim", "mode": "chat"}})


def run_arm(arm: str, seed: int, rounds: int, per_round: int, *, model: str | None, attributor: str,
            reflector: str | None, progress=None, candidates: int = CANDIDATES, draws: int = DRAWS) -> list[float]:
    """Success rate per round of one arm on one seed's tasks."""
    from faultlens.feedback import FeedbackLoop, LessonMemory, TerminalReflector
    from faultlens.injectors.envs import get
    from faultlens.middleware.store import open_store

    env = get(ENV)
    tasks = env.tasks(10_000 + seed, rounds * per_round)  # fresh tasks, never repeated
    sim = env.default_sim(seed)
    store = open_store(":memory:")
    memory = LessonMemory(store)
    loop = None
    if arm == "terminal":
        loop = FeedbackLoop(store=store, attributor=None, memory=memory, reflector=TerminalReflector())
    elif arm == "attribution":
        loop = FeedbackLoop(store=store, attributor=make_attributor(attributor, store, candidates, draws), memory=memory, reflector=reflector)
    elif arm == "oracle":
        loop = FeedbackLoop(store=store, attributor=OracleAttributor(), memory=memory, reflector=reflector)
    rates = []
    for r in range(rounds):
        wins = 0
        for task in tasks[r * per_round:(r + 1) * per_round]:
            lessons = {a: memory.retrieve(a, task.query) for a in env.agent_names} if loop else None
            result = env.run(task, model=model, sim=sim, lessons=lessons, trace_id=f"{arm}-{seed}-{task.id}")
            store.save_trace(result.trace)
            if loop is not None:
                loop.on_outcome(result.trace.id, result.trace.outcome)
                # The loop attributes in its worker thread; waiting here makes the
                # example deterministic (a lesson is ready for the very next task).
                loop.wait()
            wins += result.trace.outcome.success
            if progress is not None:
                progress()
        rates.append(wins / per_round)
    if loop is not None:
        loop.close()
    return rates


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def plot(results: dict[str, list[list[float]]], out: Path, title: str) -> None:
    """Left: success rate per round (mean ± sd over seeds). Right: gain over no feedback, paired by seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"none": "#888888", "terminal": "#d08c2b", "attribution": "#2b6cd0", "oracle": "#2ba36b"}
    panels = 2 if "none" in results and len(results) > 1 else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.2 * panels, 4.2), squeeze=False)

    def band(ax, arm, series):
        rounds = range(1, len(series[0]) + 1)
        stats = [_mean_sd([s[i] for s in series]) for i in range(len(series[0]))]
        mean, sd = [m for m, _ in stats], [d for _, d in stats]
        ax.plot(rounds, mean, marker="o", label=arm, color=colors.get(arm))
        ax.fill_between(rounds, [m - d for m, d in zip(mean, sd)], [m + d for m, d in zip(mean, sd)], alpha=0.15, color=colors.get(arm))

    left = axes[0][0]
    for arm, per_seed in results.items():
        band(left, arm, per_seed)
    left.set_ylim(0, 1.02)
    left.set_ylabel("success rate")
    left.set_title("success rate per round", fontsize=10)
    if panels == 2:
        right = axes[0][1]
        right.axhline(0, color=colors["none"], lw=1)
        for arm, per_seed in results.items():
            if arm != "none":
                band(right, arm, [[a - b for a, b in zip(s, n)] for s, n in zip(per_seed, results["none"])])
        right.set_ylabel("success rate minus no feedback's")
        right.set_title("gain over no feedback (same tasks, paired by seed)", fontsize=10)
    for ax in axes[0]:
        ax.set_xlabel("round (fresh tasks each round)")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _lifts(results: dict[str, list[list[float]]], chosen: list[str], rounds: int, console) -> dict[str, dict[str, float]]:
    """Each arm's lift over the `none` arm on rounds 2.. (paired by seed), printed; and its share of the oracle's lift."""
    summary: dict[str, dict[str, float]] = {}
    if "none" in chosen:
        for arm in chosen:
            if arm == "none":
                continue
            # Paired by seed: the same tasks and agent randomness in both arms.
            diffs = [statistics.fmean(a[1:]) - statistics.fmean(b[1:]) for a, b in zip(results[arm], results["none"])]
            m, d = _mean_sd(diffs)
            sem = d / len(diffs) ** 0.5 if len(diffs) > 1 else float("inf")
            summary[arm] = {"lift": m, "sd": d, "min": min(diffs), "sem": sem}
            verdict = "outside the noise (lift > 2 standard errors)" if m > 2 * sem else "within the noise"
            console.print(f"lift of {arm} over none, rounds 2–{rounds}: {m:+.3f} (sd {d:.3f} over seeds, smallest {min(diffs):+.3f}) — {verdict}")
        oracle = summary.get("oracle", {}).get("lift")
        for arm in [a for a in summary if a != "oracle"]:
            if oracle is not None and oracle > 0:
                # Both lifts are means of paired-by-seed differences over the same seeds, so their ratio compares like with like.
                summary[arm]["share_of_oracle"] = summary[arm]["lift"] / oracle
                console.print(f"{arm} reaches {summary[arm]['share_of_oracle']:.0%} of the oracle's lift "
                              f"({summary[arm]['lift']:+.3f} of {oracle:+.3f}, rounds 2–{rounds}, paired by seed)")
            elif oracle is not None:
                console.print(f"the oracle arm has no lift over none ({oracle:+.3f}): no share of it to report for {arm}")
    return summary


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--rounds", default=6, show_default=True, help="Rounds of fresh tasks per arm.")
@click.option("--tasks", "per_round", default=12, show_default=True, help="Tasks per round.")
@click.option("--seeds", default=5, show_default=True, help="Independent repetitions (different tasks and agent randomness).")
@click.option("--arms", default=",".join(ARMS), show_default=True, help="Comma-separated arms to run.")
@click.option("--attributor", default="counterfactual", show_default=True, help="Attribution method of the attribution arm: counterfactual (re-runs the team) or any name `attributors.get` accepts.")
@click.option("--candidates", default=CANDIDATES, show_default=True, help="counterfactual: how many of learned's top steps to re-run.")
@click.option("--draws", default=DRAWS, show_default=True, help="counterfactual: draws of a candidate that changed without fixing the run.")
@click.option("--reflector", default=None, help="Reflection: offline (default) or a litellm model for LLM reflection.")
@click.option("--model", default=None, help="Run real LLM agents through litellm with this model instead of the simulated agents.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("docs/feedback_self_improve.png"), show_default=True, help="Where to write the plot (PNG).")
@click.option("--workers", default=2, show_default=True, help="Processes running arms and seeds in parallel (1: all in this process).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the per-seed, per-round success rates as JSON.")
def main(rounds: int, per_round: int, seeds: int, arms: str, attributor: str, candidates: int, draws: int,
         reflector: str | None, model: str | None, plot_path: Path, workers: int, json_path: Path | None) -> None:
    """Run the research_desk LangGraph team for several rounds in each arm and compare success rates."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 130)
    chosen = [a.strip() for a in arms.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in ARMS]
    if unknown:
        raise click.BadParameter(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(ARMS)}", param_hint="--arms")
    _quiet_litellm(ENV)
    started = time.perf_counter()
    results: dict[str, list[list[float]]] = {arm: [] for arm in chosen}
    total = len(chosen) * seeds * rounds * per_round
    jobs = [(arm, seed) for seed in range(seeds) for arm in chosen]
    per_job: dict[tuple[str, int], list[float]] = {}
    options = dict(model=model, attributor=attributor, reflector=reflector, candidates=candidates, draws=draws)
    with Progress(console=console, transient=True) as bar:
        task_bar = bar.add_task(f"{total} runs", total=total)
        if workers <= 1:
            for arm, seed in jobs:
                per_job[arm, seed] = run_arm(arm, seed, rounds, per_round, **options, progress=lambda: bar.advance(task_bar))
        else:
            # Arms and seeds are independent: one process each, `workers` at a time.
            # fork: the children inherit the imported litellm and the registered simulated model.
            context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                futures = {pool.submit(run_arm, arm, seed, rounds, per_round, **options): (arm, seed) for arm, seed in jobs}
                for future in as_completed(futures):
                    per_job[futures[future]] = future.result()
                    bar.advance(task_bar, rounds * per_round)
    for arm, seed in jobs:
        results[arm].append(per_job[arm, seed])
    seconds = time.perf_counter() - started

    agents = f"real agents ({model})" if model else "simulated agents"
    table = Table(title=f"research_desk: success rate per round, mean ± sd over {seeds} seeds ({per_round} tasks/round, {agents})")
    table.add_column("arm")
    for r in range(rounds):
        table.add_column(f"r{r + 1}", justify="right")
    table.add_column(f"r2–r{rounds}", justify="right")
    for arm in chosen:
        cells = []
        for r in range(rounds):
            m, d = _mean_sd([s[r] for s in results[arm]])
            cells.append(f"{m:.2f}±{d:.2f}")
        m, d = _mean_sd([statistics.fmean(s[1:]) for s in results[arm]])
        table.add_row(arm, *cells, f"{m:.2f}±{d:.2f}")
    console.print(table)

    summary = _lifts(results, chosen, rounds, console)
    console.print(f"{total} runs in {seconds:.0f} s")

    title = f"research_desk (LangGraph team), {agents}: mean ± sd over {seeds} seeds"
    plot(results, plot_path, title)
    console.print(f"plot: {plot_path}")
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"rounds": rounds, "tasks_per_round": per_round, "seeds": seeds, "model": model,
                                         "attributor": attributor, "candidates": candidates, "draws": draws, "results": results, "lift": summary,
                                         "seconds": seconds}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
