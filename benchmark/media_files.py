"""Media files beside an imported dataset: the folders a relative path is looked up in, and what type a file is."""

from __future__ import annotations

from pathlib import Path


def media_dirs(path: Path, top: Path, site_root: str | None = None) -> list[Path]:
    """Folders a relative media path of the file at `path` is looked up in, in order:
    its folder, each parent up to `top` (the dataset folder), `top`'s parent, and the parent of the
    nearest folder named `site_root` above the file (a published site's media paths start there)."""
    dirs = [path.parent]
    current = path.parent.resolve()
    stop = top.resolve()
    while current != stop and stop in current.parents:
        current = current.parent
        dirs.append(current)
    dirs.append(stop.parent)
    if site_root is not None:
        dirs += [p.parent for p in path.resolve().parents if p.name == site_root][:1]
    return list(dict.fromkeys(d.resolve() for d in dirs))


def sniff_mime(raw: bytes) -> str | None:
    """The image type of a file from its first bytes, or None for one that is not an image we read."""
    if raw.startswith(b"\x89PNG"):
        return "image/png"
    if raw.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None
