"""The "real traces" table: every offline method, random choice and every baseline on the real datasets.

    .venv/bin/python scripts/real_traces.py [--realdev ../shared/realdev] [--json out.json] [--markdown out.md]

For each dataset: step accuracy, agent accuracy (where the dataset labels
agents), top-3 recall of the gold step (methods with a ranking), TRAIL's
"hits any annotated error span", each with a 95% percentile bootstrap
interval over traces, and the paired bootstrap interval of `learned` minus
each other method on step accuracy (the same resampled traces for both).
"Random choice" is the exact expected accuracy of a uniformly random step
(all steps, and decision steps only), not a sample; `learned` is also compared
with it trace by trace (per trace, random choice among the decision steps hits
the gold step with probability 1/decisions, and the gold agent with the share of
decisions that agent wrote), so its interval carries no sampling noise of the
random draw itself, unlike `baseline:random-*`, which is one draw.

`baseline:most-common-step` is reported twice: as `bench run` scores it (the
prior read from the gold labels of the scored holdout half itself, a floor
that peeks), and with the prior from the `train` half only (what a method
could know before seeing the holdout labels).

The learned model ships trained on the bundled `dev` split and the `train`
halves of TRAIL and AgentRx (see `benchmark.train`); both are therefore
reported on their `holdout` halves only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens import attributors  # noqa: E402
from faultlens.benchmark.datasets import load_dataset  # noqa: E402
from faultlens.benchmark.metrics import normalize_agent  # noqa: E402
from faultlens.benchmark.runner import MOST_COMMON_STEP, MostCommonStep  # noqa: E402
from faultlens.middleware.model.roles import candidates  # noqa: E402

METHODS = ["blend", "learned", "heuristic", "baseline:random-step", "baseline:random-agent", "baseline:majority-agent",
           "baseline:first-step", "baseline:last-step", MOST_COMMON_STEP]
SAMPLES, SEED = 2000, 0


TRAIN_PRIOR = "baseline:most-common-step (train-half prior)"
RANDOM = "random choice among decisions (exact)"


def datasets(realdev: Path) -> dict[str, str]:
    return {"TRAIL (holdout half)": f"trail:{realdev / 'trail'}:holdout",
            "AgentRx tau-bench retail (holdout half)": f"taubench:{realdev / 'agentrx'}:holdout"}


def attributor_for(method: str, traces, train_traces):
    if method == MOST_COMMON_STEP:
        return MostCommonStep(traces)  # the gold steps of the whole scored set, as `bench run` scores it
    if method == TRAIN_PRIOR:
        return MostCommonStep(train_traces)
    return attributors.get(method)


def expected_random(traces) -> dict[str, np.ndarray]:
    """Per trace, the probability that a uniformly random decision step is the gold step, and is the gold agent's."""
    step, agent = [], []
    for t in traces:
        pool = candidates(t)
        step.append(sum(s.index == t.gold.step for s in pool) / len(pool))
        gold_agent = normalize_agent(t.gold.agent) if t.gold.agent else None
        agent.append(sum(gold_agent is not None and normalize_agent(s.agent) == gold_agent for s in pool) / len(pool))
    nan = np.full(len(traces), np.nan)
    return {"step": np.asarray(step), "agent": np.asarray(agent), "top3": nan, "any_error": nan}


def score(traces, method: str, train_traces=()) -> dict[str, np.ndarray]:
    attributor = attributor_for(method, traces, train_traces)
    step, agent, top3, anyerr = [], [], [], []
    for t in traces:
        a = attributor.attribute(t)
        step.append(a.step == t.gold.step)
        agent.append(t.gold.agent is not None and a.agent is not None and normalize_agent(a.agent) == normalize_agent(t.gold.agent))
        ranked = [c.step for c in a.ranking][:3]
        top3.append(t.gold.step in ranked if a.ranking else np.nan)
        errors = t.metadata.get("trail", {}).get("error_steps")
        anyerr.append(a.step in errors if errors is not None else np.nan)
    return {k: np.asarray(v, dtype=float) for k, v in
            {"step": step, "agent": agent, "top3": top3, "any_error": anyerr}.items()}


def ci(values: np.ndarray, rng_seed: int = SEED) -> tuple[float, float, float] | None:
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    rng = np.random.default_rng(rng_seed)
    idx = rng.integers(0, values.size, size=(SAMPLES, values.size))
    means = values[idx].mean(axis=1)
    return float(values.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, a.size, size=(SAMPLES, a.size))
    diffs = a[idx].mean(axis=1) - b[idx].mean(axis=1)
    return float(a.mean() - b.mean()), float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def fmt(c) -> str:
    return "—" if c is None else f"{c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}]"


def run(realdev: Path) -> dict:
    out = {}
    for name, spec in datasets(realdev).items():
        traces = load_dataset(spec).traces()
        train_traces = load_dataset(spec.removesuffix(":holdout") + ":train").traces()
        labels_agents = any(t.gold.agent for t in traces)
        rows = {m: score(traces, m, train_traces) for m in METHODS + [TRAIN_PRIOR]}
        rows[RANDOM] = expected_random(traces)
        uniform_all = float(np.mean([1 / len(t.steps) for t in traces]))
        uniform_dec = float(np.mean([1 / len(candidates(t)) for t in traces]))
        top3_dec = float(np.mean([min(3, len(candidates(t))) / len(candidates(t)) for t in traces]))
        table = {}
        for m, r in rows.items():
            table[m] = {"step": ci(r["step"]), "agent": ci(r["agent"]) if labels_agents else None,
                        "top3": ci(r["top3"]), "any_error": ci(r["any_error"]),
                        "learned_minus_this_step": None if m == "learned" else paired(rows["learned"]["step"], r["step"]),
                        "learned_minus_this_agent": None if m == "learned" or not labels_agents else paired(rows["learned"]["agent"], r["agent"])}
        out[name] = {"spec": spec, "traces": len(traces), "labels_agents": labels_agents, "methods": table,
                     "random_step_all_expected": uniform_all, "random_step_decisions_expected": uniform_dec,
                     "random_3_decisions_expected": top3_dec}
    return out


def markdown(result: dict) -> str:
    lines = []
    for name, d in result.items():
        lines.append(f"### {name}: {d['traces']} traces (`{d['spec']}`)\n")
        lines.append("| method | step acc [95% CI] | learned − this, step [95% CI] | agent acc [95% CI] | learned − this, agent [95% CI] "
                     "| top-3 recall | hits any error span |")
        lines.append("|---|---|---|---|---|---|---|")
        for m, r in d["methods"].items():
            step_diff, agent_diff = r["learned_minus_this_step"], r["learned_minus_this_agent"]
            lines.append(f"| {m} | {fmt(r['step'])} | {fmt(step_diff)} | {fmt(r['agent'])} | {fmt(agent_diff)} "
                         f"| {fmt(r['top3'])} | {fmt(r['any_error'])} |")
        lines.append(f"| random choice, any step (expected) | {d['random_step_all_expected']:.3f} | | | | | |")
        lines.append(f"| random choice, three decision steps (expected top-3) | | | | | {d['random_3_decisions_expected']:.3f} | |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdev", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "realdev")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    result = run(args.realdev)
    text = markdown(result)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
