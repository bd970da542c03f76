"""TRAIL (Patronus AI, 2025) importer: smolagents runs as OpenInference span trees, with error annotations.

    trail:DIR               every run under DIR (GAIA/ and SWE/), labels from the
                            processed_annotations_* folders next to them
    trail:DIR:train         a fixed half of the runs (by a hash of the trace id,
                            runs of one task together) ...
    trail:DIR:holdout       ... and the other half (see `realdev_split`)

A run file (`.json` or `.json.gz`) is `{trace_id, spans: [{span_id,
parent_span_id, span_name, span_kind, timestamp, duration, status_code,
status_message, span_attributes, resource_attributes, events, child_spans}]}`.
It is converted span by span to an OTLP ExportTraceServiceRequest and mapped
to steps by the same OpenInference mapping `faultlens traces import` uses
(`middleware.otlp.convert` and `middleware.spans`): LLM spans are decisions, TOOL spans
tool results (evidence about the LLM call whose code or tool call ran them).

Labels: `processed_annotations_gaia/<trace_id>.json(.gz)` (and
`processed_annotations_swe_bench/`) hold `{errors: [{category, location,
evidence, description, impact}]}`; `location` is a span id of the run.

**Gold rule.** TRAIL marks every error, not one decisive step. The gold step
is the step of the earliest HIGH-impact error span in execution order (step
order); if no error is HIGH, the earliest MEDIUM one; else the earliest error.
`gold.mode` stays empty (TRAIL's categories are not our taxonomy); the
category (case and whitespace normalised) and description go into
`gold.reason`. Every annotated error step is kept in
`trace.metadata["trail"]["error_steps"]`, so a prediction can also be scored as
"hits any annotated error span". TRAIL labels no agent: `gold.agent` is None.

Runs whose annotation lists no error are not failures by TRAIL's labels and
are not yielded (the count is in the data card's numbers: 4 of the 139 here).
An annotation whose `location` is not a span of its run (one says "Span ID
not found for this shard") cannot be placed; it is kept in
`metadata["trail"]["unlocated_errors"]` and takes no part in the gold. A run
file with no annotation file, or any field of an unexpected shape, is an
InputError naming the file, the record and the field.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from faultlens.middleware.errors import InputError, from_validation_error
from faultlens.middleware.model.trace import GoldLabel, Outcome, Source, Task, Trace
from faultlens.middleware.otlp.convert import otlp_json_to_records
from faultlens.middleware.spans.traces import traces_from_records

FORMAT = "trail"
SUBSETS = {"GAIA": "processed_annotations_gaia", "SWE": "processed_annotations_swe_bench"}
IMPACTS = ("HIGH", "MEDIUM", "LOW")
SPLITS = ("train", "holdout")
_STATUS = {"unset": 0, "ok": 1, "error": 2}
_KIND = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5, "unspecified": 0}
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


# -- files -------------------------------------------------------------------
def read_json_file(path: Path) -> Any:
    """A `.json` or `.json.gz` file's JSON; errors name the file."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        return json.loads(raw.decode("utf-8"))
    except (OSError, EOFError) as exc:
        raise InputError(str(path), None, None, f"cannot read ({exc})") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), None, None, f"not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise InputError(str(path), None, None, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def json_files(folder: Path) -> list[Path]:
    """`*.json` and `*.json.gz` files of one folder, sorted; a name present in both forms counts once (the plain one)."""
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".json.gz"):
            found.setdefault(path.name[: -len(".json.gz")], path)
        elif path.name.endswith(".json"):
            found[path.name[: -len(".json")]] = path
    return [found[k] for k in sorted(found)]


def split_spec_arg(arg: str, spec: str) -> tuple[Path, str | None]:
    """`DIR` or `DIR:train` / `DIR:holdout` (the split only when DIR itself does not exist with the suffix)."""
    root = Path(arg)
    head, sep, tail = arg.rpartition(":")
    if sep and tail in SPLITS and not root.exists():
        return Path(head), tail
    if not root.exists():
        raise InputError(spec, None, None, "no such directory")
    return root, None


def realdev_split(trace_id: str) -> str:
    """"train" or "holdout": a fixed half of a real dataset, by the SHA-256 of the trace id (no label is read).

    Runs of one scenario go together (`realdev_sides`); this is the side of a scenario's first run.
    """
    return "train" if hashlib.sha256(trace_id.encode()).digest()[0] % 2 == 0 else "holdout"


