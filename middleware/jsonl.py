"""Native JSONL: one `Trace` per line, exactly as `Trace.model_dump_json` writes it."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from .errors import InputError, from_validation_error
from .model.trace import Trace


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        # mtime=0 keeps the compressed bytes reproducible run after run.
        raw = gzip.GzipFile(filename=path, mode=mode + "b", mtime=0)
        return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    return open(path, mode, encoding="utf-8", newline="\n")


def read_utf8(path: Path) -> str:
    """A text file's contents; InputError naming the line and byte if it is not UTF-8 (binary, latin-1, ...)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(str(path), f"line {line}", None, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); is this a binary or latin-1 file?") from None


def _unencodable(value: object, path: str = "") -> str | None:
    """The path of the first string (or key) in `value` that cannot be encoded as UTF-8."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or None
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        here = f"{path}.{key}" if path and not isinstance(key, int) else (f"{path}[{key}]" if isinstance(key, int) else str(key))
        found = _unencodable(key, here) if isinstance(key, str) else None
        found = found or _unencodable(item, here)
        if found:
            return found
    return None


def parse_trace(text: str, source: str = "<string>", record: str | int | None = None) -> Trace:
    """Parse one JSON trace, raising InputError that names the record and field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, record, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise InputError(source, record, None, "JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(source, record, None, f"expected a JSON object, got {type(data).__name__}")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # A JSON escape such as "\ud800" decodes to a lone surrogate, which no store can write.
        raise InputError(source, record, _unencodable(data), "is not valid Unicode (a lone surrogate)") from None
    try:
        return Trace.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(source, record, exc) from None


def read_jsonl(path: str | Path, *, unique_ids: bool = False) -> Iterator[Trace]:
    """Yield traces from a JSONL file (optionally .gz). Records are numbered from line 1.

    A file that is not UTF-8, not gzip though named .gz, or a gzip stream cut
    short raises InputError naming the line where reading stopped. unique_ids:
    a record repeating an earlier one's id raises InputError too (a store keeps
    one run per id, so importing both would silently keep only the last).
    """
    path = Path(path)
    number = 0
    seen: dict[str, int] = {}
    try:
        with _open(path, "r") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    trace = parse_trace(line, str(path), f"line {number}")
                    if unique_ids:
                        first = seen.setdefault(trace.id, number)
                        if first != number:
                            raise InputError(str(path), f"line {number}", "id",
                                             f"repeats the id {trace.id!r} of line {first}; a file to import holds each run once")
                    yield trace
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"line {number + 1}", None, f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line's chunk); is this a binary or latin-1 file?") from None
    except gzip.BadGzipFile as exc:
        raise InputError(str(path), None, None, f"not gzip data although named .gz ({exc})") from None
    except (EOFError, zlib.error) as exc:
        raise InputError(str(path), f"line {number + 1}", None, f"the gzip stream is truncated or corrupt after {number} line(s) ({exc or 'unexpected end'})") from None


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
