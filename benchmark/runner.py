"""The evaluation runner: one attributor over one dataset, resumable, with baselines.

`run_benchmark` attributes every trace of a dataset with concurrency, appends
one line per finished trace to `OUT/predictions.jsonl` (flushed at once, so an
interrupted run loses at most the traces in flight), and on `resume=True`
skips every trace already on file, so no trace is paid for twice. Then it
scores the trivial baselines (every registered `baseline:*` attributor, and
`baseline:most-common-step`, which needs the whole dataset) on the same
traces, into `OUT/baselines/NAME/predictions.jsonl`.

One prediction line:

    {"trace_id", "dataset", "method", "model",
     "predicted": {"agent", "step", "native_step", "mode", "reason", "confidence"},
     "gold": {"agent", "step", "native_step", "mode"},
     "status": "ok" | "unparsed" | "error", "error",
     "cost": {"calls", "input_tokens", "output_tokens", "usd", "seconds"},
     "backend", "meta": {"subset", "modality", "framework", "benchmark", "n_steps", "multi_agent"}}

The attributor sees the trace through `middleware.model.answer_key.attributor_view`:
without its gold label or any answer-revealing record, and without the task's
reference answer unless `with_reference=True`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from faultlens.middleware.model.answer_key import attributor_view
from faultlens.attributors import build, get, names
from faultlens.attributors.llm import BudgetExceeded
from faultlens.middleware.errors import FaultlensError, InputError
from faultlens.middleware.model.trace import Attribution, AttributionStatus, Trace

from .datasets import load_dataset
from .metrics import step_correct

PREDICTIONS = "predictions.jsonl"
RUN_INFO = "run.json"
BASELINES_DIR = "baselines"
BASELINE_PREFIX = "baseline:"


class RunInterrupted(FaultlensError):
    """The method raised KeyboardInterrupt. `arun_benchmark` raises this after the traces
    in flight were written (an ordinary exception, so it leaves the event loop cleanly);
    `run_benchmark` turns it back into KeyboardInterrupt."""


@dataclass
class RunSummary:
    out: Path
    dataset: str
    method: str
    model: str | None
    total: int  # traces selected from the dataset
    done: int  # predictions on file for them after this run
    new: int  # traces attributed by this run
    skipped: int  # already on file before this run (resume)
    spent_usd: float  # spent by this run
    stopped: str | None = None  # why the run stopped before the end ("budget"), else None
    baselines: dict[str, int] = field(default_factory=dict)  # baseline name -> predictions on file
    unlabelled: int = 0  # traces left out for want of a gold label (labelled_only)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["out"] = str(self.out)
        return d


def safe_name(name: str) -> str:
    """A file-system-safe version of a method or dataset name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "run"


def default_out(dataset: str, method: str, model: str | None) -> Path:
    parts = [dataset, method] + ([model] if model else [])
    return Path(".faultlens") / "bench" / "__".join(safe_name(p) for p in parts)


# -- prediction records -------------------------------------------------------


def trace_meta(trace: Trace) -> dict[str, Any]:
    return {
        "subset": trace.source.subset,
        "modality": trace.source.modality,
        "framework": trace.source.framework,
        "benchmark": trace.source.benchmark,
        "n_steps": len(trace.steps),
        "multi_agent": trace.multi_agent,
    }


def native_step(trace: Trace, step: int | None) -> str | None:
    """The id a step is scored by: its native id, else its index as text; None outside the trace.

    Gold and prediction both go through here, so they are always in one namespace: TRAIL's gold names
    a span id (`gold.native_step`) while its steps carry no native id, and comparing the two scored
    every right step as wrong.
    """
    if step is None or not 0 <= step < len(trace.steps):
        return None
    native = trace.steps[step].native_id
    return native if native is not None else str(step)


def gold_of(trace: Trace) -> dict[str, Any]:
    gold = trace.gold
    assert gold is not None
    native = native_step(trace, gold.step)
    if native is None:
        native = gold.native_step  # a gold step outside the trace: only its native id can match
    return {"agent": gold.agent, "step": gold.step, "native_step": native, "mode": gold.mode}


