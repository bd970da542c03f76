"""Error rules of `clip_desk` (tried before the generic ones): the desk's own kinds of mistakes.

Where each rule acts (see `clip_desk.env` for the steps): the watcher's notes, whose frames are the step's media
(P.1-P.3 misperceive one frame the way a look at an image goes wrong, where the lead's check lets it through; C.2
passes a number on slipped), its `get_frames` call (A.2, A.3); the lead's plan (R.4, PL.1, PL.2, PL.3, A.5, C.1), its
re-ask when the notes fail its check (V.2), its calculation (R.2, V.1, A.2) and its answer (R.2, R.3, A.4, C.3). The
lead follows its own plan and reads the notes as written, so each of these carries to the answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import (Generated, GenInput, answer_line, answer_with_unit, guessed_answer,
                                           miswritten_answer, replace_span, slipped_digits, slipped_result)
from ..docs_team.calculator import calculate
from .policy import DELEGATE, brief, computation, delegation, plan_text, question_of, read_plan
from .world import CLIP_ID, COLOURS, NOTE, PARCEL, SHAPES, clip_world, note_line, parse_frames, parse_notes, visible

_EXPRESSION = re.compile(r'"expression": "([^"]+)"')
_ANSWER = re.compile(r"^ANSWER: (.+)$", re.M)
_COUNTER_FAMILIES = ("reading", "change", "rate")


def _question(inp: GenInput) -> dict[str, Any] | None:
    return question_of(inp.task_query)


def _world(inp: GenInput) -> dict[str, Any] | None:
    clip = CLIP_ID.search(inp.prefix_text() + inp.text)
    return clip_world(clip.group(1)) if clip else None


def _notes(inp: GenInput) -> list[re.Match] | None:
    """The note lines of a watcher's notes step."""
    if inp.agent != "watcher" or inp.kind != StepKind.message:
        return None
    return list(NOTE.finditer(inp.text)) or None


def _line(m: re.Match, counter: str | None = None, parcels: list[tuple[str, int]] | None = None) -> str:
    seen = parcels if parcels is not None else [(n, int(x)) for n, x in PARCEL.findall(m.group(3))]
    return note_line(int(m.group(1)), counter if counter is not None else m.group(2), seen)


def _relined(inp: GenInput, m: re.Match, line: str) -> str:
    return inp.text[: m.start()] + line + inp.text[m.end():]


def _decisive(q: dict[str, Any]) -> int | None:
    """The frame whose counter the answer rests on most (the question's frame, or the later of two)."""
    return q.get("frame", q.get("b"))


def _tracked(q: dict[str, Any]) -> list[str]:
    return [q["parcel"]] if q["family"] == "count" else list(q.get("parcels") or [])


def _boundary(inp: GenInput, lines: list[re.Match], q: dict[str, Any]) -> tuple[re.Match, str] | None:
    """A note line of the frame where a tracked parcel comes into view or leaves it (a change there passes the lead's
    gap check), and the parcel."""
    world = _world(inp)
    if world is None:
        return None
    runs = {p["name"]: (p["first"], p["last"]) for p in world["parcels"]}
    edges = [(m, name) for name in _tracked(q) if name in runs for m in lines
             if name in m.group(3) and int(m.group(1)) in runs[name]]
    return inp.rng.choice(edges) if edges else None


