"""Scoring predictions against gold labels, the Who&When / Who&When Pro way, correctly.

Every function here reads prediction records: the dicts of one line of
`predictions.jsonl` (see `benchmark.runner`):

    {"trace_id", "status", "predicted": {"agent", "step", "native_step", "mode", ...},
     "gold": {"agent", "step", "native_step", "mode"}, "cost": {...}, "meta": {...}}

Rules (each one decides a number, so they are spelled out):

- A prediction whose status is not "ok" (unparsed, error) is wrong on every
  metric, and counted in `status`.
- Step: exact equality. The native step ids are compared when both sides have
  one (string equality: "1.1" is not "1.10"), else the 0-based indices (integer
  equality). Never substring matching: gold 1, predicted 10 is wrong.
- Step within ±k: |predicted index - gold index| <= k.
- Agent accuracy: only on multi-agent traces with a gold agent. Names match
  case-insensitively, ignoring a trailing parenthetical, because Who&When's
  Hand-Crafted roles read "Orchestrator (thought)" where `mistake_agent` reads
  "Orchestrator".
- Mode macro-F1: over the traces with a gold mode; the macro average runs over
  the modes present in the gold labels (a prediction of another mode, or of none,
  is a miss for the gold mode's recall and a false positive for the predicted one).
- Joint accuracy: step right, and agent right where agent accuracy applies, and
  mode right where the trace has a gold mode.
- 95% confidence intervals: percentile bootstrap over traces (seeded numpy).
- By confidence: each method's own `confidence` of each verdict, in quarters
  (the last includes 1.0); "none" when it gives none (the baselines, an
  unparsed answer). How far a verdict of a given confidence can be trusted.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

Record = dict[str, Any]

DEFAULT_KS = (1, 3)
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0
LENGTH_BUCKETS = ((1, 10), (11, 20), (21, 50), (51, 100), (101, None))
CONFIDENCE_BUCKETS = ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0))
BREAKDOWNS = ("subset", "modality", "framework", "benchmark", "length", "confidence")
COST_FIELDS = ("calls", "input_tokens", "output_tokens", "usd", "seconds", "reruns")
NO_MODE = "(none)"

_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


# -- per-trace judgements -----------------------------------------------------


def as_index(value: Any) -> int | None:
    """An integer step index, or None. Strings count only if they are entirely digits."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def is_ok(record: Record) -> bool:
    return record.get("status") == "ok"


def step_correct(predicted: dict, gold: dict) -> bool:
    """Exact step match: native ids when both have one, else integer indices."""
    p_native, g_native = predicted.get("native_step"), gold.get("native_step")
    if p_native is not None and g_native is not None:
        return str(p_native).strip() == str(g_native).strip()
    p, g = as_index(predicted.get("step")), as_index(gold.get("step"))
    return p is not None and g is not None and p == g


def step_within(predicted: dict, gold: dict, k: int) -> bool:
    p, g = as_index(predicted.get("step")), as_index(gold.get("step"))
    return p is not None and g is not None and abs(p - g) <= k


def normalize_agent(name: Any) -> str:
    """An agent name as scored: case-folded, without a trailing parenthetical ("Orchestrator (thought)" is "orchestrator")."""
    return _PAREN.sub("", str(name)).strip().casefold() if name is not None else ""


def agent_correct(predicted: dict, gold: dict) -> bool:
    return predicted.get("agent") is not None and normalize_agent(predicted["agent"]) == normalize_agent(gold.get("agent"))


def normalize_mode(mode: Any) -> str | None:
    return str(mode).strip().upper() if mode not in (None, "") else None


def agent_applies(record: Record) -> bool:
    return bool(record.get("meta", {}).get("multi_agent", True)) and record["gold"].get("agent") is not None


def mode_applies(record: Record) -> bool:
    return normalize_mode(record["gold"].get("mode")) is not None


def length_bucket(n_steps: int | None) -> str:
    if n_steps is None:
        return "unknown"
    for low, high in LENGTH_BUCKETS:
        if n_steps >= low and (high is None or n_steps <= high):
            return f"{low}-{high}" if high is not None else f"{low}+"
    return "0"


def confidence_bucket(value: Any) -> str:
    """The quarter of [0, 1] a verdict's confidence falls in ("0.50-0.75"), or "none"; the last takes 1.0 and above."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        return "none"
    low, high = next((b for b in CONFIDENCE_BUCKETS if value < b[1]), CONFIDENCE_BUCKETS[-1])
    return f"{low:.2f}-{high:.2f}"


# -- aggregates ---------------------------------------------------------------


def _weights(n: int, samples: int, seed: int) -> Iterable[np.ndarray]:
    """Bootstrap resamples as count vectors, in chunks to bound memory."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(samples, 2_000_000 // max(n, 1)))
    done = 0
    while done < samples:
        size = min(chunk, samples - done)
        yield rng.multinomial(n, np.full(n, 1.0 / n), size=size).astype(np.float64)
        done += size