def realdev_sides(scenarios: dict[str, str]) -> dict[str, str]:
    """Trace id -> "train" or "holdout", given each run's scenario key: a run takes the side of its
    scenario's first run (smallest trace id), so runs of one problem never sit on both sides.

    Runs of one problem fail alike: split by run, tau-bench tasks 2 and 4 (train) and 3 (holdout), one
    user asking one question, were all blamed on the same message, and the holdout half scored a run the
    model had in effect seen. A run alone in its scenario keeps its `realdev_split` side.
    """
    first: dict[str, str] = {}
    for trace_id in sorted(scenarios):
        first.setdefault(scenarios[trace_id], trace_id)
    return {trace_id: realdev_split(first[key]) for trace_id, key in scenarios.items()}


def scenario_id(key: str) -> str:
    """A short id of a scenario key, kept in `trace.metadata["scenario"]` (cross-validation folds by it)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def trail_scenario(data: Any) -> str:
    """A TRAIL run's scenario key: its task text, whitespace and case normalised (three tasks were run twice).

    A run too malformed to read a task from keys on its trace id; parsing it then names the bad field.
    """
    try:
        task = _task_of(data)
    except (AttributeError, KeyError, TypeError):
        task = ""
    return " ".join(task.split()).lower() or str(data.get("trace_id"))


# -- span tree → OTLP ----------------------------------------------------------
def _iso_ns(value: Any, where: str, field: str, source: str) -> int:
    if not isinstance(value, str):
        raise InputError(source, where, field, f"expected an ISO 8601 time string, got {type(value).__name__}")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(source, where, field, f"{value!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)  # TRAIL's event times carry no zone; its span times are UTC
    whole = int(when.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + when.microsecond * 1000


def _duration_ns(value: Any, where: str, source: str) -> int:
    m = _DURATION.match(value) if isinstance(value, str) else None
    if m is None:
        raise InputError(source, where, "duration", f"{value!r} is not an ISO 8601 duration such as PT1M2.5S")
    days, hours, minutes, seconds = m.groups()
    total = (Decimal(days or 0) * 86400 + Decimal(hours or 0) * 3600 + Decimal(minutes or 0) * 60 + Decimal(seconds or 0))
    return int(total * 1_000_000_000)


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": json.dumps(value, ensure_ascii=False, default=str)}


def _attrs(values: Any, where: str | None, field: str, source: str) -> list[dict[str, Any]]:
    if values is None:
        return []
    if not isinstance(values, dict):
        raise InputError(source, where, field, f"expected an object of attributes, got {type(values).__name__}")
    return [{"key": str(k), "value": _any(v)} for k, v in values.items() if v is not None]


def _otlp_span(span: dict, trace_id: str, where: str, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One TRAIL span as an OTLP/JSON span, and its resource attributes."""
    for key in ("span_id", "span_name", "timestamp", "duration"):
        if key not in span:
            raise InputError(source, where, key, "missing")
    if not isinstance(span["span_id"], str) or not span["span_id"]:
        raise InputError(source, where, "span_id", "must be a non-empty string")
    start = _iso_ns(span["timestamp"], where, "timestamp", source)
    code = str(span.get("status_code") or "Unset").lower()
    if code not in _STATUS:
        raise InputError(source, where, "status_code", f"unknown status {span.get('status_code')!r}; expected Unset, Ok or Error")
    status: dict[str, Any] = {"code": _STATUS[code]}
    if span.get("status_message"):
        status["message"] = str(span["status_message"])
    events = []
    if not isinstance(span.get("events") or [], list):
        raise InputError(source, where, "events", "must be a list")
    for i, event in enumerate(span.get("events") or []):
        if not isinstance(event, dict):
            raise InputError(source, where, f"events[{i}]", "must be an object")
        events.append({"name": str(event.get("Name", event.get("name", ""))),
                       "timeUnixNano": str(_iso_ns(event.get("Timestamp", event.get("timestamp")), where, f"events[{i}].Timestamp", source)),
                       "attributes": _attrs(event.get("Attributes", event.get("attributes")), where, f"events[{i}].Attributes", source)})
    otlp = {
        "traceId": trace_id,
        "spanId": span["span_id"],
        "parentSpanId": span.get("parent_span_id") or "",
        "name": str(span["span_name"]),
        "kind": _KIND.get(str(span.get("span_kind") or "internal").lower(), 1),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + _duration_ns(span["duration"], where, source)),
        "attributes": _attrs(span.get("span_attributes"), where, "span_attributes", source),
        "status": status,
        "events": events,
    }
    resource = span.get("resource_attributes") or {}
    if not isinstance(resource, dict):
        raise InputError(source, where, "resource_attributes", "must be an object")
    return otlp, resource


