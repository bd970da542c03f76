"""PNG plots of a benchmark report (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .metrics import gives_confidence  # noqa: E402
from .runner import safe_name  # noqa: E402
from .scored import ScoredRun  # noqa: E402


def _grouped_bars(ax, groups: list[str], series: dict[str, list[float]], errors: dict[str, np.ndarray] | None = None) -> None:
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(groups))
    for i, (label, values) in enumerate(series.items()):
        yerr = errors.get(label) if errors else None
        ax.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=label, yerr=yerr, capsize=2)
    ax.set_xticks(x, groups, rotation=30 if len(groups) > 6 else 0, ha="right" if len(groups) > 6 else "center")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="y", alpha=0.3)


def _accuracy_by(runs: list[ScoredRun], by_name: str, path: Path, xlabel: str, title: str) -> Path:
    """Step accuracy with its 95% CI per group of one breakdown, a bar per run; n under a group when it is one
    number (every run scored the same traces in it)."""
    groups: list[str] = []
    for run in runs:
        groups += [g for g in run.metrics["by"][by_name] if g not in groups]
    series, errors = {}, {}
    for run in runs:
        by = run.metrics["by"][by_name]
        values, low, high = [], [], []
        for g in groups:
            metric = by.get(g, {}).get("step_accuracy") or {}
            v = metric.get("value") or 0.0
            ci = metric.get("ci") or [v, v]
            values.append(v)
            low.append(max(v - ci[0], 0))
            high.append(max(ci[1] - v, 0))
        series[run.label] = values
        errors[run.label] = np.array([low, high])
    counts = [{r.metrics["by"][by_name][g]["n"] for r in runs if g in r.metrics["by"][by_name]} for g in groups]
    labels = [f"{g}\n(n={n.pop()})" if len(n) == 1 else g for g, n in zip(groups, counts)]
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(groups) + 4), 4))
    _grouped_bars(ax, labels, series, errors)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("exact step accuracy")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def step_accuracy_by_length(runs: list[ScoredRun], path: Path) -> Path:
    return _accuracy_by(runs, "length", path, "trace length (steps)", "Step accuracy by trace length (95% CI)")


def step_accuracy_by_confidence(runs: list[ScoredRun], path: Path) -> Path | None:
    """How often a verdict was right, by the confidence its method gave it (methods that give one)."""
    runs = [r for r in runs if gives_confidence(r.metrics)]
    if not runs:
        return None
    return _accuracy_by(runs, "confidence", path, "the verdict's confidence",
                        "Step accuracy by the verdict's confidence (95% CI): how far to trust it")


def mode_f1(runs: list[ScoredRun], path: Path) -> Path | None:
    modes = sorted({m for run in runs for m, s in run.metrics["overall"]["per_mode"].items() if s["support"]})
    # A method that never names a mode (the trivial baselines) has F1 0 everywhere: leave it out.
    runs = [r for r in runs if any(s["predicted"] for s in r.metrics["overall"]["per_mode"].values())]
    if not modes or not runs:
        return None
    series = {run.label: [run.metrics["overall"]["per_mode"].get(m, {}).get("f1", 0.0) for m in modes] for run in runs}
    fig, ax = plt.subplots(figsize=(max(7, 0.6 * len(modes) * max(len(runs), 1) ** 0.5 + 4), 4))
    _grouped_bars(ax, modes, series)
    ax.set_xlabel("failure mode (gold)")
    ax.set_ylabel("F1")
    ax.set_title("Per-mode F1 (methods that name a mode)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def confusion(run: ScoredRun, path: Path) -> Path | None:
    c = run.metrics["overall"]["confusion"]
    if not c["gold"]:
        return None
    matrix = np.array(c["matrix"], dtype=float)
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * len(c["predicted"]) + 2), max(3, 0.45 * len(c["gold"]) + 1.5)))
    image = ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(c["predicted"])), c["predicted"], rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(c["gold"])), c["gold"], fontsize=8)
    for (i, j), value in np.ndenumerate(matrix):
        if value:
            ax.text(j, i, str(int(value)), ha="center", va="center", fontsize=7,
                    color="white" if value > matrix.max() / 2 else "black")
    ax.set_xlabel("predicted mode")
    ax.set_ylabel("gold mode")
    ax.set_title(f"Mode confusion: {run.label}")
    fig.colorbar(image, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw_all(runs: list[ScoredRun], out: Path) -> list[Path]:
    """Every plot of the report, into `out`; returns the files written."""
    drawn = [step_accuracy_by_length(runs, out / "step_accuracy_by_length.png")]
    by_confidence = step_accuracy_by_confidence(runs, out / "step_accuracy_by_confidence.png")
    if by_confidence:
        drawn.append(by_confidence)
    f1 = mode_f1(runs, out / "mode_f1.png")
    if f1:
        drawn.append(f1)
    for run in runs:
        if not run.baseline:
            matrix = confusion(run, out / f"confusion_{safe_name(run.label)}.png")
            if matrix:
                drawn.append(matrix)
    return drawn