# -- P.1, P.2, P.3: the watcher misperceives a frame --------------------------------
def _p1(inp: GenInput) -> Generated | None:
    """A parcel named with the wrong colour or shape (at the edge of its run), or the counter's digits taken for
    another number's (its first two digits read as the same)."""
    lines, q = _notes(inp), _question(inp)
    if lines is None or q is None:
        return None
    if q["family"] in _COUNTER_FAMILIES:
        m = next((m for m in lines if int(m.group(1)) == _decisive(q) and m.group(2).isdigit()), None)
        if m is None or len(m.group(2)) < 3 or m.group(2)[1] == m.group(2)[0]:
            return None
        new = m.group(2)[0] * 2 + m.group(2)[2:]
        return Generated(_relined(inp, m, _line(m, counter=new)),
                         f"takes the counter's second digit in frame {m.group(1)} for a {new[1]}: reads {new}")
    found = _boundary(inp, lines, q)
    if found is None:
        return None
    m, name = found
    colour, shape = name.split(" ")
    other = (f"{inp.rng.choice([c for c in COLOURS if c != colour])} {shape}" if inp.rng.random() < 0.5
             else f"{colour} {inp.rng.choice([s for s in SHAPES if s != shape])}")
    if other in m.group(3):
        return None
    parcels = [(other if n == name else n, int(x)) for n, x in PARCEL.findall(m.group(3))]
    return Generated(_relined(inp, m, _line(m, parcels=parcels)), f"takes the {name} in frame {m.group(1)} for a {other}")


def _p2(inp: GenInput) -> Generated | None:
    """The counter noted from the neighbouring frame, or every line one frame off; a parcel placed in the frame
    before it comes into view."""
    lines, q, world = _notes(inp), _question(inp), _world(inp)
    if lines is None or q is None or world is None:
        return None
    frames = [int(m.group(1)) for m in lines]
    if q["family"] in _COUNTER_FAMILIES:
        for m in lines:
            f = int(m.group(1))
            if f == _decisive(q) and f - 1 not in frames and f - 1 >= 0:
                return Generated(_relined(inp, m, _line(m, counter=str(world["counter"][f - 1]))),
                                 f"notes the counter of frame {f - 1} under frame {f}")
        if frames == list(range(frames[0], frames[-1] + 1)) and frames[-1] + 1 < world["frames"]:
            text = inp.text
            for m in reversed(lines):  # the watcher takes the first image for the frame after it, and so on
                f = int(m.group(1))
                text = text[: m.start()] + f"frame {f + 1}: " + text[m.start() + len(f"frame {f}: "):]
            return Generated(text, f"numbers the images from frame {frames[0] + 1}, one frame off")
        return None
    for name in _tracked(q):
        seen = [int(m.group(1)) for m in lines if name in m.group(3)]
        before = seen[0] - 1 if seen else -1
        at = next((m for m in lines if int(m.group(1)) == before), None)
        if at is None:
            continue
        x = dict(visible(world, seen[0])).get(name, 20)
        parcels = sorted([(n, int(px)) for n, px in PARCEL.findall(at.group(3))] + [(name, max(4, x - 10))], key=lambda p: (p[1], p[0]))
        return Generated(_relined(inp, at, _line(at, parcels=parcels)),
                         f"places the {name} in frame {before}, a frame before it comes into view")
    return None


def _p3(inp: GenInput) -> Generated | None:
    """A digit of the decisive frame's counter misread (within what the check allows), or a tracked parcel missed at
    the edge of its run."""
    lines, q = _notes(inp), _question(inp)
    if lines is None or q is None:
        return None
    if q["family"] in _COUNTER_FAMILIES:
        notes = parse_notes(inp.text)
        k = _decisive(q)
        value = notes[k][0] if k in notes else None
        if k is None or value is None:
            return None
        low = max([c for f, (c, _) in notes.items() if f < k and c is not None], default=0)
        high = min([c for f, (c, _) in notes.items() if f > k and c is not None], default=10_000)
        options = [v for v in (value + 10, value - 10, value + 1, value - 1, value + 2, value - 2) if low < v < high]
        if not options:
            return None
        new = options[0]
        m = next(m for m in lines if int(m.group(1)) == k)
        return Generated(_relined(inp, m, _line(m, counter=str(new))), f"reads the counter in frame {k} as {new}, not {value}")
    found = _boundary(inp, lines, q)
    if found is None:
        return None
    m, name = found
    parcels = [(n, int(x)) for n, x in PARCEL.findall(m.group(3)) if n != name]
    return Generated(_relined(inp, m, _line(m, parcels=parcels)), f"misses the {name} in frame {m.group(1)}")