def prediction_record(trace: Trace, attribution: Attribution, dataset: str, method: str,
                      model: str | None, seconds: float) -> dict[str, Any]:
    """The predictions.jsonl line for one attributed trace."""
    step = attribution.step
    native = native_step(trace, step)
    cost = attribution.cost.model_dump()
    if not cost["seconds"]:
        cost["seconds"] = seconds  # the method did not time itself: use the runner's wall clock
    status = attribution.status.value if isinstance(attribution.status, AttributionStatus) else str(attribution.status)
    return {
        "trace_id": trace.id,
        "dataset": dataset,
        "method": method,
        "model": attribution.model or model,
        "predicted": {"agent": attribution.agent, "step": step, "native_step": native, "mode": attribution.mode,
                      "reason": attribution.reason, "confidence": attribution.confidence},
        "gold": gold_of(trace),
        "status": status,
        "error": attribution.error,
        "cost": cost,
        "backend": attribution.backend,
        "meta": trace_meta(trace),
    }


_REQUIRED = ("trace_id", "predicted", "gold", "status")


def _complete_record(raw: bytes) -> dict[str, Any] | None:
    """The record on a last line that lost its newline, if the line is whole; None if the write was cut off."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and all(key in record for key in _REQUIRED) else None


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """Prediction records of one file.

    Only a last line without its newline may be bad (a killed run cut it, maybe
    inside a multi-byte character): it is ignored if it is not a whole record,
    and counted if it is. Any other bad line is an InputError naming it.
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    last_is_cut = not data.endswith(b"\n")
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if last_is_cut and number == len(lines):
            record = _complete_record(raw)
            if record is not None:
                records.append(record)
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(str(path), f"line {number}", None, f"not UTF-8 (byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"line {number}", None, f"not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(str(path), f"line {number}", None, f"expected a JSON object, got {type(record).__name__}")
        for key in _REQUIRED:
            if key not in record:
                raise InputError(str(path), f"line {number}", key, "missing")
        records.append(record)
    return records


def _repair_tail(path: Path) -> None:
    """Make the file end at a line boundary before appending.

    A last line that lost only its newline is a whole prediction and keeps its
    place (read_predictions counted it as done); one cut mid-record is dropped.
    """
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    if _complete_record(data[start:]) is not None:
        with open(path, "ab") as handle:
            handle.write(b"\n")
    else:
        path.write_bytes(data[:start])


class _Appender:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        _repair_tail(path)
        self.handle = open(path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


# -- the run ------------------------------------------------------------------


def prepare(trace: Trace, with_reference: bool) -> Trace:
    """What the attributor is allowed to see: no gold label, no answer key (see
    `middleware.model.answer_key`), and no reference answer unless `with_reference`."""
    return attributor_view(trace, with_reference=with_reference)


def _is_budget_error(exc: BaseException) -> bool:
    return isinstance(exc, BudgetExceeded)


def _client_budget_spent(attributor: Any) -> bool:
    """Whether the attributor's LLM client (if it has one) has used up its budget."""
    client = getattr(attributor, "client", None)
    cost = getattr(client, "cost", None)
    if cost is None:
        return False
    budget, max_calls = getattr(client, "budget_usd", None), getattr(client, "max_calls", None)
    return (budget is not None and cost.usd >= budget) or (max_calls is not None and cost.calls >= max_calls)


def select_traces(dataset: str, limit: int | None, media_root: str | Path | None = None,
                  labelled_only: bool = False) -> tuple[list[Trace], int]:
    """The traces to score, and how many unlabelled ones `labelled_only` left out (a store of your runs, some
    labelled); without it an unlabelled trace is an error."""
    traces = load_dataset(dataset, media_root=media_root).traces(None if labelled_only else limit)
    unlabelled = 0
    if labelled_only:
        unlabelled = sum(t.gold is None for t in traces)
        traces = [t for t in traces if t.gold is not None][:limit]
        if not traces:
            raise InputError(dataset, None, "gold", "no trace carries a gold label (label runs with `faultlens traces label`)")
    seen: set[str] = set()
    for trace in traces:
        if trace.gold is None:
            raise InputError(dataset, trace.id, "gold", "a benchmark trace needs a gold label (--labelled-only scores only the labelled ones)")
        if trace.id in seen:
            raise InputError(dataset, trace.id, "id", "two traces share this id; resuming needs unique ids")
        seen.add(trace.id)
    return traces, unlabelled


def _check_run_info(out: Path, info: dict[str, Any], resume: bool) -> None:
    path = out / RUN_INFO
    predictions = out / PREDICTIONS
    if predictions.exists() and predictions.stat().st_size and not resume:
        raise FaultlensError(f"{out} already holds predictions; pass --resume to continue that run, or choose another --out")
    if resume and path.exists():
        before = json.loads(path.read_text(encoding="utf-8"))
        for key in ("dataset", "method", "model", "with_reference", "options"):
            if before.get(key, {} if key == "options" else None) != info[key]:
                raise FaultlensError(f"cannot resume {out}: it was run with {key}={before.get(key)!r}, not {info[key]!r}")


def _write_info(out: Path, info: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / RUN_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def baseline_names() -> list[str]:
    """Every registered trivial baseline (`baseline:*`)."""
    return [n for n in names() if n.startswith(BASELINE_PREFIX)]


@dataclass
class RunOptions:
    """How `run_benchmark` runs a method over a dataset.

    - `model`: the litellm model, for methods that call one (`attributors.build`).
    - `with_reference`: show the method the task's reference answer (never the gold label).
    - `concurrency`: traces attributed at once (asyncio tasks over `aattribute`).
    - `limit`: only the first N traces of the dataset.
    - `out`: the run folder (default `.faultlens/bench/DATASET__METHOD[__MODEL]`).
    - `resume`: continue a run in `out`, skipping traces already predicted.
      Without it, a folder that already holds predictions is an error.
    - `budget_usd`: the spending cap of this invocation. It is passed to the
      method (LLM methods check it before every call); a trace the method could
      not finish within it is left unwritten, for `resume`. The runner also stops
      starting new traces once the recorded spend reaches it.
    - `baselines`: names of baseline attributors (default: every `baseline:*`),
      or a mapping name -> attributor.
    - `attributor`: an attributor object to use instead of building `method`.
    - `progress`, `console`: the progress bar, and where it is drawn.
    - `method_options`: more keyword options for the method (e.g. `{"k": 5}` for counterfactual).
    - `media_root`: a folder media paths are also resolved against (whowhenpro: specs).
    - `labelled_only`: score only the traces with a gold label, leaving the others out (a store of your own runs).
    """

    model: str | None = None
    with_reference: bool = False
    concurrency: int = 4
    limit: int | None = None
    out: str | Path | None = None
    resume: bool = False
    budget_usd: float | None = None
    baselines: Sequence[str] | Mapping[str, Any] | None = None
    attributor: Any = None
    progress: bool = True
    console: Console | None = None
    method_options: Mapping[str, Any] | None = None
    media_root: str | Path | None = None
    labelled_only: bool = False


def _method_attributor(method: str, traces: list[Trace], opts: RunOptions) -> Any:
    if opts.attributor is not None:
        return opts.attributor
    if method == MOST_COMMON_STEP:
        return MostCommonStep(traces)  # a dataset-level baseline: it is built from the traces it is scored on
    # budget_usd: LLM methods enforce it before each call.
    return build(method, opts.model, with_reference=opts.with_reference or None, budget_usd=opts.budget_usd,
                 **dict(opts.method_options or {}))


async def arun_benchmark(dataset_spec: str, method: str, options: RunOptions | None = None, /, **fields: Any) -> RunSummary:
    """See `run_benchmark`."""
    opts = replace(options or RunOptions(), **fields)
    model, with_reference, budget_usd = opts.model, opts.with_reference, opts.budget_usd
    if opts.concurrency < 1:
        raise FaultlensError("concurrency must be at least 1")
    out = Path(opts.out) if opts.out is not None else default_out(dataset_spec, method, model)
    info = {"dataset": dataset_spec, "method": method, "model": model, "with_reference": with_reference,
            "options": dict(opts.method_options or {}), "limit": opts.limit,
            "media_root": str(opts.media_root) if opts.media_root is not None else None,
            "labelled_only": opts.labelled_only, "budget_usd": budget_usd, "started_at": time.time(), "status": "running"}
    _check_run_info(out, info, opts.resume)
    traces, unlabelled = select_traces(dataset_spec, opts.limit, opts.media_root, opts.labelled_only)
    attributor = _method_attributor(method, traces, opts)
    baseline_map = _resolve_baselines(opts.baselines, method)
    _write_info(out, info)

    pred_path = out / PREDICTIONS
    done_ids = {r["trace_id"] for r in read_predictions(pred_path)}
    todo = [t for t in traces if t.id not in done_ids]
    skipped = len(traces) - len(todo)
    state: dict[str, Any] = {"spent": 0.0, "hits": 0, "scored": 0, "stopped": None}
    writer = _Appender(pred_path)
    queue: asyncio.Queue[Trace] = asyncio.Queue()
    for trace in todo:
        queue.put_nowait(trace)

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("step acc {task.fields[acc]} · ${task.fields[usd]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                   console=opts.console, disable=not opts.progress, transient=False)

    async def worker(task_id: Any) -> None:
        while not queue.empty() and state["stopped"] is None:
            if budget_usd is not None and state["spent"] >= budget_usd:
                state["stopped"] = "budget"
                return
            trace = queue.get_nowait()
            started = time.perf_counter()
            try:
                attribution = await attributor.aattribute(prepare(trace, with_reference))
            except KeyboardInterrupt:
                # Ctrl-C inside a method: let the other traces in flight finish and be written
                # (they are paid for), then stop; run_benchmark re-raises it.
                state["stopped"] = "interrupted"
                return
            except Exception as exc:  # noqa: BLE001 - a failed trace is scored as an error, not a crashed run
                if _is_budget_error(exc):
                    state["stopped"] = "budget"
                    return
                attribution = Attribution(trace_id=trace.id, method=method, model=model,
                                          status=AttributionStatus.error, error=f"{type(exc).__name__}: {exc}")
            if attribution.status == AttributionStatus.error and _client_budget_spent(attributor):
                # The method's LLM client refused a call: this trace is unfinished, not wrong.
                state["stopped"] = "budget"
                return
            record = prediction_record(trace, attribution, dataset_spec, method, model, time.perf_counter() - started)
            writer.write(record)
            state["spent"] += record["cost"]["usd"]
            state["scored"] += 1
            state["hits"] += record["status"] == "ok" and step_correct(record["predicted"], record["gold"])
            bar.update(task_id, advance=1, acc=f"{state['hits'] / state['scored']:.3f}", usd=f"{state['spent']:.4f}")

    try:
        with bar:
            task_id = bar.add_task(f"{method} on {dataset_spec}", total=len(traces), completed=skipped, acc="-", usd="0.0000")
            await asyncio.gather(*(worker(task_id) for _ in range(min(opts.concurrency, max(len(todo), 1)))))
    finally:
        writer.close()

    if state["stopped"] == "interrupted":
        info.update(status="interrupted", finished_at=time.time())
        _write_info(out, info)
        raise RunInterrupted(f"interrupted; continue with resume=True in {out}")
    final = {r["trace_id"] for r in read_predictions(pred_path)}
    scored_traces = [t for t in traces if t.id in final]
    baseline_counts = {}
    for name, att in baseline_map.items():
        if att is None:
            # Its answer depends on every scored trace, so it is redone whenever that set grows.
            att = MostCommonStep(scored_traces)
            (baseline_dir(out, name) / PREDICTIONS).unlink(missing_ok=True)
        baseline_counts[name] = _run_baseline(out, name, att, scored_traces, dataset_spec, with_reference)
    info.update(status="stopped: budget" if state["stopped"] else "complete", finished_at=time.time())
    _write_info(out, info)
    return RunSummary(out=out, dataset=dataset_spec, method=method, model=model, total=len(traces),
                      done=len(final & {t.id for t in traces}), new=state["scored"], skipped=skipped,
                      spent_usd=state["spent"], stopped=state["stopped"], baselines=baseline_counts, unlabelled=unlabelled)


MOST_COMMON_STEP = "baseline:most-common-step"


class MostCommonStep:
    """The dataset-level baseline of DESIGN.md: blame the step index that is most
    often the gold step among the scored traces (ties: the smallest), clipped to
    the trace's last step. It reads the gold labels of the whole set, as "most
    common step" baselines in the literature do: a floor, not a method."""

    name = MOST_COMMON_STEP

    def __init__(self, traces: Sequence[Trace]):
        counts = Counter(t.gold.step for t in traces if t.gold is not None)
        top = max(counts.values(), default=0)
        self.step = min((s for s, c in counts.items() if c == top), default=0)

    def attribute(self, trace: Trace) -> Attribution:
        step = min(self.step, len(trace.steps) - 1)
        return Attribution(trace_id=trace.id, method=self.name, agent=trace.steps[step].agent, step=step,
                           backend="dataset prior", details={"most_common_gold_step": self.step})

    async def aattribute(self, trace: Trace) -> Attribution:
        return self.attribute(trace)


def _resolve_baselines(baselines: Sequence[str] | Mapping[str, Any] | None, method: str) -> dict[str, Any]:
    """Baseline name -> attributor; None stands for `MostCommonStep`, built once the scored traces are known."""
    if isinstance(baselines, Mapping):
        return dict(baselines)
    chosen = baseline_names() + [MOST_COMMON_STEP] if baselines is None else list(baselines)
    return {name: None if name == MOST_COMMON_STEP else get(name) for name in chosen if name != method}


def baseline_dir(out: Path, name: str) -> Path:
    return out / BASELINES_DIR / safe_name(name.removeprefix(BASELINE_PREFIX))


def _run_baseline(out: Path, name: str, attributor: Any, traces: list[Trace], dataset: str, with_reference: bool) -> int:
    """Score one baseline on `traces` (resumable like the main run); returns predictions on file."""
    path = baseline_dir(out, name) / PREDICTIONS
    done = {r["trace_id"] for r in read_predictions(path)}
    writer = _Appender(path)
    try:
        for trace in traces:
            if trace.id in done:
                continue
            started = time.perf_counter()
            try:
                attribution = attributor.attribute(prepare(trace, with_reference))
            except Exception as exc:  # noqa: BLE001
                attribution = Attribution(trace_id=trace.id, method=name, status=AttributionStatus.error,
                                          error=f"{type(exc).__name__}: {exc}")
            writer.write(prediction_record(trace, attribution, dataset, name, None, time.perf_counter() - started))
            done.add(trace.id)
    finally:
        writer.close()
    return len(done)


def run_benchmark(dataset_spec: str, method: str, options: RunOptions | None = None, /, **fields: Any) -> RunSummary:
    """Attribute every trace of `dataset_spec` with `method` and score the baselines on the same traces.

    `options` (a `RunOptions`), or its fields as keywords (`out=..., resume=True`),
    say how; a keyword overrides the same field of `options`. `method` may also be
    `baseline:most-common-step`, the dataset-level baseline.
    """
    try:
        return asyncio.run(arun_benchmark(dataset_spec, method, options, **fields))
    except RunInterrupted:
        raise KeyboardInterrupt from None
