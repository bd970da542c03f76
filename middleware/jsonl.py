"""Native JSONL: one `Trace` per line, exactly as `Trace.model_dump_json` writes it."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from .errors import InputError, from_validation_error
from .model import Trace


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        # mtime=0 keeps the compressed bytes reproducible run after run.
        raw = gzip.GzipFile(filename=path, mode=mode + "b", mtime=0)
        return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    return open(path, mode, encoding="utf-8", newline="\n")


def parse_trace(text: str, source: str = "<string>", record: str | int | None = None) -> Trace:
    """Parse one JSON trace, raising InputError that names the record and field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, record, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InputError(source, record, None, f"expected a JSON object, got {type(data).__name__}")
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(source, record, exc) from None


def read_jsonl(path: str | Path) -> Iterator[Trace]:
    """Yield traces from a JSONL file (optionally .gz). Records are numbered from line 1."""
    path = Path(path)
    with _open(path, "r") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield parse_trace(line, str(path), f"line {number}")


def load_jsonl(path: str | Path) -> list[Trace]:
    """Read a whole JSONL file, failing before returning anything if one record is bad."""
    return list(read_jsonl(path))


def write_jsonl(traces: Iterable[Trace], path: str | Path) -> int:
    """Write traces to JSONL (gzip when the name ends in .gz); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with _open(path, "w") as handle:
        for trace in traces:
            handle.write(trace.model_dump_json() + "\n")
            count += 1
    return count