def _c2(inp: GenInput) -> Generated | None:
    """The watcher writes the decisive counter up with its digits slipped."""
    lines, q = _notes(inp), _question(inp)
    if lines is None or q is None or q["family"] not in _COUNTER_FAMILIES:
        return None
    m = next((m for m in lines if int(m.group(1)) == _decisive(q) and m.group(2).isdigit()), None)
    if m is None:
        return None
    new = slipped_digits(m.group(2))
    return Generated(_relined(inp, m, _line(m, counter=new)), f"passes the counter of frame {m.group(1)} on as {new}, "
                     f"where the frame shows {m.group(2)}")


# -- the watcher's look ----------------------------------------------------------------
def _look(inp: GenInput) -> dict[str, Any] | None:
    action = inp.action
    if inp.agent != "watcher" or inp.kind != StepKind.tool_call or action is None or action.tool != "get_frames":
        return None
    try:
        args = json.loads(action.argument)
    except json.JSONDecodeError:
        return None
    return args if isinstance(args, dict) and "frames" in args else None


def _a2(inp: GenInput) -> Generated | None:
    """The watcher asks for the frames one later than its brief's (and notes those), or the lead calculates with
    another frame's counter."""
    args, world = _look(inp), _world(inp)
    if args is not None and world is not None:
        frames = parse_frames(str(args["frames"]), world["frames"])
        if not frames or frames[-1] + 1 >= world["frames"]:
            return None
        moved = ",".join(str(f + 1) for f in frames)
        return Generated(inp.text.replace(json.dumps(args["frames"]), json.dumps(moved)),
                         f"asks for frames {moved} where its brief says {args['frames']}")
    m = _calc(inp)
    if m is None:
        return None
    notes = parse_notes(inp.prefix_text())
    used = [int(v) for v in re.findall(r"\d+", m.group(1))]
    others = [c for c, _ in notes.values() if c is not None and c not in used]
    if not others or not used or used[0] < 100:
        return None
    new = inp.rng.choice(sorted(others))
    expr = m.group(1).replace(str(used[0]), str(new), 1)
    return Generated(inp.text.replace(m.group(1), expr), f"calculates with {new}, another frame's counter, "
                     f"instead of {used[0]}")


def _a3(inp: GenInput) -> Generated | None:
    """The watcher writes notes of frames it never asked to see (numbers made up)."""
    args, world = _look(inp), _world(inp)
    if args is None or world is None:
        return None
    frames = parse_frames(str(args["frames"]), world["frames"]) or []
    if not frames:
        return None
    counter = inp.rng.randint(120, 480)
    lines = []
    for f in frames:
        counter += inp.rng.randint(2, 9)
        lines.append(note_line(f, str(counter), []))
    return Generated(f"Notes on frames {args['frames']}:\n" + "\n".join(lines),
                     "writes notes of frames it never looked at")


# -- the lead's plan and delegations --------------------------------------------------
def _plan(inp: GenInput) -> tuple[dict[str, str], dict[str, Any], str] | None:
    """(the plan, the delegation's arguments, the thought after the plan) of the lead's plan step."""
    if inp.agent != "lead" or inp.kind != StepKind.plan or f"Action: {DELEGATE}" not in inp.text:
        return None
    thought, _, rest = inp.text.partition(f"\nAction: {DELEGATE}\n")
    try:
        args = json.loads(rest)
    except json.JSONDecodeError:
        return None
    plan = read_plan(thought)
    return (plan, args, thought.split("\n")[-1]) if len(plan) == 4 and isinstance(args, dict) else None


def _replanned(inp: GenInput, plan: dict[str, str], args: dict[str, Any], tail: str, reason: str) -> Generated:
    clip = CLIP_ID.search(str(args.get("task", "")))
    first = plan["watch"].split(", ")[0]
    task = brief(first, clip.group(1), plan["note"]) if clip and parse_frames(first, 100) else str(args.get("task"))
    return Generated(delegation(task, plan_text(plan) + "\n" + tail), reason)


