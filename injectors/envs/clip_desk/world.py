"""The clips behind `clip_desk`: a loading-dock camera's frames, their questions and answers, and the note format.

A clip is 6 to 9 frames (one a second) of a conveyor seen from above: two or
three parcels (a colour and a shape: `red circle`, `blue square`...) come into
view, travel along the belt and leave, and a counter display in the frame's
corner shows how many parcels the dock has scanned so far (it only counts up).
Each frame is rendered with Pillow (`frame_png`); the numbers on the display
are drawn as text, so reading them is reading the image.

The question families: `reading` (the counter in frame K), `change` (how much
the counter rises from frame A to frame B), `rate` (its rise per frame from A
to B, a whole number), `count` (in how many frames a parcel is visible) and
`order` (which of two parcels comes into view first).
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Any

from faultlens.middleware.model.trace import Media

from ..base import stable_seed
from ..media_render import draw_shapes, palette_png, png_media
from ..video_qa.world import parse_frames as parse_frame_list

ENV = "clip_desk"
FAMILIES = ("reading", "change", "rate", "count", "order")
COLOURS = ("red", "blue", "green", "yellow", "purple", "orange")
SHAPES = ("circle", "square", "triangle")
FRAME_SIZE = (128, 80)
FPS = 1.0
BATCH = 4  # frames the lead asks the watcher for at once when it needs the whole clip
CLIP_ID = re.compile(r"\b(clip_desk-\d+-\d+)\b")
# One line of the watcher's notes: `frame 3: counter 214; red circle at x=40, blue square at x=71`.
NOTE = re.compile(r"^frame (\d+): counter (\S+); (.*)$", re.M)
PARCEL = re.compile(r"(\w+ \w+) at x=(\d+)")


# -- the clips ---------------------------------------------------------------
def _parcels(rng: random.Random, n: int) -> list[dict[str, Any]]:
    kinds = rng.sample([(c, s) for c in COLOURS for s in SHAPES], rng.randint(2, 3))
    firsts = rng.sample(range(0, n - 2), len(kinds))  # parcels come into view in distinct frames
    out = []
    for k, ((colour, shape), first) in enumerate(zip(kinds, firsts)):
        last = rng.randrange(first + 1, min(n, first + 6))
        dx = rng.choice([9, 10, 11, 12])
        out.append({"name": f"{colour} {shape}", "colour": colour, "shape": shape, "first": first, "last": last,
                    "x0": rng.randint(12, 30), "dx": dx, "y": 20 + 22 * k})
    return out


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the clip and what it asks) of one task of `family`."""
    n = rng.randint(6, 9)
    parcels = _parcels(rng, n)
    counter = [rng.randint(120, 480)]
    for _ in range(n - 1):
        counter.append(counter[-1] + rng.randint(1, 9))
    q: dict[str, Any] = {"family": family}
    if family == "reading":
        q["frame"] = rng.randrange(n)
        question = f"What number does the counter display show in frame {q['frame']}?"
    elif family in ("change", "rate"):
        a = rng.randrange(0, n - 2)
        b = rng.randrange(a + 2, n)
        q.update(a=a, b=b)
        if family == "rate":
            # the rise per frame is a whole number: the last frame's step takes the remainder
            short = (counter[b] - counter[a]) % (b - a)
            if short:
                for f in range(b, n):
                    counter[f] += (b - a) - short
            question = f"On average, by how much does the counter rise per frame from frame {a} to frame {b}?"
        else:
            question = f"By how much does the counter rise from frame {a} to frame {b}?"
    elif family == "count":
        q["parcel"] = rng.choice(parcels)["name"]
        question = f"In how many frames of the clip is the {q['parcel']} visible?"
    else:
        x, y = rng.sample([p["name"] for p in parcels], 2)
        q.update(parcels=[x, y])
        question = f"Which comes into view first: the {x} or the {y}?"
    world = {"frames": n, "parcels": parcels, "counter": counter, "question": q}
    return (f"{question} The clip has {n} frames, numbered from 0. Give the answer on a last line 'ANSWER: <value>' "
            "(a number, or a parcel such as 'red circle')."), world


