"""The failure detector's measure of record: leave-one-system-out AUROC, AUPRC and calibration error.

    python scripts/detect_eval.py --json docs/detect_eval.json --md docs/detect_eval.md

For each system (environment) the detector is trained on every other system's
runs and scores the held-out one; beside it, the label-free baselines score
each run by one count (run length, errors, tool calls; higher = more likely
failed). AUROC, AUPRC and the expected calibration error (ECE, 10 equal-width
bins; baselines have no probability, so none) per system and their mean.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

sys.path.insert(0, str(Path(__file__).parent))
from detect_train import Run, load_runs  # noqa: E402

from faultlens.attributors.detect import BASELINES, fit, predict  # noqa: E402

BINS = 10


def ece(y: np.ndarray, p: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error: the run-weighted mean |observed failure rate - mean p| over equal-width bins."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        mask = which == b
        if mask.any():
            total += mask.sum() * abs(y[mask].mean() - p[mask].mean())
    return float(total / len(y))


def scores(y: np.ndarray, p: np.ndarray, calibrated: bool) -> dict[str, float | None]:
    both = len(set(y.tolist())) == 2
    return {"auroc": float(roc_auc_score(y, p)) if both else None, "auprc": float(average_precision_score(y, p)) if both else None,
            "ece": ece(y, p) if calibrated else None}


def evaluate(runs: list[Run]) -> dict:
    systems = sorted({r.system for r in runs})
    per: dict[str, dict] = {}
    for held in systems:
        train = [r for r in runs if r.system != held]
        test = [r for r in runs if r.system == held]
        y = np.array([int(r.failed) for r in test])
        model = fit([r.row for r in train], [r.failed for r in train])
        row = {"runs": len(test), "failed": int(y.sum()),
               "detector": scores(y, np.array(predict(model, [r.row for r in test])), calibrated=True)}
        for name in BASELINES:
            row[name] = scores(y, np.array([r.row[name] for r in test]), calibrated=False)
        per[held] = row
        print(f"{held}: AUROC {row['detector']['auroc']:.3f}", file=sys.stderr, flush=True)
    methods = ["detector", *BASELINES]
    mean = {m: {k: float(np.mean([per[s][m][k] for s in systems if per[s][m][k] is not None]))
                if any(per[s][m][k] is not None for s in systems) else None for k in ("auroc", "auprc", "ece")} for m in methods}
    return {"systems": per, "mean": mean, "methods": methods, "runs": len(runs), "failed": sum(r.failed for r in runs)}


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown(result: dict) -> str:
    methods = result["methods"]
    head = "| system | runs | failed | " + " | ".join(f"{m} AUROC" for m in methods) + " | detector AUPRC | detector ECE |"
    lines = [head, "|" + "---|" * (len(methods) + 5)]
    rows = [(name, r) for name, r in result["systems"].items()] + [("**mean**", None)]
    for name, r in rows:
        if r is None:
            m = result["mean"]
            cells = [str(result["runs"]), str(result["failed"])] + [_f(m[x]["auroc"]) for x in methods] + [_f(m["detector"]["auprc"]), _f(m["detector"]["ece"])]
        else:
            cells = [str(r["runs"]), str(r["failed"])] + [_f(r[x]["auroc"]) for x in methods] + [_f(r["detector"]["auprc"]), _f(r["detector"]["ece"])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    mean = result["mean"]
    lines.append("")
    lines.append("Mean AUPRC: " + ", ".join(f"{m} {_f(mean[m]['auprc'])}" for m in methods) + ".")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="docs/detect_eval.json")
    parser.add_argument("--md", default=None, help="also write the markdown table here")
    args = parser.parse_args(argv)
    result = evaluate(load_runs())
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    table = markdown(result)
    if args.md:
        Path(args.md).write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
