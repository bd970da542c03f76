"""A `faultlens bench report` directory as page blocks: report.md's headings, tables and plots, then any other files.

Only the markdown the report writer produces is understood (headings, pipe
tables, image lines, paragraphs); everything is passed to the template as text,
so nothing from a file is ever rendered as HTML.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)\s*$")
_PLOTS = (".png", ".svg", ".jpg", ".jpeg")


def _cells(line: str) -> list[str]:
    # Split on pipes that are not escaped (the writer escapes \| inside cells).
    parts = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [p.strip().replace("\\|", "|").replace("`", "") for p in parts]


def markdown_blocks(text: str, base: str) -> tuple[list[dict[str, Any]], set[str]]:
    """Blocks of a report.md and the relative paths of the images it shows. `base` is the file's folder, relative."""
    blocks: list[dict[str, Any]] = []
    shown: set[str] = set()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            i += 1
            continue
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 3)
            blocks.append({"kind": "heading", "level": level + 1, "text": line.lstrip("#").strip()})
            i += 1
        elif line.lstrip().startswith("|"):
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _cells(lines[i])
                if not all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            blocks.append({"kind": "table", "header": rows[0] if rows else [], "rows": rows[1:]})
        elif m := _IMAGE.match(line.strip()):
            rel = (Path(base) / m.group(2)).as_posix() if base not in ("", ".") else m.group(2)
            shown.add(rel)
            blocks.append({"kind": "image", "alt": m.group(1), "src": "/reports/files/" + quote(rel)})
            i += 1
        else:
            paragraph = []
            while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(("#", "|", "![")):
                paragraph.append(lines[i].strip())
                i += 1
            blocks.append({"kind": "text", "text": " ".join(paragraph).replace("`", "")})
    return blocks, shown


def report_sections(root: Path) -> list[dict[str, Any]]:
    """One section per file worth showing: markdown reports first, then tables, plots and other files."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    sections: list[dict[str, Any]] = []
    shown: set[str] = set()
    for path in (p for p in files if p.suffix.lower() == ".md"):
        rel = path.relative_to(root).as_posix()
        blocks, images = markdown_blocks(path.read_text(encoding="utf-8", errors="replace"), path.parent.relative_to(root).as_posix())
        shown |= images
        sections.append({"kind": "markdown", "name": rel, "blocks": blocks})
    for path in files:
        rel = path.relative_to(root).as_posix()
        suffix = path.suffix.lower()
        if suffix == ".csv":
            with path.open(newline="", encoding="utf-8", errors="replace") as handle:
                rows = list(csv.reader(handle))
            sections.append({"kind": "table", "name": rel, "header": rows[0] if rows else [], "rows": rows[1:201]})
        elif suffix in _PLOTS and rel not in shown:
            sections.append({"kind": "image", "name": rel, "src": "/reports/files/" + quote(rel)})
        elif suffix in (".json", ".jsonl", ".txt", ".html"):
            sections.append({"kind": "link", "name": rel, "src": "/reports/files/" + quote(rel)})
    return sections
