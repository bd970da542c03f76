"""Reports over one or more run folders: a rich table, report.json, report.md and plots.

Each run folder (written by `benchmark.runner`) contributes its method and its
baselines. Baselines scored on the same traces in several folders appear once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from faultlens.middleware.errors import InputError

from .metrics import BREAKDOWNS, full_report, gives_confidence
from .runner import BASELINE_PREFIX, BASELINES_DIR, PREDICTIONS, RUN_INFO, read_predictions
from .scored import ScoredRun

BREAKDOWN_TITLES = {"benchmark": "environment", "modality": "modality", "framework": "framework",
                    "subset": "subset", "length": "trace length (steps)", "confidence": "confidence"}


def load_runs(folders: list[Path]) -> list[ScoredRun]:
    """The method runs and (deduplicated) baseline runs of the given folders, methods first."""
    methods: list[ScoredRun] = []
    baselines: list[ScoredRun] = []
    seen: set[tuple] = set()

    def key(name: str, records: list[dict[str, Any]]) -> tuple:
        return (name, records[0].get("dataset") if records else None, frozenset(r["trace_id"] for r in records))

    for folder in folders:
        folder = Path(folder)
        predictions = folder / PREDICTIONS
        if not predictions.exists():
            raise InputError(str(folder), None, None, f"not a benchmark run folder (no {PREDICTIONS}); make one with `faultlens bench run`")
        info_path = folder / RUN_INFO
        info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else {}
        # Sorted, so the bootstrap sees the same order however the traces finished.
        records = sorted(read_predictions(predictions), key=lambda r: r["trace_id"])
        first = records[0] if records else {}
        method = info.get("method") or first.get("method") or folder.name
        methods.append(ScoredRun(label=method, method=method, model=info.get("model") or first.get("model"),
                           dataset=info.get("dataset") or first.get("dataset") or "?", folder=folder,
                           baseline=method.startswith(BASELINE_PREFIX), records=records, status=info.get("status")))
        seen.add(key(method, records))
    for folder in folders:
        for path in sorted((Path(folder) / BASELINES_DIR).glob(f"*/{PREDICTIONS}")):
            records = sorted(read_predictions(path), key=lambda r: r["trace_id"])
            if not records:
                continue
            name = records[0].get("method") or BASELINE_PREFIX + path.parent.name
            if key(name, records) in seen:  # the same baseline on the same traces: show it once
                continue
            seen.add(key(name, records))
            baselines.append(ScoredRun(label=name, method=name, model=None, dataset=records[0].get("dataset") or "?",
                                 folder=path.parent, baseline=True, records=records))
    runs = [r for r in methods if not r.baseline] + sorted([r for r in methods if r.baseline] + baselines, key=lambda r: r.method)
    _unique_labels(runs)
    return runs


def _unique_labels(runs: list[ScoredRun]) -> None:
    for run in runs:
        if run.model and not run.baseline:
            run.label = f"{run.method} · {run.model}"
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.label] = counts.get(run.label, 0) + 1
    for run in runs:
        if counts[run.label] > 1:
            run.label = f"{run.label} ({run.dataset}, {run.folder.name})"


def fmt(metric: dict | None, ci: bool = True, sep: str = " ") -> str:
    if not metric or metric.get("value") is None:
        return "–"
    text = f"{metric['value']:.3f}"
    if ci and metric.get("ci"):
        low, high = metric["ci"]
        if sep == "\n":  # the console table: drop the leading zeros to keep it narrow
            text += f"\n[{low:.2f}–{high:.2f}]".replace("0.", ".").replace("1.00", "1.0")
        else:
            text += f"{sep}[{low:.2f}–{high:.2f}]"
    return text


HEADLINE = ("agent acc", "step acc", "step ±1", "mode F1", "joint acc")


def headline_cells(m: dict, ci: bool = True, sep: str = " ") -> list[str]:
    return [fmt(m["agent_accuracy"], ci, sep), fmt(m["step_accuracy"], ci, sep), fmt(m["step_within"].get("1"), ci, sep),
            fmt(m["mode_macro_f1"], ci, sep), fmt(m["joint_accuracy"], ci, sep)]


def other_cells(m: dict) -> list[str]:
    s = m["status"]
    per = m["cost"]["per_trace"]
    return [str(m["n"]), f"{s['unparsed']}/{s['error']}", f"{per['calls']:.2f}", f"{per['input_tokens'] + per['output_tokens']:.0f}",
            f"{per['usd']:.4f}", f"{per['seconds']:.3f}", f"{per.get('reruns', 0):.2f}"]


OTHER = ("n", "unparsed/error", "calls/trace", "tokens/trace", "$/trace", "s/trace", "reruns/trace")


def rich_table(runs: list[ScoredRun]) -> Table:
    """Headline metrics, CIs under the values; the cost columns are in `cost_table`."""
    table = Table(title="faultlens benchmark (95% bootstrap CIs)", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("method", style="bold", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for name in HEADLINE:
        table.add_column(name, justify="right", min_width=9, no_wrap=True)
    for run in runs:
        m = run.metrics["overall"]
        table.add_row(run.label, str(m["n"]), *headline_cells(m, sep="\n"), style="dim" if run.baseline else None)
    return table


def cost_table(runs: list[ScoredRun]) -> Table:
    table = Table(title="unparsed and failed answers (counted as wrong), cost per trace", box=box.SIMPLE_HEAD)
    table.add_column("method", style="bold", overflow="fold")
    for name in ("unparsed", "error", "calls", "tokens", "USD", "seconds", "reruns"):
        table.add_column(name, justify="right")
    for run in runs:
        status = run.metrics["overall"]["status"]
        per = run.metrics["overall"]["cost"]["per_trace"]
        table.add_row(run.label, str(status["unparsed"]), str(status["error"]), f"{per['calls']:.2f}",
                      f"{per['input_tokens'] + per['output_tokens']:.0f}", f"{per['usd']:.4f}", f"{per['seconds']:.4f}",
                      f"{per.get('reruns', 0):.2f}", style="dim" if run.baseline else None)
    return table


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def markdown(runs: list[ScoredRun], plots: list[Path]) -> str:
    lines = ["# faultlens benchmark report", "",
             "Datasets: " + ", ".join(sorted({f"`{r.dataset}`" for r in runs})) + ". 95% bootstrap confidence intervals in brackets; "
             "unparsed and failed answers count as wrong.", ""]
    lines += [_md_row(["method", *HEADLINE, *OTHER]), _md_row(["---"] * (1 + len(HEADLINE) + len(OTHER)))]
    for run in runs:
        lines.append(_md_row([run.label, *headline_cells(run.metrics["overall"]), *other_cells(run.metrics["overall"])]))
    for by in BREAKDOWNS:
        if by == "confidence":
            lines += _confidence_markdown(runs)
            continue
        groups = sorted({g for run in runs for g in run.metrics["by"][by]},
                        key=lambda g: list(runs[0].metrics["by"][by]).index(g) if g in runs[0].metrics["by"][by] else 999)
        if len(groups) < 2 and by not in ("benchmark", "modality"):
            continue
        lines += ["", f"## Step accuracy by {BREAKDOWN_TITLES[by]}", "",
                  _md_row([BREAKDOWN_TITLES[by], "n", *[r.label for r in runs]]), _md_row(["---"] * (2 + len(runs)))]
        for g in groups:
            n = next((r.metrics["by"][by][g]["n"] for r in runs if g in r.metrics["by"][by]), 0)
            lines.append(_md_row([g, str(n), *[fmt(r.metrics["by"][by].get(g, {}).get("step_accuracy"), ci=False) for r in runs]]))
    namers = [r for r in runs if any(m["predicted"] for m in r.metrics["overall"]["per_mode"].values())]
    modes = sorted({m for r in runs for m, v in r.metrics["overall"]["per_mode"].items() if v["support"]})
    if namers and modes:
        lines += ["", "## Per-mode precision / recall / F1", "",
                  _md_row(["gold mode", "support", *[r.label for r in namers]]), _md_row(["---"] * (2 + len(namers)))]
        for mode in modes:
            support = next(r.metrics["overall"]["per_mode"][mode]["support"] for r in runs if mode in r.metrics["overall"]["per_mode"])
            cells = []
            for r in namers:
                v = r.metrics["overall"]["per_mode"].get(mode)
                cells.append(f"{v['precision']:.2f} / {v['recall']:.2f} / {v['f1']:.2f}" if v else "–")
            lines.append(_md_row([mode, str(support), *cells]))
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def _accuracy_and_n(run: ScoredRun, bucket: str) -> str:
    group = run.metrics["by"]["confidence"].get(bucket)
    return f"{fmt(group['step_accuracy'], ci=False)} (n={group['n']})" if group else "–"


def _by_confidence(runs: list[ScoredRun]) -> tuple[list[ScoredRun], list[str]]:
    """The runs whose method gives a confidence, and every confidence bucket any of them has, in order."""
    runs = [r for r in runs if gives_confidence(r.metrics)]
    buckets: list[str] = []
    for run in runs:
        buckets += [g for g in run.metrics["by"]["confidence"] if g not in buckets]
    return runs, buckets


def _confidence_markdown(runs: list[ScoredRun]) -> list[str]:
    runs, buckets = _by_confidence(runs)
    if not runs:
        return []
    lines = ["", f"## Step accuracy by {BREAKDOWN_TITLES['confidence']}", "",
             "Each method's verdicts grouped by the confidence it gave them: how far a verdict can be trusted.", "",
             _md_row(["confidence", *[r.label for r in runs]]), _md_row(["---"] * (1 + len(runs)))]
    return lines + [_md_row([g, *[_accuracy_and_n(r, g) for r in runs]]) for g in buckets]


def confidence_table(runs: list[ScoredRun]) -> Table | None:
    """Step accuracy (and how many verdicts) per confidence quarter, per method that gives a confidence."""
    runs, buckets = _by_confidence(runs)
    if not runs:
        return None
    table = Table(title=f"step accuracy by {BREAKDOWN_TITLES['confidence']}", box=box.SIMPLE_HEAD)
    table.add_column("confidence", style="bold")
    for run in runs:
        table.add_column(run.label, justify="right")
    for g in buckets:
        table.add_row(g, *[_accuracy_and_n(r, g) for r in runs])
    return table


def make_report(folders: list[str | Path], out: str | Path | None = None, console: Console | None = None,
                plots: bool = True, samples: int | None = None) -> dict:
    """Score the runs in `folders`, print the table, write report.json, report.md and the plots into `out`."""
    from . import metrics as m

    runs = load_runs([Path(f) for f in folders])
    options = {"samples": samples if samples is not None else m.BOOTSTRAP_SAMPLES}
    for run in runs:
        run.metrics = full_report(run.records, **options)
    out = Path(out) if out is not None else Path(folders[0])
    out.mkdir(parents=True, exist_ok=True)
    drawn: list[Path] = []
    if plots:
        from .plots import draw_all

        drawn = draw_all(runs, out)
    report = {"runs": [{"label": r.label, "method": r.method, "model": r.model, "dataset": r.dataset, "folder": str(r.folder),
                        "baseline": r.baseline, "status": r.status, "metrics": r.metrics} for r in runs],
              "plots": [p.name for p in drawn]}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(runs, drawn), encoding="utf-8")
    console = console or Console()
    console.print(rich_table(runs))
    console.print(cost_table(runs))
    for by in ("benchmark", "modality"):
        console.print(breakdown_table(runs, by))
    by_confidence = confidence_table(runs)
    if by_confidence is not None:
        console.print(by_confidence)
    console.print(f"wrote {out / 'report.json'}, {out / 'report.md'}" + (f" and {len(drawn)} plot(s)" if drawn else ""))
    return report


def breakdown_table(runs: list[ScoredRun], by: str) -> Table:
    """Step accuracy per group: each method, and the best baseline of that group."""
    table = Table(title=f"step accuracy by {BREAKDOWN_TITLES[by]}", box=box.SIMPLE_HEAD)
    table.add_column(BREAKDOWN_TITLES[by], style="bold")
    table.add_column("n", justify="right")
    methods = [r for r in runs if not r.baseline]
    baselines = [r for r in runs if r.baseline]
    for run in methods:
        table.add_column(run.label, justify="right")
    if baselines:
        table.add_column("best baseline", justify="right", style="dim")
    groups: list[str] = []
    for run in runs:
        groups += [g for g in run.metrics["by"][by] if g not in groups]
    for g in groups:
        n = next((r.metrics["by"][by][g]["n"] for r in runs if g in r.metrics["by"][by]), 0)
        cells = [fmt(r.metrics["by"][by].get(g, {}).get("step_accuracy"), ci=False) for r in methods]
        if baselines:
            scored = [(r.metrics["by"][by][g]["step_accuracy"]["value"] or 0.0, r.method.removeprefix(BASELINE_PREFIX))
                      for r in baselines if g in r.metrics["by"][by]]
            best = max(scored) if scored else None
            cells.append("–" if not best else f"{best[0]:.3f} ({best[1]})" if best[0] > 0 else "0.000")
        table.add_row(g, str(n), *cells)
    return table