def _r4(inp: GenInput) -> Generated | None:
    """The plan computes another quantity than the one asked."""
    found, q = _plan(inp), _question(inp)
    if found is None or q is None:
        return None
    plan, args, tail = found
    compute = plan["compute"]
    if q["family"] == "reading":
        k = q["frame"]
        if k == 0:
            return None
        plan["compute"] = f"counter in frame {k} - counter in frame {k - 1}"
    elif q["family"] == "change":
        plan["compute"] = f"the counter in frame {q['b']}"
    elif q["family"] == "rate":
        plan["compute"] = f"counter in frame {q['b']} - counter in frame {q['a']}"
    elif q["family"] == "count":
        plan["compute"] = "frames showing any parcel, added up over the batches"
    else:
        plan["compute"] = compute.replace("first frame", "last frame")
    return _replanned(inp, plan, args, tail, f"the plan computes {plan['compute']} where the question asks for {compute}")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan watches too little: the first batch only, or its batch without the frame the answer rests on."""
    found, q = _plan(inp), _question(inp)
    if found is None or q is None:
        return None
    plan, args, tail = found
    batches = plan["watch"].split(", ")
    if len(batches) > 1:
        plan["watch"] = batches[0]
    else:
        k = _decisive(q)
        kept = [f for f in parse_frames(batches[0], 100) or [] if f != k]
        if not kept or k is None:
            return None
        plan["watch"] = ",".join(str(f) for f in kept)
    return _replanned(inp, plan, args, tail, f"the plan watches only frames {plan['watch']}")


def _pl2(inp: GenInput) -> Generated | None:
    """The plan relies on a video tool the team does not have."""
    found = _plan(inp)
    if found is None:
        return None
    plan, args, tail = found
    clip = CLIP_ID.search(str(args.get("task", "")))
    plan["watch"] = "the whole clip at once with get_video"
    task = f"Play clip {clip.group(1) if clip else ''} with get_video and note, for each frame, the counter and the parcels."
    return Generated(delegation(task, plan_text(plan) + "\n" + tail), "the plan relies on a get_video tool nobody has")


def _pl3(inp: GenInput) -> Generated | None:
    """The plan sets out to describe the parcels' look instead of answering."""
    found = _plan(inp)
    if found is None:
        return None
    plan, args, tail = found
    plan["compute"], plan["answer"] = "a description of the parcels' colours and shapes", "the description"
    return _replanned(inp, plan, args, tail, "the plan turns to describing the parcels")


def _a5(inp: GenInput) -> Generated | None:
    """The lead answers before the watcher has noted anything."""
    return guessed_answer(inp, "lead", "Clips like this usually come out about here.", "the watcher has noted anything")


def _delegated(inp: GenInput) -> tuple[dict[str, Any], str] | None:
    if inp.agent != "lead" or inp.kind not in (StepKind.plan, StepKind.message) or f"Action: {DELEGATE}" not in inp.text:
        return None
    thought, _, rest = inp.text.partition(f"\nAction: {DELEGATE}\n")
    try:
        args = json.loads(rest)
    except json.JSONDecodeError:
        return None
    return (args, thought) if isinstance(args, dict) else None


def _c1(inp: GenInput) -> Generated | None:
    """The lead hands the watcher the arithmetic instead of the frames to watch."""
    found, q = _delegated(inp), _question(inp)
    if found is None or q is None:
        return None
    args, thought = found
    clip = CLIP_ID.search(str(args.get("task", "")))
    if clip is None or "Look again" in str(args.get("task")):
        return None
    question = inp.task_query.split("?")[0] + "?"
    task = f"Work out for clip {clip.group(1)}: {question} Report the result."
    return Generated(delegation(task, thought), "hands the watcher the question to work out instead of frames to watch")


def _v2(inp: GenInput) -> Generated | None:
    """The lead lets notes that fail its check pass, and answers from them."""
    found = _delegated(inp)
    if found is None or "Look again" not in str(found[0].get("task", "")):
        return None
    plan = read_plan(next((p.text for p in inp.prefix if p.agent == "lead" and p.text.startswith("Plan:")), ""))
    notes = parse_notes("\n".join(p.text for p in inp.prefix if p.agent == "watcher"))
    expression, direct = computation(plan, notes)
    if direct is None and expression is not None:
        direct = calculate(expression)
    if direct is None:
        return None
    return Generated(f"The notes look consistent enough.\nANSWER: {direct}", "accepts notes that fail the check and answers")


