"""Try `blend`'s weights and `learned`'s training variants leave-one-system-out, each fold's model fitted once.

    .venv/bin/python scripts/loso_grid.py --realdev ../shared/realdev \
        [--heuristic 0,0.25,0.5,1] [--lateness 0,0.5,0.75,1,1.5] \
        [--balance 1.0] [--trees '{"max_leaf_nodes": 7}'] [--real-share 0.5] [--json out.json]
    .venv/bin/python scripts/loso_grid.py --realdev ../shared/realdev --balance 0.75 --paired-with 1.0
    .venv/bin/python scripts/loso_grid.py --realdev ../shared/realdev --lateness-in-who

The folds are `faultlens train --loso`'s (`benchmark.loso.score_systems`):
every system is scored by a model trained as the shipped one is but without a
run of it. One training setting per call (`--balance`, `--trees` laid over
`model.TREE_PARAMS`, `--real-share`: the real datasets' runs weighed up or
down so that they hold that share of the training weight), then every
(heuristic weight, lateness) pair of `blend` on the same folds. Prints the
mean step and agent accuracy over systems (each system weighs the same) and
the step / agent accuracy per system with random choice's beside it, best
mean first, and the systems where a row falls below random choice. Features are computed once
(about 90 s); each fold's fit and the scoring take 1-2 minutes more per
system on this machine. `--paired-with B` also scores `learned` and `blend`
trained with source balance B on the same folds and prints the paired
difference (this setting minus B) of each, with its bootstrap interval
(`LosoReport.mean_difference`); `blend` at B is scored both as it is and with
the earlier agent rule (`lateness_in_who`). `--lateness-in-who` adds that rule
at the shipped weights to the grid and its paired difference on the same folds.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.attributors.learned import Blend, LearnedAttributor, model  # noqa: E402
from faultlens.benchmark.loso import RANDOM, LosoReport, leave_one_system_out  # noqa: E402

REAL_SPECS = ("trail:", "taubench:")  # the real datasets' training specs (`benchmark.loso.datasets`)


def weighted_to_real_share(share: float) -> Any:
    """`model.source_weights` with the real datasets' runs scaled to hold `share` of the total training weight."""
    plain = model.source_weights

    def weights(traces: list[Any], balance: float = model.SOURCE_BALANCE,
                sources: Mapping[str, str] | None = None) -> dict[str, float]:
        w = plain(traces, balance, sources)
        real = {t.id for t in traces if (sources or {}).get(t.id, "").startswith(REAL_SPECS)}
        real_total = sum(w[i] for i in real)
        other_total = sum(v for i, v in w.items() if i not in real)
        if not real_total or not other_total:
            return w
        k = share / (1 - share) * other_total / real_total
        return {i: v * k if i in real else v for i, v in w.items()}

    return weights


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _row(report: LosoReport, method: str) -> dict[str, Any]:
    """One method's means over systems, its per-system step and agent accuracy, and where it falls below random choice."""
    steps = {s: report.accuracy(s, method, "step") or 0.0 for s in report.systems}
    agents = {s: report.accuracy(s, method, "agent") for s in report.systems}
    measured = [a for a in agents.values() if a is not None]
    below = [f"{s} ({what})" for s in report.systems for what, mine in (("step", steps[s]), ("agent", agents[s]))
             if mine is not None and (chance := report.accuracy(s, RANDOM, what)) is not None and mine < chance]
    return {"method": method, "step": sum(steps.values()) / len(steps), "agent": sum(measured) / len(measured),
            "per_system": steps, "per_system_agent": agents, "below_random": below}


def _print_paired(report: LosoReport, method: str, other: str, label: str) -> None:
    for what in ("step", "agent"):
        d = report.mean_difference(method, other, what)
        low, high = d["ci"]
        print(f"{label}, {what}: {100 * d['value']:+.2f} [{100 * low:+.2f}, {100 * high:+.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--realdev", type=Path, default=Path("../shared/realdev"))
    parser.add_argument("--heuristic", default="0.25", help="blend's heuristic weights, comma-separated")
    parser.add_argument("--lateness", default="0.75", help="blend's lateness weights, comma-separated")
    parser.add_argument("--balance", type=float, default=model.SOURCE_BALANCE)
    parser.add_argument("--trees", default="{}", help="JSON object laid over model.TREE_PARAMS")
    parser.add_argument("--real-share", type=float, default=None, help="share of the training weight on real runs")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    parser.add_argument("--paired-with", type=float, default=None, metavar="BALANCE",
                        help="also compare learned and blend with those trained at this source balance, paired")
    parser.add_argument("--lateness-in-who", action="store_true",
                        help="also score blend choosing the agent with the lateness term in its score mass (the earlier rule)")
    args = parser.parse_args()

    if args.real_share is not None:
        model.source_weights = weighted_to_real_share(args.real_share)  # fit() looks it up at call time
    fold_methods: dict[str, Any] = {"learned": lambda m: LearnedAttributor(model=m)}
    for h in (float(x) for x in args.heuristic.split(",")):
        for lateness in (float(x) for x in args.lateness.split(",")):
            fold_methods[f"blend h={h:g} lateness={lateness:g}"] = (
                lambda h, lateness: lambda m: Blend(model=m, heuristic_weight=h, lateness=lateness))(h, lateness)
    blend_here = "blend h=0.25 lateness=0.75"  # the shipped weights, as `Blend()` has them
    old_who = "blend, lateness in who"
    if args.lateness_in_who:
        fold_methods[old_who] = lambda m: Blend(model=m, lateness_in_who=True)
    if args.paired_with is not None and blend_here not in fold_methods:
        parser.error("--paired-with compares blend at its shipped weights: keep 0.25 in --heuristic and 0.75 in --lateness")
    fit_options = {"balance": args.balance, "tree_params": {**model.TREE_PARAMS, **json.loads(args.trees)}}
    report = leave_one_system_out(args.realdev, methods=[], frozen={}, fit_options=fit_options,
                                  fold_methods=fold_methods, progress=lambda s: print(f"fold {s} done", flush=True))
    rows = [_row(report, method) for method in fold_methods]
    rows.sort(key=lambda r: -r["step"])
    for r in [_row(report, RANDOM)] + rows:
        per = " ".join(f"{s} {_pct(v)}/{_pct(r['per_system_agent'][s])}" for s, v in r["per_system"].items())
        print(f"{r['method']:28s} step {100 * r['step']:5.1f}  agent {100 * r['agent']:5.1f}  | {per}")
        if r["method"] != RANDOM:
            print(f"{'':28s} below random choice: {', '.join(r['below_random']) or 'none'}")
    if args.lateness_in_who:
        _print_paired(report, blend_here, old_who, "blend minus blend with lateness in who, same folds")
    if args.paired_with is not None:
        other = leave_one_system_out(args.realdev, methods=[], frozen={},
                                     fit_options={**fit_options, "balance": args.paired_with},
                                     fold_methods={"learned": lambda m: LearnedAttributor(model=m), "blend": lambda m: Blend(model=m),
                                                   old_who: lambda m: Blend(model=m, lateness_in_who=True)})
        for system in report.systems:  # the same traces in the same order: one report holds both
            for method in ("learned", "blend", old_who):
                report.verdicts[system][f"{method} at {args.paired_with:g}"] = other.verdicts[system][method]
        for method, here in (("learned", "learned"), ("blend", blend_here), (old_who, blend_here)):
            _print_paired(report, here, f"{method} at {args.paired_with:g}",
                          f"{here} minus {method} at balance {args.paired_with:g}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