def _ci(values: np.ndarray) -> list[float] | None:
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return [float(low), float(high)]


def _rates(pairs: dict[str, tuple[np.ndarray, np.ndarray]], samples: int, seed: int) -> dict[str, dict]:
    """Several accuracies (hits over applicable traces) with CIs, bootstrapped in one pass."""
    names = list(pairs)
    hits = np.array([pairs[k][0] & pairs[k][1] for k in names], dtype=np.float64)
    applies = np.array([pairs[k][1] for k in names], dtype=np.float64)
    boot = []
    if samples:
        for w in _weights(hits.shape[1], samples, seed):
            with np.errstate(invalid="ignore", divide="ignore"):
                boot.append((w @ hits.T) / (w @ applies.T))
    stacked = np.concatenate(boot) if boot else None
    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        n = int(applies[i].sum())
        if n == 0:
            out[name] = {"value": None, "ci": None, "n": 0}
        else:
            out[name] = {"value": float(hits[i].sum() / n), "ci": _ci(stacked[:, i]) if stacked is not None else None, "n": n}
    return out


def macro_mean(groups: Iterable[np.ndarray], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """The mean over groups of each group's mean (every group weighs the same, an empty one is skipped), with a 95%
    percentile bootstrap interval that resamples within each group: {"value", "ci", "groups"}."""
    rng = np.random.default_rng(seed)
    means, boots = [], []
    for values in groups:
        if values.size == 0:
            continue
        means.append(values.mean())
        if samples:
            boots.append(values[rng.integers(0, values.size, size=(samples, values.size))].mean(axis=1))
    if not means:
        return {"value": None, "ci": None, "groups": 0}
    ci = None
    if samples:
        avg = np.mean(boots, axis=0)
        ci = [float(np.percentile(avg, 2.5)), float(np.percentile(avg, 97.5))]
    return {"value": float(np.mean(means)), "ci": ci, "groups": len(means)}


def _f1_parts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    return precision, recall, f1


def mode_scores(records: Sequence[Record], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """Macro-F1 over gold modes, per-mode precision/recall/F1, and the confusion matrix."""
    scored = [r for r in records if mode_applies(r)]
    if not scored:
        return {"macro_f1": {"value": None, "ci": None, "n": 0}, "per_mode": {}, "confusion": {"gold": [], "predicted": [], "matrix": []}}
    gold = [str(normalize_mode(r["gold"]["mode"])) for r in scored]  # mode_applies: every gold mode is set
    pred = [normalize_mode(r["predicted"].get("mode")) if is_ok(r) else None for r in scored]
    gold_labels = sorted(set(gold))
    labels = sorted(set(gold) | {p for p in pred if p is not None})
    g = np.array([[x == label for label in labels] for x in gold], dtype=np.float64)
    p = np.array([[x == label for label in labels] for x in pred], dtype=np.float64)
    in_gold = np.array([label in gold_labels for label in labels])

    tp, fp, fn = (g * p).sum(0), ((1 - g) * p).sum(0), (g * (1 - p)).sum(0)
    precision, recall, f1 = _f1_parts(tp, fp, fn)
    macro = float(f1[in_gold].mean())
    boot = []
    for w in _weights(len(scored), samples, seed) if samples else []:
        btp, bfp, bfn = w @ (g * p), w @ ((1 - g) * p), w @ (g * (1 - p))
        _, _, bf1 = _f1_parts(btp, bfp, bfn)
        present = (w @ g) > 0  # the gold modes this resample contains
        with np.errstate(invalid="ignore"):
            boot.append(np.where(present.any(1), (bf1 * present).sum(1) / present.sum(1), np.nan))
    per_mode = {
        label: {"precision": float(precision[i]), "recall": float(recall[i]), "f1": float(f1[i]),
                "support": int(g[:, i].sum()), "predicted": int(p[:, i].sum())}
        for i, label in enumerate(labels)
    }
    columns = labels + ([NO_MODE] if any(x is None for x in pred) else [])
    counts = Counter(zip(gold, [x if x is not None else NO_MODE for x in pred]))
    matrix = [[counts[(row, col)] for col in columns] for row in gold_labels]
    return {
        "macro_f1": {"value": macro, "ci": _ci(np.concatenate(boot)) if boot else None, "n": len(scored)},
        "per_mode": per_mode,
        "confusion": {"gold": gold_labels, "predicted": columns, "matrix": matrix},
    }


def cost_summary(records: Sequence[Record]) -> dict:
    total = {f: 0.0 for f in COST_FIELDS}
    for r in records:
        for f in COST_FIELDS:
            total[f] += float((r.get("cost") or {}).get(f) or 0)
    n = max(len(records), 1)
    for f in ("calls", "input_tokens", "output_tokens", "reruns"):
        total[f] = int(total[f])
    return {"total": total, "per_trace": {f: total[f] / n for f in COST_FIELDS}}


def compute_metrics(records: Sequence[Record], ks: Sequence[int] = DEFAULT_KS,
                    samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """Every headline metric with its 95% bootstrap CI, status counts and cost."""
    records = list(records)
    n = len(records)
    status = Counter(r.get("status", "error") for r in records)
    result: dict[str, Any] = {"n": n, "status": {s: status.get(s, 0) for s in ("ok", "unparsed", "error")}}
    if n == 0:
        empty = {"value": None, "ci": None, "n": 0}
        result.update(agent_accuracy=empty, step_accuracy=empty, step_within={str(k): empty for k in ks},
                      mode_macro_f1=empty, joint_accuracy=empty, per_mode={}, confusion={"gold": [], "predicted": [], "matrix": []},
                      cost=cost_summary([]))
        return result
    ok = np.array([is_ok(r) for r in records])
    every = np.ones(n, dtype=bool)
    agent_app = np.array([agent_applies(r) for r in records])
    mode_app = np.array([mode_applies(r) for r in records])
    agent_hit = ok & np.array([agent_correct(r["predicted"], r["gold"]) for r in records])
    step_hit = ok & np.array([step_correct(r["predicted"], r["gold"]) for r in records])
    mode_hit = ok & np.array([normalize_mode(r["predicted"].get("mode")) == normalize_mode(r["gold"].get("mode")) for r in records])
    joint = step_hit & (agent_hit | ~agent_app) & (mode_hit | ~mode_app)

    modes = mode_scores(records, samples, seed)
    pairs = {"agent_accuracy": (agent_hit, agent_app), "step_accuracy": (step_hit, every), "joint_accuracy": (joint, every)}
    for k in ks:
        pairs[f"within_{k}"] = (ok & np.array([step_within(r["predicted"], r["gold"], k) for r in records]), every)
    rates = _rates(pairs, samples, seed)
    result.update(
        agent_accuracy=rates["agent_accuracy"],
        step_accuracy=rates["step_accuracy"],
        step_within={str(k): rates[f"within_{k}"] for k in ks},
        mode_macro_f1=modes["macro_f1"],
        joint_accuracy=rates["joint_accuracy"],
        per_mode=modes["per_mode"],
        confusion=modes["confusion"],
        cost=cost_summary(records),
    )
    return result


def group_key(record: Record, by: str) -> str:
    meta = record.get("meta") or {}
    if by == "length":
        return length_bucket(meta.get("n_steps"))
    if by == "confidence":
        return confidence_bucket((record.get("predicted") or {}).get("confidence"))
    value = meta.get(by)
    return str(value) if value not in (None, "") else "unknown"


# Bucketed breakdowns list their groups in bucket order, not alphabetically.
_BUCKET_ORDER = {"length": [length_bucket(low) for low, _ in LENGTH_BUCKETS] + ["unknown"],
                 "confidence": [confidence_bucket(low) for low, _ in CONFIDENCE_BUCKETS] + ["none"]}


def breakdown(records: Sequence[Record], by: str, **options: Any) -> dict[str, dict]:
    """`compute_metrics` per value of one trace attribute (subset, modality, ..., length)."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[group_key(r, by)].append(r)
    order = _BUCKET_ORDER.get(by)
    keys = sorted(groups, key=lambda k: order.index(k) if k in order else len(order)) if order else sorted(groups)
    return {k: compute_metrics(groups[k], **options) for k in keys}


def gives_confidence(report: dict) -> bool:
    """Whether a `full_report`'s method stated a confidence on any verdict (the baselines do not)."""
    return any(group != "none" for group in report["by"]["confidence"])


def full_report(records: Sequence[Record], **options: Any) -> dict:
    """Headline metrics plus every breakdown."""
    return {"overall": compute_metrics(records, **options),
            "by": {by: breakdown(records, by, **options) for by in BREAKDOWNS}}
