"""Leave-one-system-out: every system scored by a model that never saw a run of it (the measure of record).

A *system* is one way of building agents: each agent framework of the bundled
benchmark (`ag2`, `autogen`, `openai-agents`, `smolagents`), faultlens's own
environments (`faultlens`), and each real dataset (`TRAIL`, `AgentRx`). For
each system S, `learned` is trained as the shipped model is (the bundled `dev`
split and the `train` halves of the real datasets) but without a single run of
S, and scores S: its bundled `test` traces, or every run of a real dataset
(both halves: none of them was trained on). Beside it, on the same traces:
`heuristic`, every label-free baseline, random choice (exact expected
accuracy, not a draw), `baseline:most-common-step` with its prior read from
the training labels (shown, never a competitor: it is a dataset prior), and
the frozen rows of `docs/loso/frozen/` (another commit's verdicts, replayed).

The mean over systems weighs each system the same; its 95% interval is a
percentile bootstrap that resamples traces within each system. Every
modelling choice is made on that mean, never on one system's own held-out half.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faultlens.attributors.learned import Blend, LearnedAttributor, fit, trace_features
from faultlens.attributors.registry import get
from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Attribution, Trace
from faultlens.middleware.model.roles import candidates

from .datasets import load_dataset
from .metrics import agent_applies, agent_correct, macro_mean, mode_scores, normalize_agent, step_correct
from .runner import MostCommonStep, baseline_names, gold_of, trace_meta
from .train import SHIPPED_BUNDLED, assert_no_test_traces, training_set

RANDOM = "random choice (exact)"
PRIOR = "most-common-step (train prior)"
EARLY_STEPS = 3  # "the first three steps": where an early-step bias shows
FROZEN_DIR = Path(__file__).resolve().parents[1] / "docs" / "loso" / "frozen"
SAMPLES, SEED = 1000, 0


def system_of(trace: Trace) -> str:
    """The system a trace belongs to: a real dataset by its format, a bundled trace by its framework."""
    fmt = trace.source.format or ""
    if fmt == "trail":
        return "TRAIL"
    if fmt == "taubench":
        return "AgentRx"
    return trace.source.framework or "faultlens"


def datasets(realdev: Path) -> tuple[list[str], list[str]]:
    """The training specs (the shipped model's) and the scored specs (bundled test, every run of each real set)."""
    train = [SHIPPED_BUNDLED, f"trail:{realdev / 'trail'}:train", f"taubench:{realdev / 'agentrx'}:train"]
    scored = ["bundled:test", f"trail:{realdev / 'trail'}", f"taubench:{realdev / 'agentrx'}"]
    return train, scored


@dataclass
class Verdict:
    """One method's answer on one trace, scored: what `LosoReport` aggregates."""

    step: float | None  # 1.0 right, 0.0 wrong; a probability for random choice; None: not measured (`NOT_MEASURED`)
    agent: float | None  # None where agent accuracy does not apply (single agent, no gold agent)
    top3: float | None  # None for a method without a ranking
    early: float | None  # the verdict falls on one of the first EARLY_STEPS steps
    mode: str | None = None
    picked: dict[str, Any] | None = None  # what the method said (step, agent, mode, top3), for `freeze`


# A frozen row's verdict on a system it never saw: left out of every mean, shown as "-".
NOT_MEASURED = Verdict(step=None, agent=None, top3=None, early=None)


@dataclass
class LosoReport:
    """Per system, per method, one `Verdict` per scored trace (in the same trace order for every method)."""

    systems: list[str]
    methods: list[str]
    verdicts: dict[str, dict[str, list[Verdict]]]  # system -> method -> verdicts
    gold: dict[str, list[dict[str, Any]]]  # system -> gold label records, in trace order
    trace_ids: dict[str, list[str]] = field(default_factory=dict)  # system -> scored trace ids, in that order
    competitors: list[str] = field(default_factory=list)  # the methods the default has to beat
    default: str | None = None

    def values(self, system: str, method: str, what: str) -> np.ndarray:
        got = [getattr(v, what) for v in self.verdicts[system][method]]
        return np.asarray([g for g in got if g is not None], dtype=float)

    def gold_early(self, system: str) -> float:
        return float(np.mean([g["step"] < EARLY_STEPS for g in self.gold[system]]))

    def mode_f1(self, system: str, method: str) -> float | None:
        """Mode macro-F1 on a system whose gold labels name modes (`benchmark.metrics.mode_scores`), else None."""
        if all(v.step is None for v in self.verdicts[system][method]):
            return None
        records = [{"status": "ok", "predicted": {"mode": v.mode}, "gold": g}
                   for v, g in zip(self.verdicts[system][method], self.gold[system])]
        return mode_scores(records, samples=0)["macro_f1"]["value"]

    def accuracy(self, system: str, method: str, what: str) -> float | None:
        values = self.values(system, method, what)
        return float(values.mean()) if values.size else None

    def mean(self, method: str, what: str, samples: int = SAMPLES) -> dict[str, Any]:
        """The mean over systems (each weighs the same) and its 95% bootstrap interval (traces resampled per system)."""
        found = macro_mean((self.values(system, method, what) for system in self.systems), samples, SEED)
        return {"value": found["value"], "ci": found["ci"], "systems": found["groups"]}

    def mean_difference(self, method: str, other: str, what: str, samples: int = SAMPLES) -> dict[str, Any]:
        """Mean over systems of `method` minus `other`, with a paired bootstrap interval (the same traces for both)."""
        def delta(system: str) -> np.ndarray:
            pairs = [(getattr(a, what), getattr(b, what)) for a, b in zip(self.verdicts[system][method], self.verdicts[system][other])]
            return np.asarray([x - y for x, y in pairs if x is not None and y is not None], dtype=float)
        found = macro_mean((delta(system) for system in self.systems), samples, SEED)
        return {"value": found["value"], "ci": found["ci"]}

    def summary(self) -> dict[str, Any]:
        """Plain numbers (JSON-ready): per system and method, and the means with their intervals."""
        out: dict[str, Any] = {"default": self.default, "competitors": self.competitors, "systems": {}, "mean": {}}
        for system in self.systems:
            out["systems"][system] = {
                "traces": len(self.gold[system]), "gold_early_share": self.gold_early(system),
                "methods": {m: {"step": self.accuracy(system, m, "step"), "agent": self.accuracy(system, m, "agent"),
                                "top3": self.accuracy(system, m, "top3"), "early_share": self.accuracy(system, m, "early"),
                                "mode_f1": self.mode_f1(system, m)} for m in self.methods}}
        out["mean"] = {m: {w: self.mean(m, w) for w in ("step", "agent", "top3")} for m in self.methods}
        return out


def _verdict(trace: Trace, attribution: Attribution) -> Verdict:
    gold = gold_of(trace)
    ok = attribution.status.value == "ok" and attribution.step is not None
    predicted = {"step": attribution.step, "native_step": _native(trace, attribution.step), "agent": attribution.agent}
    record = {"gold": gold, "meta": trace_meta(trace)}
    ranked = [c.step for c in attribution.ranking][:3]
    return Verdict(step=float(ok and step_correct(predicted, gold)),
                   agent=float(ok and agent_correct(predicted, gold)) if agent_applies(record) else None,
                   top3=float(gold["step"] in ranked) if attribution.ranking else None,
                   early=float(attribution.step is not None and ok and attribution.step < EARLY_STEPS), mode=attribution.mode if ok else None,
                   picked={"step": attribution.step, "agent": attribution.agent, "mode": attribution.mode, "top3": ranked}
                   if ok else None)


def _native(trace: Trace, step: int | None) -> str | None:
    from .runner import native_step

    return native_step(trace, step)


def random_verdict(trace: Trace) -> Verdict:
    """Random choice among the decision steps, exactly: the probability of hitting the gold step (and agent)."""
    pool = candidates(trace) or trace.steps
    gold = gold_of(trace)
    gold_agent = normalize_agent(gold["agent"]) if gold["agent"] else None
    agent = sum(gold_agent is not None and normalize_agent(s.agent) == gold_agent for s in pool) / len(pool)
    applies = agent_applies({"gold": gold, "meta": trace_meta(trace)})
    return Verdict(step=sum(s.index == gold["step"] for s in pool) / len(pool), agent=agent if applies else None,
                   top3=min(3, len(pool)) / len(pool) if any(s.index == gold["step"] for s in pool) else 0.0,
                   early=sum(s.index < EARLY_STEPS for s in pool) / len(pool))


def frozen_rows(directory: Path = FROZEN_DIR) -> dict[str, dict[str, dict[str, Any]]]:
    """Frozen verdicts (`docs/loso/frozen/*.json`): row name -> trace id -> {"step", "agent", "mode", "top3"}."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        data = json.loads(path.read_text())
        rows[data["name"]] = data["verdicts"]
    return rows


def _replayed(trace: Trace, saved: Mapping[str, Any] | None) -> Verdict:
    """A frozen verdict scored against today's gold label (a trace the frozen row lacks counts as wrong)."""
    from faultlens.middleware.model.trace import AttributionStatus, Candidate

    if saved is None:
        return _verdict(trace, Attribution(trace_id=trace.id, method="frozen", status=AttributionStatus.error, error="missing"))
    ranking = [Candidate(step=s, score=0.0) for s in saved.get("top3") or []]
    return _verdict(trace, Attribution(trace_id=trace.id, method="frozen", status=AttributionStatus.ok, step=saved["step"],
                                       agent=saved.get("agent"), mode=saved.get("mode"), ranking=ranking))



def leave_one_system_out(realdev: Path, **options: Any) -> LosoReport:
    """Load the shipped model's training sets and the scored sets (`datasets`), then `score_systems`."""
    train_specs, scored_specs = datasets(realdev)
    train, sources, _ = training_set(train_specs)
    scored = [t for spec in scored_specs for t in load_dataset(spec).traces()]
    return score_systems(train, scored, sources=sources, **options)


def score_systems(train: list[Trace], scored: list[Trace], *, sources: Mapping[str, str] | None = None,
                  methods: Sequence[str] | None = None, seed: int = 0, fit_options: Mapping[str, Any] | None = None,
                  features: dict[str, np.ndarray] | None = None, default: str | None = None,
                  progress: Callable[[str], None] | None = None, frozen: Mapping[str, Mapping[str, Any]] | None = None,
                  fold_methods: Mapping[str, Callable[[Any], Any]] | None = None, data_dir: Path | None = None) -> LosoReport:
    """Score every system of `scored` with `learned` (and `blend`) trained on the `train` runs of every other system,
    beside the comparison methods (module docstring).

    `methods` are registered attributors that need no training (default: `heuristic` and every label-free
    baseline); `fold_methods` are built per fold from that fold's `LearnedModel` (default: `learned` and `blend`);
    `sources` (trace id -> dataset) and `fit_options` go to every `fit`; `features` (trace id -> `trace_features`)
    saves computing them again; `frozen` adds replayed rows (default: `docs/loso/frozen/`).
    """
    assert_no_test_traces("leave-one-system-out training", train, data_dir)
    scored = [t for t in scored if t.gold is not None and t.steps and 0 <= t.gold.step < len(t.steps)]
    systems = sorted({system_of(t) for t in scored})
    if len(systems) < 2:
        raise FaultlensError(f"leave-one-system-out needs at least 2 systems, got {systems}")
    methods = list(methods) if methods is not None else ["heuristic"] + baseline_names()
    fold_methods = dict(fold_methods) if fold_methods is not None else {
        "learned": lambda model: LearnedAttributor(model=model), "blend": lambda model: Blend(model=model)}
    frozen = dict(frozen_rows() if frozen is None else frozen)
    known = features or {}
    features = {t.id: known[t.id] if t.id in known else trace_features(t) for t in {t.id: t for t in train + scored}.values()}
    report = LosoReport(systems, [], {}, {}, default=default)
    for system in systems:
        fold_train = [t for t in train if system_of(t) != system]
        held = [t for t in scored if system_of(t) == system]
        model = fit(fold_train, seed=seed, features=features, sources=sources, **(fit_options or {}))
        per: dict[str, list[Verdict]] = {}
        for name, build in fold_methods.items():
            attributor = build(model)
            per[name] = [_verdict(t, _attribute(attributor, t, features)) for t in held]
        for name in methods:
            attributor = get(name)
            per[name] = [_verdict(t, attributor.attribute(attributor_view(t))) for t in held]
        prior = MostCommonStep(fold_train)
        per[PRIOR] = [_verdict(t, prior.attribute(attributor_view(t))) for t in held]
        per[RANDOM] = [random_verdict(t) for t in held]
        for name, saved in frozen.items():
            # a system added after the row was frozen is not measured by it (not counted as wrong)
            covered = any(t.id in saved for t in held)
            per[name] = [_replayed(t, saved.get(t.id)) if covered else NOT_MEASURED for t in held]
        report.verdicts[system] = per
        report.gold[system] = [gold_of(t) for t in held]
        report.trace_ids[system] = [t.id for t in held]
        report.methods = list(per)
        if progress is not None:
            progress(system)
    report.competitors = [m for m in report.methods if m not in (PRIOR, default)]
    return report


def _attribute(attributor: Any, trace: Trace, features: dict[str, np.ndarray]) -> Attribution:
    view = attributor_view(trace)
    if isinstance(attributor, LearnedAttributor):
        return attributor.attribute(view, features=features[trace.id])
    return attributor.attribute(view)


def freeze(report: LosoReport, method: str, name: str, path: Path) -> Path:
    """Write one method's verdicts of `report` as a frozen row called `name` (read back by `frozen_rows`)."""
    verdicts = {trace_id: v.picked for system in report.systems
                for trace_id, v in zip(report.trace_ids[system], report.verdicts[system][method])}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": name, "method": method, "verdicts": verdicts}, sort_keys=True) + "\n")
    return path


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def loso_tables(report: LosoReport) -> list[Any]:
    """Rich tables: step, agent accuracy and top-3 recall per method and system with the mean and its interval;
    then each system's share of verdicts on the first three steps against the gold share, and mode macro-F1."""
    from rich.table import Table

    tables = []
    titles = {"step": "step accuracy (%)", "agent": "agent accuracy (%), multi-agent traces", "top3": "top-3 recall of the gold step (%)"}
    for what, title in titles.items():
        table = Table(title=f"leave-one-system-out: {title}", title_justify="left")
        table.add_column("method", overflow="fold")
        for system in report.systems:
            n = report.values(system, report.methods[0] if what != "top3" else RANDOM, what).size
            table.add_column(f"{system}\n({n})", justify="right")
        table.add_column("mean [95% CI]", justify="right")
        means = {method: report.mean(method, what) for method in report.methods}
        measured = max(m["systems"] for m in means.values())  # systems where this measure applies at all
        for method in report.methods:
            mean = means[method]
            if mean["value"] is None:
                continue
            cells = [_pct(report.accuracy(s, method, what)) for s in report.systems]
            label = method + (" (default)" if method == report.default else "") + (" (not a competitor)" if method == PRIOR else "")
            ci = f" [{_pct(mean['ci'][0])}, {_pct(mean['ci'][1])}]" if mean["ci"] else ""
            if mean["systems"] < measured:
                ci += f" over {mean['systems']} systems"
            table.add_row(label, *cells, _pct(mean["value"]) + ci)
        tables.append(table)
    table = Table(title=f"share of verdicts on the first {EARLY_STEPS} steps (%), gold share first", title_justify="left")
    table.add_column("method", overflow="fold")
    for system in report.systems:
        table.add_column(system, justify="right")
    table.add_row("gold labels", *(_pct(report.gold_early(s)) for s in report.systems))
    for method in report.methods:
        table.add_row(method, *(_pct(report.accuracy(s, method, "early")) for s in report.systems))
    tables.append(table)
    table = Table(title="mode macro-F1 (%), systems whose labels name modes", title_justify="left")
    table.add_column("method", overflow="fold")
    labelled_modes = [s for s in report.systems if any(g.get("mode") for g in report.gold[s])]
    for system in labelled_modes:
        table.add_column(system, justify="right")
    for method in report.methods:
        f1s = [report.mode_f1(s, method) for s in labelled_modes]
        if any(report.verdicts[s][method][0].mode for s in labelled_modes if report.verdicts[s][method]):
            table.add_row(method, *(_pct(f) for f in f1s))
    tables.append(table)
    return tables
