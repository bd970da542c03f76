"""Error rules specific to `video_qa` (tried before the generic rules of each mode).

Perception rules edit one line of the watcher's notes the way a
misperception looks: a shape named with the wrong colour or form (P.1), a
shape placed on the wrong side or notes of two frames swapped (P.2), a shape
missed or seen twice (P.3).
"""

from __future__ import annotations

import re

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput
from ..base import parse_action, render_action
from .world import (
    COLOURS,
    NOTE,
    OBJ,
    SHAPES,
    answer_from,
    parse_frames,
    parse_notes,
    question_spec,
)


def _notes(inp: GenInput) -> list[re.Match] | None:
    if inp.agent != "watcher" or inp.kind != StepKind.message or not inp.text.startswith("Notes"):
        return None
    lines = [m for m in NOTE.finditer(inp.text) if OBJ.search(m.group(2))]
    return lines or None


def _replace(text: str, m: re.Match, body: str) -> str:
    return text[: m.start(2)] + body + text[m.end(2):]


def _body(objs: list[tuple[str, int]]) -> str:
    return ", ".join(f"{n} at x={x}" for n, x in objs) if objs else "no shapes"


def _pick(inp: GenInput, lines: list[re.Match]) -> tuple[re.Match, list[tuple[str, int]], int]:
    """A noted shape to misperceive: one the question names when the notes show it (a misperception of a shape
    nobody asked about cannot change the answer), else any."""
    _, names = question_spec(inp.task_query)
    relevant = [m for m in lines if any(n in names for n, _ in OBJ.findall(m.group(2)))]
    line = inp.rng.choice(relevant or lines)
    objs = [(n, int(x)) for n, x in OBJ.findall(line.group(2))]
    ks = [k for k, (n, _) in enumerate(objs) if n in names] or list(range(len(objs)))
    return line, objs, inp.rng.choice(ks)


def notes_p1(inp: GenInput) -> Generated | None:
    lines = _notes(inp)
    if lines is None:
        return None
    line, objs, k = _pick(inp, lines)
    name, x = objs[k]
    colour, shape = name.split(" ")
    if inp.rng.random() < 0.5:
        new = f"{inp.rng.choice([c for c in COLOURS if c != colour])} {shape}"
    else:
        new = f"{colour} {inp.rng.choice([s for s in SHAPES if s != shape])}"
    if any(n == new for n, _ in objs):
        return None
    objs[k] = (new, x)
    return Generated(_replace(inp.text, line, _body(objs)), f"takes the {name} in frame {line.group(1)} for a {new}")


def notes_p2(inp: GenInput) -> Generated | None:
    lines = _notes(inp)
    if lines is None:
        return None
    all_lines = list(NOTE.finditer(inp.text))
    if len(all_lines) >= 2 and inp.rng.random() < 0.5:
        i = inp.rng.randrange(len(all_lines) - 1)
        a, b = all_lines[i], all_lines[i + 1]
        if a.group(2) != b.group(2):
            text = inp.text[: a.start(2)] + b.group(2) + inp.text[a.end(2): b.start(2)] + a.group(2) + inp.text[b.end(2):]
            return Generated(text, f"puts what frame {b.group(1)} shows under frame {a.group(1)} and the reverse")
    line, objs, k = _pick(inp, lines)
    name, x = objs[k]
    mirrored = 96 - x
    if abs(mirrored - x) < 8:
        return None
    objs[k] = (name, mirrored)
    return Generated(_replace(inp.text, line, _body(sorted(objs, key=lambda o: (o[1], o[0])))),
                     f"places the {name} at x={mirrored} in frame {line.group(1)}, on the other side of where it is")


def notes_p3(inp: GenInput) -> Generated | None:
    lines = _notes(inp)
    if lines is None:
        return None
    line, objs, k = _pick(inp, lines)
    name, _ = objs[k]
    if inp.rng.random() < 0.3:
        others = [m for m in NOTE.finditer(inp.text) if name not in m.group(2)]
        if others:
            target = inp.rng.choice(others)
            extra = [(n, int(x)) for n, x in OBJ.findall(target.group(2))] + [(name, objs[k][1])]
            return Generated(_replace(inp.text, target, _body(sorted(extra, key=lambda o: (o[1], o[0])))),
                             f"sees the {name} in frame {target.group(1)}, where it is not")
    del objs[k]
    return Generated(_replace(inp.text, line, _body(objs)), f"misses the {name} in frame {line.group(1)}")