def to_otlp(data: Any, source: str) -> dict[str, Any]:
    """A TRAIL run (span tree) as an OTLP ExportTraceServiceRequest (JSON), spans grouped by resource."""
    if not isinstance(data, dict):
        raise InputError(source, None, None, f"expected a JSON object, got {type(data).__name__}")
    trace_id = data.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InputError(source, None, "trace_id", "missing or not a string")
    roots = data.get("spans")
    if not isinstance(roots, list) or not roots:
        raise InputError(source, None, "spans", "missing, empty or not a list")
    by_resource: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    stack = [(span, f"spans[{i}]") for i, span in reversed(list(enumerate(roots)))]
    while stack:
        span, where = stack.pop()
        if not isinstance(span, dict):
            raise InputError(source, where, None, f"expected a span object, got {type(span).__name__}")
        otlp, resource = _otlp_span(span, trace_id, f"{where} (span {span.get('span_id')})", source)
        key = json.dumps(resource, sort_keys=True, default=str)
        by_resource.setdefault(key, (resource, []))[1].append(otlp)
        children = span.get("child_spans") or []
        if not isinstance(children, list):
            raise InputError(source, where, "child_spans", "must be a list")
        stack.extend((c, f"{where}.child_spans[{j}]") for j, c in reversed(list(enumerate(children))))
    return {"resourceSpans": [{"resource": {"attributes": _attrs(resource, None, "resource_attributes", source)},
                               "scopeSpans": [{"scope": {"name": "trail"}, "spans": spans}]}
                              for resource, spans in by_resource.values()]}


def _task_of(data: dict) -> str:
    """The question: the `task` of the first (outermost) AGENT span's input, which smolagents writes as JSON;
    in runs recorded without an AGENT span (TRAIL's SWE runs), the first user message of the first LLM call."""
    return _agent_task(data) or _first_user_message(data)


def _first_user_message(data: dict) -> str:
    stack = list(reversed(data["spans"]))
    while stack:
        span = stack.pop()
        attrs = span.get("span_attributes") or {}
        if str(attrs.get("openinference.span.kind", "")).upper() == "LLM":
            numbers = sorted({int(m.group(1)) for k in attrs if (m := re.match(r"llm\.input_messages\.(\d+)\.message\.role$", k))})
            for n in numbers:
                if attrs.get(f"llm.input_messages.{n}.message.role") == "user":
                    return str(attrs.get(f"llm.input_messages.{n}.message.content") or "")
            return ""
        stack.extend(reversed(span.get("child_spans") or []))
    return ""


def _agent_task(data: dict) -> str:
    stack = list(reversed(data["spans"]))
    while stack:
        span = stack.pop()
        attrs = span.get("span_attributes") or {}
        if str(attrs.get("openinference.span.kind", "")).upper() == "AGENT" and attrs.get("input.value"):
            value = attrs["input.value"]
            try:
                parsed = json.loads(value)
            except (TypeError, json.JSONDecodeError):
                return str(value)
            return str(parsed.get("task", value)) if isinstance(parsed, dict) else str(value)
        stack.extend(reversed(span.get("child_spans") or []))
    return ""


