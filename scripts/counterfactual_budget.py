"""How much step accuracy does each rerun buy? `counterfactual` over a base ranking, for several budgets k.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/counterfactual_budget.py \
        [--dataset bundled:test] [--base learned] [--ks 1,2,3,5,10] [--plot docs/counterfactual_budget.png]

Runs the base attributor once and `counterfactual` once per k through the
benchmark runner (run folders under --runs), then prints step accuracy with its
95% bootstrap interval, the share of verdicts verified by a rerun, and reruns
and seconds per trace, and draws step accuracy against reruns per trace.
Offline: the bundled environments re-run their simulated agents.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from rich.console import Console
from rich.table import Table

from faultlens.benchmark.metrics import compute_metrics
from faultlens.benchmark.runner import read_predictions, run_benchmark


def _run(dataset: str, method: str, out: Path, options: dict | None = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    run_benchmark(dataset, method, out=out, progress=False, baselines=[], concurrency=1, method_options=options)
    records = read_predictions(out / "predictions.jsonl")
    metrics = compute_metrics(records)
    verified = sum(1 for r in records if (r["predicted"].get("reason") or "").startswith("correcting step"))
    return {"step": metrics["step_accuracy"], "agent": metrics["agent_accuracy"], "n": metrics["n"],
            "verified": verified / max(len(records), 1), "reruns": metrics["cost"]["per_trace"]["reruns"],
            "seconds": metrics["cost"]["per_trace"]["seconds"]}


def _cell(m: dict) -> str:
    ci = m.get("ci")
    return f"{m['value']:.3f}" + (f" [{ci[0]:.3f}–{ci[1]:.3f}]" if ci else "")


def plot(rows: list[tuple[str, dict]], base: dict, base_name: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = [m["reruns"] for _, m in rows]
    ys = [m["step"]["value"] for _, m in rows]
    lo = [m["step"]["value"] - m["step"]["ci"][0] for _, m in rows]
    hi = [m["step"]["ci"][1] - m["step"]["value"] for _, m in rows]
    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label="counterfactual")
    for (label, m), x, y in zip(rows, xs, ys):
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax.axhline(base["step"]["value"], color="grey", linestyle="--", label=f"{base_name} alone")
    ax.set_xlabel("reruns per trace (mean)")
    ax.set_ylabel("step accuracy")
    ax.set_ylim(0, 1.0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", frameon=False)
    ax.set_title(f"counterfactual over {base_name}: accuracy bought by reruns")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="bundled:test")
    parser.add_argument("--base", default="learned")
    parser.add_argument("--ks", default="1,2,3,5,10")
    parser.add_argument("--runs", type=Path, default=Path(".faultlens/bench/counterfactual-budget"))
    parser.add_argument("--plot", type=Path, default=None, help="write the PNG here")
    args = parser.parse_args()
    console = Console(width=140)
    base = _run(args.dataset, args.base, args.runs / args.base)
    rows = []
    for k in [int(x) for x in args.ks.split(",")]:
        rows.append((f"k={k}", _run(args.dataset, "counterfactual", args.runs / f"k{k}", {"base": args.base, "k": k})))
        console.print(f"k={k} done")
    table = Table(title=f"counterfactual over {args.base} on {args.dataset} ({base['n']} traces, 95% bootstrap CIs)")
    for col in ("method", "step accuracy", "agent accuracy", "verified", "reruns/trace", "s/trace"):
        table.add_column(col, justify="left" if col == "method" else "right")
    table.add_row(args.base, _cell(base["step"]), _cell(base["agent"]), "-", "0", f"{base['seconds']:.4f}")
    for label, m in rows:
        table.add_row(f"counterfactual {label}", _cell(m["step"]), _cell(m["agent"]), f"{m['verified']:.1%}",
                      f"{m['reruns']:.2f}", f"{m['seconds']:.4f}")
    console.print(table)
    if args.plot:
        plot(rows, base, args.base, args.plot)
        console.print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