def answer_of(world: dict[str, Any]) -> str:
    """The reference answer, from the clip's data."""
    q, counter = world["question"], world["counter"]
    by = {p["name"]: p for p in world["parcels"]}
    if q["family"] == "reading":
        return str(counter[q["frame"]])
    if q["family"] == "change":
        return str(counter[q["b"]] - counter[q["a"]])
    if q["family"] == "rate":
        return str((counter[q["b"]] - counter[q["a"]]) // (q["b"] - q["a"]))
    if q["family"] == "count":
        p = by[q["parcel"]]
        return str(p["last"] - p["first"] + 1)
    x, y = q["parcels"]
    return x if by[x]["first"] < by[y]["first"] else y


@lru_cache(maxsize=512)
def clip_world(clip_id: str) -> dict[str, Any]:
    """The clip behind an id (`clip_desk-SEED-INDEX`, the task's id): what the simulated watcher's eyes see."""
    m = re.fullmatch(r"clip_desk-(\d+)-(\d+)", clip_id.strip())
    if m is None:
        raise KeyError(clip_id)
    seed, index = int(m.group(1)), int(m.group(2))
    return make_task(random.Random(stable_seed(seed, ENV, index)), FAMILIES[(seed + index) % len(FAMILIES)])[1]


def visible(world: dict[str, Any], f: int) -> list[tuple[str, int]]:
    """(name, x) of the parcels in frame f, left to right."""
    seen = [(p["name"], p["x0"] + p["dx"] * (f - p["first"])) for p in world["parcels"] if p["first"] <= f <= p["last"]]
    return sorted(seen, key=lambda s: (s[1], s[0]))


# -- the frames ----------------------------------------------------------------
@lru_cache(maxsize=4096)
def _render(counter: int, parcels: tuple[tuple[str, str, int, int], ...]) -> bytes:
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", FRAME_SIZE, (236, 236, 228))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 12, FRAME_SIZE[0], FRAME_SIZE[1] - 4), fill=(200, 200, 190))  # the belt
    draw.rectangle((FRAME_SIZE[0] - 40, 0, FRAME_SIZE[0] - 1, 11), fill=(20, 20, 20))  # the counter display
    draw.text((FRAME_SIZE[0] - 36, 0), f"{counter:04d}", fill=(255, 190, 40), font=ImageFont.load_default(size=10))
    draw_shapes(draw, parcels)
    return palette_png(image)


def frame_png(world: dict[str, Any], f: int) -> bytes:
    by = {p["name"]: p for p in world["parcels"]}
    drawn = tuple((by[name]["colour"], by[name]["shape"], x, by[name]["y"]) for name, x in visible(world, f))
    return _render(world["counter"][f], drawn)


@lru_cache(maxsize=256)
def frames_by_png(clip_id: str) -> dict[bytes, int]:
    """Each frame's PNG of a clip → its index: how the simulated watcher knows which frame an image shows."""
    world = clip_world(clip_id)
    return {frame_png(world, f): f for f in range(world["frames"])}


def frame_media(png: bytes, clip_id: str, f: int) -> Media:
    return png_media(png, f"clip {clip_id} frame {f}", frame_index=f, timestamp_s=f / FPS)


def parse_frames(argument: str, n: int) -> list[int] | None:
    """Frame numbers of a `get_frames` argument (`0-3`, `5` or `2,6`), each once and in order, or None if it is
    malformed."""
    frames = parse_frame_list(argument, n)
    return None if frames is None else sorted(set(frames))


def frames_text(frames: list[int]) -> str:
    """`0-3` for a run of frames, else `2,6`."""
    if len(frames) > 1 and frames == list(range(frames[0], frames[-1] + 1)):
        return f"{frames[0]}-{frames[-1]}"
    return ",".join(str(f) for f in frames)


def get_frames_output(world: dict[str, Any], clip_id: str, argument: str) -> tuple[str, list[int]]:
    """What `get_frames(frames)` says beside the images, and the frames it shows."""
    n = world["frames"]
    frames = parse_frames(argument, n)
    if frames is None:
        return (f"error: cannot read frames {argument.strip()!r}; give a range like 0-3, a frame like 5 or a list "
                "like 2,6."), []
    if not frames:
        return f"error: no such frames (clip {clip_id} has frames 0 to {n - 1}).", []
    listed = ", ".join(str(f) for f in frames)
    return f"Clip {clip_id}: frames {listed} of {n}, in this order, one image each ({FPS:g} frame a second).", frames


# -- the notes -----------------------------------------------------------------
def note_line(f: int, counter: str, parcels: list[tuple[str, int]]) -> str:
    seen = ", ".join(f"{name} at x={x}" for name, x in parcels) if parcels else "no parcels"
    return f"frame {f}: counter {counter}; {seen}"


def parse_notes(text: str) -> dict[int, tuple[int | None, list[str]]]:
    """Frame → (counter, parcels seen) of notes (a later line for a frame replaces an earlier one)."""
    notes: dict[int, tuple[int | None, list[str]]] = {}
    for f, counter, body in NOTE.findall(text):
        notes[int(f)] = (int(counter) if counter.isdigit() else None, [name for name, _ in PARCEL.findall(body)])
    return notes
