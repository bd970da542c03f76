"""Cross-validation on the `train` halves of the real datasets, to choose `learned`'s source balance and trees.

    .venv/bin/python scripts/real_cv.py [--realdev ../shared/realdev] [--folds 5] [--balance 0 0.5 1]

The `train` halves of TRAIL and AgentRx are cut into folds (by a hash of the
trace id); each fold is scored by a model trained on the bundled `dev` split
and the other folds. The `holdout` halves are never read, and neither is the
bundled `test` split. Prints step and agent accuracy per dataset and setting,
beside `heuristic` on the same traces.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens import attributors  # noqa: E402
from faultlens.attributors.learned import LearnedAttributor, fit, trace_features  # noqa: E402
from faultlens.attributors.learned.model import TREE_PARAMS, labelled  # noqa: E402
from faultlens.benchmark.datasets import load_dataset  # noqa: E402
from faultlens.benchmark.metrics import normalize_agent  # noqa: E402


def fold_of(trace_id: str, folds: int) -> int:
    return int(hashlib.sha256(trace_id.encode()).hexdigest(), 16) % folds


def hits(attributor, traces, features=None) -> tuple[list[bool], list[bool]]:
    step, agent = [], []
    for t in traces:
        a = attributor.attribute(t, features=features[t.id]) if features else attributor.attribute(t)
        step.append(a.step == t.gold.step)
        gold_agent = t.gold.agent or t.steps[t.gold.step].agent
        agent.append(a.agent is not None and normalize_agent(a.agent) == normalize_agent(gold_agent))
    return step, agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdev", type=Path, default=Path("../shared/realdev"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--balance", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--leaf", type=int, nargs="+", default=[TREE_PARAMS["min_samples_leaf"]])
    args = parser.parse_args(argv)
    bundled = labelled(load_dataset("bundled:dev").traces())
    real = {"trail": labelled(load_dataset(f"trail:{args.realdev / 'trail'}:train").traces()),
            "taubench": labelled(load_dataset(f"taubench:{args.realdev / 'agentrx'}:train").traces())}
    everything = bundled + [t for ts in real.values() for t in ts]
    features = {t.id: trace_features(t) for t in everything}
    heuristic = attributors.get("heuristic")
    for name, ts in real.items():
        s, a = hits(heuristic, ts)
        print(f"heuristic {name}: step {np.mean(s):.3f} agent {np.mean(a):.3f} (n={len(ts)})", flush=True)
    for balance in args.balance:
        for leaf in args.leaf:
            params = {**TREE_PARAMS, "min_samples_leaf": leaf}
            got: dict[str, tuple[list[bool], list[bool]]] = {k: ([], []) for k in real}
            for k in range(args.folds):
                train = bundled + [t for ts in real.values() for t in ts if fold_of(t.id, args.folds) != k]
                model = fit(train, features=features, balance=balance, tree_params=params)
                learned = LearnedAttributor(model=model)
                for name, ts in real.items():
                    held = [t for t in ts if fold_of(t.id, args.folds) == k]
                    s, a = hits(learned, held, features)
                    got[name][0].extend(s)
                    got[name][1].extend(a)
            line = " | ".join(f"{n}: step {np.mean(s):.3f} agent {np.mean(a):.3f}" for n, (s, a) in got.items())
            print(f"balance {balance} leaf {leaf}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