# -- the lead's calculation and answer -------------------------------------------------
def _calc(inp: GenInput) -> re.Match | None:
    action = inp.action
    if inp.agent != "lead" or inp.kind != StepKind.tool_call or action is None or action.tool != "calculate":
        return None
    return _EXPRESSION.search(inp.text)


def _r2(inp: GenInput) -> Generated | None:
    """The subtraction the wrong way round, the rise per frame over the frames rather than the steps between them, or
    for an order question the other parcel."""
    m = _calc(inp)
    if m is not None:
        expr = m.group(1)
        if r := re.fullmatch(r"\((\d+) - (\d+)\) / (\d+)", expr):
            new = f"({r.group(1)} - {r.group(2)}) / {int(r.group(3)) + 1}"
        elif r := re.fullmatch(r"(\d+) - (\d+)", expr):
            new = f"{r.group(2)} - {r.group(1)}"
        else:
            return None
        return Generated(inp.text.replace(expr, new), f"calculates {new} where {expr} is needed")
    q = _question(inp)
    answer = _ANSWER.search(inp.text) if inp.agent == "lead" and inp.kind == StepKind.final_answer else None
    if answer is None or q is None or q["family"] != "order" or answer.group(1) not in q["parcels"]:
        return None
    other = next(p for p in q["parcels"] if p != answer.group(1))
    return Generated(replace_span(inp.text, answer, other, 1), f"concludes the {other} came first though its notes show it later")


def _v1(inp: GenInput) -> Generated | None:
    """The lead's count leaves out a batch the watcher noted earlier."""
    m = _calc(inp)
    if m is None or not re.fullmatch(r"\d+( \+ \d+)+", m.group(1)):
        return None
    terms = m.group(1).split(" + ")
    if terms[0] == "0":
        return None
    new = " + ".join(terms[1:])
    return Generated(inp.text.replace(m.group(1), new), f"adds up {new}, forgetting the first batch's {terms[0]}")


def _r3(inp: GenInput) -> Generated | None:
    m = answer_line(inp, "lead")
    return None if m is None else miswritten_answer(inp, m, slipped_result(m.group(1), inp.rng))


def _a4(inp: GenInput) -> Generated | None:
    m = answer_line(inp, "lead")
    if m is not None:
        return answer_with_unit(inp, m, ["parcels", "units", "(approx.)"])
    answer = _ANSWER.search(inp.text) if inp.agent == "lead" and inp.kind == StepKind.final_answer else None
    if answer is None:
        return None
    return Generated(replace_span(inp.text, answer, f"{answer.group(1)}, which enters first", 1),
                     "adds words to the answer line, not the bare parcel asked for")


def _c3(inp: GenInput) -> Generated | None:
    """The lead passes the watcher's decisive counter on as the answer, without the computation the question asks."""
    m, q = answer_line(inp, "lead"), _question(inp)
    if m is None or q is None or q["family"] not in ("change", "rate"):
        return None
    notes = parse_notes("\n".join(p.text for p in inp.prefix if p.agent == "watcher"))
    value = notes.get(q["b"], (None, []))[0]
    if value is None or str(value) == m.group(1):
        return None
    return Generated(f"The watcher's notes give it.\nANSWER: {value}",
                     f"passes the watcher's counter of frame {q['b']} on as the answer")


MUTATORS = {"P.1": [_p1], "P.2": [_p2], "P.3": [_p3], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4], "PL.1": [_pl1],
            "PL.2": [_pl2], "PL.3": [_pl3], "A.2": [_a2], "A.3": [_a3], "A.4": [_a4], "A.5": [_a5], "V.1": [_v1],
            "V.2": [_v2], "C.1": [_c1], "C.2": [_c2], "C.3": [_c3]}
