"""The video world: clips of moving shapes, their questions, and the frame and note formats the agent and the error generators share."""

from __future__ import annotations

import re

COLOURS = ["red", "blue", "green", "yellow", "purple", "orange"]
SHAPES = ["circle", "square", "triangle"]


def parse_frames(argument: str, n: int) -> list[int] | None:
    """Frame numbers of a `get_frames` argument (`0-3`, `5`, `2,6`), or None if it is malformed."""
    out: list[int] = []
    for part in argument.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None:
            return None
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        out.extend(range(a, b + 1))
    return [f for f in out if 0 <= f < n] if out else None


NOTE = re.compile(r"^frame (\d+): (.*)$", re.M)
OBJ = re.compile(r"(\w+ \w+) at x=(\d+)")


def parse_notes(texts: list[str]) -> dict[int, list[tuple[str, int]]]:
    """Frame → shapes noted, later notes replacing earlier ones."""
    notes: dict[int, list[tuple[str, int]]] = {}
    for text in texts:
        for f, body in NOTE.findall(text):
            notes[int(f)] = [(name, int(x)) for name, x in OBJ.findall(body)]
    return notes


def question_spec(question: str) -> tuple[str, list[str]]:
    """(question kind, shapes it names) read from the question text."""
    names = re.findall(r"the (\w+ (?:circle|square|triangle))", question)
    if question.startswith("Which shape appears first"):
        return "first", names
    if question.startswith("In which frame"):
        return "first_frame", names
    if question.startswith("In how many frames"):
        return "count", names
    if question.startswith("Does the"):
        return "direction", names
    return "max_objects", names


def answer_from(kind: str, names: list[str], notes: dict[int, list[tuple[str, int]]]) -> str:
    def frames_with(name: str) -> list[int]:
        return sorted(f for f, objs in notes.items() if any(n == name for n, _ in objs))

    if kind == "first":
        firsts = {n: (frames_with(n) or [10**6])[0] for n in names}
        return min(names, key=lambda n: (firsts[n], names.index(n))) if names else "unknown"
    if kind == "first_frame":
        seen = frames_with(names[0]) if names else []
        return str(seen[0]) if seen else "none"
    if kind == "count":
        return str(len(frames_with(names[0]))) if names else "0"
    if kind == "direction":
        seen = frames_with(names[0]) if names else []
        if len(seen) < 2:
            return "unknown"
        xs = [dict(notes[f])[names[0]] for f in (seen[0], seen[-1])]
        return "right" if xs[1] > xs[0] else "left"
    return str(max((len(objs) for objs in notes.values()), default=0))