# -- the plan ---------------------------------------------------------------

def _plan(inp: GenInput) -> re.Match | None:
    if inp.agent != "watcher" or inp.kind != StepKind.plan:
        return None
    return re.search(r"^- watch frames (.+)$", inp.text, re.M)


def plan_pl1(inp: GenInput) -> Generated | None:
    m = _plan(inp)
    if m is None:
        return None
    batches = m.group(1).split(", ")
    if len(batches) < 2:
        return None
    kept = batches[: max(1, len(batches) // 2)]
    return Generated(inp.text[: m.start(1)] + ", ".join(kept) + inp.text[m.end(1):],
                     f"the plan watches only frames {kept[0].split('-')[0]} to {kept[-1].split('-')[-1]} of the clip")


def plan_r4(inp: GenInput) -> Generated | None:
    m = _plan(inp)
    track = re.search(r"^- track: (.+)$", inp.text, re.M)
    if m is None or track is None:
        return None
    kind, names = question_spec(inp.task_query)
    if kind == "max_objects":
        return None
    pool = [f"{c} {s}" for c in COLOURS for s in SHAPES]
    seen_names = set(re.findall(r"\w+ (?:circle|square|triangle)", inp.task_query))
    options = [p for p in pool if p not in seen_names]
    new = inp.rng.choice(options)
    tracked = [new] + names[1:]
    return Generated(inp.text[: track.start(1)] + ", ".join(tracked) + inp.text[track.end(1):],
                     f"the plan tracks the {new}, which the question does not ask about")


def plan_pl2(inp: GenInput) -> Generated | None:
    m = _plan(inp)
    if m is None:
        return None
    return Generated(inp.text[: m.start()] + "- watch the clip at full resolution with get_video" + inp.text[m.end():],
                     "the plan relies on a full-resolution video tool the watcher does not have")


# -- acting -----------------------------------------------------------------

def notes_a5(inp: GenInput) -> Generated | None:
    if _notes(inp) is None:
        return None
    kind, names = question_spec(inp.task_query)
    earlier = [p.text for p in inp.prefix if p.agent == "watcher" and p.text.startswith("Notes")]
    notes = parse_notes(earlier + [inp.text])
    guess = answer_from(kind, names, notes)
    if guess in ("unknown", "none"):
        return None
    return Generated(inp.text + f"\nThat settles it.\nAnswer: {guess}", "answers from the first frames, before watching the rest")


def final_r2(inp: GenInput) -> Generated | None:
    if inp.agent != "watcher" or inp.kind != StepKind.final_answer:
        return None
    kind, names = question_spec(inp.task_query)
    value = inp.text.removeprefix("Answer:").strip()
    if kind == "direction" and value in ("left", "right"):
        new = "left" if value == "right" else "right"
        return Generated(f"Answer: {new}", "concludes the opposite direction from the positions it noted")
    if kind == "first" and len(names) == 2 and value in names:
        new = names[1] if value == names[0] else names[0]
        return Generated(f"Answer: {new}", f"concludes the {new} came first although its notes show it later")
    return None


def check_v2(inp: GenInput) -> Generated | None:
    action = parse_action(inp.text) if inp.agent == "watcher" and inp.kind == StepKind.tool_call else None
    if action is None or not action.thought.startswith("Let me look again"):
        return None
    kind, names = question_spec(inp.task_query)
    notes = parse_notes([p.text for p in inp.prefix if p.agent == "watcher" and p.text.startswith("Notes")])
    frames = parse_frames(action.argument, 100) or []
    # look again at frames that cannot change the answer (the ones already agreed on, away from the event)
    far = sorted(f for f in notes if f not in frames)
    if not far:
        return None
    pick = far[len(far) // 2]
    return Generated(render_action("get_frames", str(pick), action.thought), f"the check looks again at frame {pick}, not at the frames the answer rests on")


MUTATORS = {
    "P.1": [notes_p1],
    "P.2": [notes_p2],
    "P.3": [notes_p3],
    "PL.1": [plan_pl1],
    "PL.2": [plan_pl2],
    "R.4": [plan_r4],
    "A.5": [notes_a5],
    "R.2": [final_r2],
    "V.2": [check_v2],
}
