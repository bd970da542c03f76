"""Choose `learned`'s trees and source balance on training data only: cross-validation, and leave one framework out.

    .venv/bin/python scripts/model_select.py [--realdev ../shared/realdev] [--folds 5]
        [--balance 0.5 ...] [--trees '{"max_iter": 400, "max_leaf_nodes": 31}' ...] [--lofo]

Superseded as the measure of record by `faultlens train --loso` (leave one
system out: every choice of the shipped model is made on its mean); this
script's in-domain cross-validation says what labelled runs of a system buy.

Reads the bundled `dev` split and the `train` halves of TRAIL and AgentRx,
never the bundled `test` split or a `holdout` half. For each setting (every
`--balance` with every `--trees`, each a JSON object laid over
`model.TREE_PARAMS`):

- cross-validation: the traces are cut into folds (bundled traces by task, so
  one task's runs stay together; real runs by scenario, `trail.realdev_sides`), and each fold is
  scored by a model trained on all the others. Step accuracy is printed per
  group: our own environments, the four framework environments, TRAIL and
  AgentRx;
- with `--lofo`, leave one framework out on `dev` (`benchmark.train.leave_one_out`):
  a model trained on the other frameworks' dev traces and the real train
  halves (TRAIL's runs are smolagents', so they sit out with it) scores the
  held-out framework's dev traces (the transfer that matters for a user's
  framework).

Features are computed once per trace (about 30 s), then each fit takes
10–40 s on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.attributors.learned import LearnedAttributor, fit, trace_features  # noqa: E402
from faultlens.attributors.learned.model import SOURCE_BALANCE, TREE_PARAMS, labelled  # noqa: E402
from faultlens.benchmark.datasets import load_dataset  # noqa: E402
from faultlens.benchmark.train import fold_of, leave_one_out, scenario_key  # noqa: E402
from faultlens.middleware.model.trace import Trace  # noqa: E402

REAL_FORMATS = ("trail", "taubench")


def framework(trace: Trace) -> str:
    return trace.source.framework or "faultlens"


def group(trace: Trace) -> str:
    if trace.source.format in REAL_FORMATS:
        return "AgentRx" if trace.source.format == "taubench" else "TRAIL"
    return "own envs" if framework(trace) == "faultlens" else "frameworks"


def step_hits(model: Any, traces: list[Trace], features: dict[str, np.ndarray]) -> list[bool]:
    learned = LearnedAttributor(model=model)
    return [learned.attribute(t, features=features[t.id]).step == t.gold.step for t in traces]


def cross_validate(dev: list[Trace], real: list[Trace], features, folds: int, balance: float, trees: dict) -> dict[str, float]:
    everything = dev + real

    def fold(t: Trace) -> int:
        return fold_of(scenario_key(t), folds)

    hits: dict[str, list[bool]] = {}
    for k in range(folds):
        model = fit([t for t in everything if fold(t) != k], features=features, balance=balance, tree_params=trees)
        held = [t for t in everything if fold(t) == k]
        for t, hit in zip(held, step_hits(model, held, features)):
            hits.setdefault(group(t), []).append(hit)
    return {g: float(np.mean(v)) for g, v in sorted(hits.items())}


def leave_one_framework_out(dev: list[Trace], real: list[Trace], features, balance: float, trees: dict) -> dict[str, float]:
    """`benchmark.train.leave_one_out` by framework on dev; the real runs train every fold but their own framework's."""
    report = leave_one_out(dev + real, test_traces=dev, by="framework", features=features,
                           fit_options={"balance": balance, "tree_params": trees})
    result = {env: float(report.hits[env]["learned"]["step"].mean()) for env in report.environments}
    result["average"] = report.average("learned", "step", samples=0)["value"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdev", type=Path, default=Path("../shared/realdev"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--balance", type=float, nargs="+", default=[SOURCE_BALANCE])
    parser.add_argument("--trees", type=json.loads, nargs="+", default=[{}],
                        help="JSON objects laid over model.TREE_PARAMS, e.g. '{\"max_iter\": 400}'")
    parser.add_argument("--lofo", action="store_true", help="also leave one framework out on dev")
    args = parser.parse_args(argv)
    dev = labelled(load_dataset("bundled:dev").traces())
    real = labelled(load_dataset(f"trail:{args.realdev / 'trail'}:train").traces()) + \
        labelled(load_dataset(f"taubench:{args.realdev / 'agentrx'}:train").traces())
    features = {t.id: trace_features(t) for t in dev + real}
    for balance in args.balance:
        for overrides in args.trees:
            trees = {**TREE_PARAMS, **overrides}
            setting = f"balance {balance} trees {json.dumps(overrides, sort_keys=True)}"
            cv = cross_validate(dev, real, features, args.folds, balance, trees)
            print(f"{setting} | cross-validated step: " + ", ".join(f"{g} {v:.3f}" for g, v in cv.items()), flush=True)
            if args.lofo:
                lofo = leave_one_framework_out(dev, real, features, balance, trees)
                print(f"{setting} | leave one framework out, dev step: " + ", ".join(f"{g} {v:.3f}" for g, v in lofo.items()),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
