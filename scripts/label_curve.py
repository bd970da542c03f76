"""How many labelled runs of a system `learned` needs: step accuracy on a real dataset's holdout half against the
number of that dataset's runs in training.

    .venv/bin/python scripts/label_curve.py [--realdev ../shared/realdev] [--draws 3]
        [--json docs/label_curve.json] [--plot docs/learned_label_curve.png]

For each real dataset (TRAIL, AgentRx), `learned` is trained as the shipped
model is (the bundled `dev` split and the other real dataset's `train` half)
plus k runs of this dataset's `train` half, for k from 0 (the system was never
seen: the forecast for a user's own agents) to the whole half (the shipped
model), and scored on this dataset's `holdout` half. Intermediate k are drawn
`--draws` times (nested draws, each a fixed order of the train half by a hash
of the draw number and the trace id); the figure is their mean, the interval
the 95% bootstrap interval over holdout runs of each run's share of draws
that hit it. Beside it:
most-common-step with the prior read from the train half, and random choice
among the decision steps (exact). Features are computed once; each fit takes
30-60 s on this machine (about 15 minutes in all with 3 draws).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.attributors.learned import LearnedAttributor, fit, trace_features  # noqa: E402
from faultlens.benchmark.datasets import load_dataset  # noqa: E402
from faultlens.benchmark.runner import MostCommonStep  # noqa: E402
from faultlens.middleware.model.trace import Trace  # noqa: E402
from faultlens.middleware.model.roles import candidates  # noqa: E402

SAMPLES, SEED = 2000, 0
FRACTIONS = (0.0, 0.125, 0.25, 0.5, 1.0)


def specs(realdev: Path) -> dict[str, str]:
    return {"TRAIL": f"trail:{realdev / 'trail'}", "AgentRx": f"taubench:{realdev / 'agentrx'}"}


def ordered(traces: list[Trace], draw: int) -> list[Trace]:
    return sorted(traces, key=lambda t: hashlib.sha256(f"{draw}:{t.id}".encode()).hexdigest())


def interval(hits: np.ndarray) -> tuple[float, float]:
    rng = np.random.default_rng(SEED)
    means = hits[rng.integers(0, hits.size, size=(SAMPLES, hits.size))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def hits(model, traces: list[Trace], features: dict[str, np.ndarray]) -> np.ndarray:
    learned = LearnedAttributor(model=model)
    return np.array([learned.attribute(t, features=features[t.id]).step == t.gold.step for t in traces], dtype=float)


def curve(name: str, data: dict[str, dict[str, list[Trace]]], dev: list[Trace], features, draws: int) -> dict:
    other = [t for n, halves in data.items() if n != name for t in halves["train"]]
    train, holdout = data[name]["train"], data[name]["holdout"]
    counts = sorted({round(f * len(train)) for f in FRACTIONS})
    points = []
    for k in counts:
        repeats = 1 if k in (0, len(train)) else draws
        per_draw = []
        for draw in range(repeats):
            model = fit(dev + other + ordered(train, draw)[:k], features=features)
            per_draw.append(hits(model, holdout, features))
            print(f"{name}: {k} of {len(train)} train runs, draw {draw}: holdout step {per_draw[-1].mean():.3f}", file=sys.stderr)
        per_run = np.mean(per_draw, axis=0)
        points.append({"runs": k, "step": float(per_run.mean()), "draws": [float(h.mean()) for h in per_draw],
                       "ci": list(interval(per_run))})
    prior = MostCommonStep(train)
    return {"train_runs": len(train), "holdout_runs": len(holdout), "points": points,
            "most_common_step_train_prior": float(np.mean([prior.attribute(t).step == t.gold.step for t in holdout])),
            "random_decision_expected": float(np.mean([1 / len(candidates(t)) for t in holdout]))}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(result), figsize=(5 * len(result), 3.8), sharey=True)
    for ax, (name, r) in zip(np.atleast_1d(axes), result.items()):
        x = [p["runs"] for p in r["points"]]
        y = [p["step"] for p in r["points"]]
        low = [p["step"] - p["ci"][0] for p in r["points"]]
        high = [p["ci"][1] - p["step"] for p in r["points"]]
        ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label="learned (mean of draws, 95% CI)")
        for p in r["points"]:
            ax.plot([p["runs"]] * len(p["draws"]), p["draws"], ".", color="tab:blue", alpha=0.35)
        ax.axhline(r["most_common_step_train_prior"], ls="--", color="grey", label="most-common-step (train prior)")
        ax.axhline(r["random_decision_expected"], ls=":", color="black", label="random decision (exact)")
        ax.set_title(f"{name}: holdout half, {r['holdout_runs']} runs", fontsize=10)
        ax.set_xlabel(f"runs of {name} in training (of {r['train_runs']})")
        ax.set_ylim(0, 1)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("step accuracy")
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("learned needs labelled runs of the system it judges", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdev", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "realdev")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)
    dev = load_dataset("bundled:dev").traces()
    data = {name: {half: load_dataset(f"{spec}:{half}").traces() for half in ("train", "holdout")}
            for name, spec in specs(args.realdev).items()}
    everything = dev + [t for halves in data.values() for ts in halves.values() for t in ts]
    features = {t.id: trace_features(t) for t in everything}
    result = {name: curve(name, data, dev, features, args.draws) for name in data}
    for name, r in result.items():
        line = ", ".join(f"{p['runs']}: {p['step']:.3f}" for p in r["points"])
        print(f"{name} holdout ({r['holdout_runs']} runs), step accuracy by train runs of {name}: {line}; "
              f"most-common-step {r['most_common_step_train_prior']:.3f}, random {r['random_decision_expected']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.plot:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