# -- labels --------------------------------------------------------------------
def _norm_category(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip().lower()


def _errors(annotation: Any, source: str) -> list[dict[str, Any]]:
    if not isinstance(annotation, dict):
        raise InputError(source, None, None, f"expected a JSON object, got {type(annotation).__name__}")
    errors = annotation.get("errors")
    if not isinstance(errors, list):
        raise InputError(source, None, "errors", "missing or not a list")
    out = []
    for i, error in enumerate(errors):
        where = f"errors[{i}]"
        if not isinstance(error, dict):
            raise InputError(source, where, None, "must be an object")
        for key in ("location", "impact", "category"):
            if not isinstance(error.get(key), str):
                raise InputError(source, where, key, "missing or not a string")
        impact = error["impact"].strip().upper()
        if impact not in IMPACTS:
            raise InputError(source, where, "impact", f"{error['impact']!r} is not one of {', '.join(IMPACTS)}")
        out.append({"location": error["location"].strip(), "impact": impact, "category": _norm_category(error["category"]),
                    "description": str(error.get("description") or "")})
    return out


def gold_of(trace: Trace, errors: list[dict[str, Any]]) -> tuple[GoldLabel | None, dict[str, Any]]:
    """The gold label by the rule in the module docstring, and the per-error placement kept in metadata."""
    step_of_span = {s.span_id: s.index for s in trace.steps if s.span_id}
    placed: list[dict[str, Any]] = []
    unlocated: list[dict[str, Any]] = []
    for error in errors:
        step = step_of_span.get(error["location"])
        (placed if step is not None else unlocated).append({**error, "step": step})
    info = {"error_steps": sorted({e["step"] for e in placed}), "errors": placed, "unlocated_errors": unlocated}
    for impact in IMPACTS:
        chosen = [e for e in placed if e["impact"] == impact]
        if chosen:
            first = min(chosen, key=lambda e: e["step"])
            reason = f"{first['category']}: {first['description']}".strip()
            return GoldLabel(step=first["step"], native_step=first["location"], reason=reason), info
    return None, info


# -- the importer ----------------------------------------------------------------
def parse_trail(data: Any, annotation: Any, path: Path, annotation_path: Path, subset: str | None,
                scenario: str, side: str) -> Trace | None:
    """One run and its annotation as a failed `Trace` with gold, or None when the annotation lists no error.

    `scenario` and `side` come from `read_trail`, which needs every run to place one (`realdev_sides`)."""
    source = str(path)
    payload = to_otlp(data, source)
    traces = traces_from_records(otlp_json_to_records(payload, source), source=source)
    if len(traces) != 1:
        raise InputError(source, None, "spans", f"expected the spans of one run, found {len(traces)} traces")
    mapped = traces[0]
    if not mapped.steps:
        raise InputError(source, None, "spans", "no span maps to a step (no LLM, TOOL or AGENT output spans)")
    errors = _errors(annotation, str(annotation_path))
    if not errors:
        return None
    gold, info = gold_of(mapped, errors)
    if gold is None:
        raise InputError(str(annotation_path), None, "errors", "no error's location is a span of the run")
    native_id = str(data["trace_id"])
    query = mapped.task.query or _task_of(data)
    try:
        return Trace.model_validate({
            **mapped.model_dump(),
            "id": f"trail:{subset + '/' if subset else ''}{native_id}",
            "task": Task(query=query, id=native_id).model_dump(),
            "outcome": Outcome(success=False, evaluator="trail annotation",
                               detail=f"{len(errors)} annotated error(s)").model_dump(),
            "source": Source(framework="smolagents", benchmark=f"trail-{subset.lower()}" if subset else "trail",
                             format=FORMAT, native_id=native_id, subset=subset).model_dump(),
            "gold": gold.model_dump(),
            "metadata": {**mapped.metadata, "trail": info, "scenario": scenario_id(scenario), "split": side},
        })
    except ValidationError as exc:
        raise from_validation_error(source, None, exc) from None


def _annotation_path(root: Path, subset: str | None, trace_id: str, run: Path) -> Path:
    folders = [root / SUBSETS[subset]] if subset in SUBSETS else [root / f for f in SUBSETS.values()]
    for folder in folders:
        for name in (f"{trace_id}.json", f"{trace_id}.json.gz"):
            if (folder / name).exists():
                return folder / name
    raise InputError(str(run), None, "trace_id", f"no annotation file {trace_id}.json(.gz) in {', '.join(str(f) for f in folders)}")


def read_trail(directory: str | Path, split: str | None = None) -> Iterator[Trace]:
    """Yield one failed `Trace` with its gold label per annotated TRAIL run (see the module docstring)."""
    root = Path(directory)
    spec = f"trail:{directory}"
    if not root.is_dir():
        raise InputError(spec, None, None, "no such directory")
    if root.name in SUBSETS:
        runs = [(root.name, p) for p in json_files(root)]
    else:
        runs = [(name, p) for name in SUBSETS if (root / name).is_dir() for p in json_files(root / name)]
    if not runs:
        raise InputError(spec, None, None, f"no run files (.json or .json.gz) in {', '.join(SUBSETS)} sub-folders")
    # Two passes: a run's side depends on the other runs of its task (`realdev_sides`); reading is cheap
    # next to mapping the spans, and only the runs of the asked side are mapped.
    ids, scenarios = {}, {}
    for _, path in runs:
        data = read_json_file(path)
        trace_id = data.get("trace_id") if isinstance(data, dict) else None
        if not isinstance(trace_id, str) or not trace_id:
            raise InputError(str(path), None, "trace_id", "missing or not a string")
        ids[path], scenarios[trace_id] = trace_id, trail_scenario(data)
    sides = realdev_sides(scenarios)
    for subset, path in runs:
        trace_id = ids[path]
        if split is not None and sides[trace_id] != split:
            continue
        data = read_json_file(path)
        annotation_path = _annotation_path(root if root.name not in SUBSETS else root.parent, subset, trace_id, path)
        trace = parse_trail(data, read_json_file(annotation_path), path, annotation_path, subset, scenarios[trace_id],
                            sides[trace_id])
        if trace is not None:
            yield trace


def load_trail_spec(arg: str) -> Iterator[Trace]:
    root, split = split_spec_arg(arg, f"trail:{arg}")
    return read_trail(root, split)
