"""One run folder's predictions as reports and plots read them (`ScoredRun`), shared by `report` and `plots`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ScoredRun:
    label: str
    method: str
    model: str | None
    dataset: str
    folder: Path
    baseline: bool
    records: list[dict[str, Any]]
    status: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)  # filled in by report.make_report
