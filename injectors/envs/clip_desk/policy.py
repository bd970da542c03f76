"""The simulated lead and watcher of `clip_desk`: `respond(agent, request, sim) -> text`, read off Agno's requests.

- **lead** (the Team's leader; tools: Agno's `delegate_task_to_member` and
  `calculate`) writes a plan as the thought of its first delegation
  (`- watch: frames 0-3, 4-7, 8`, `- note: ...`, `- compute: ...`, `- answer:
  ...`) and follows it: one delegation per planned batch, a check of the notes
  (the counter only counts up; a parcel on the belt is in every frame between
  its first and its last) with a `Look again at frames ...` delegation when
  they fail it (at most `MAX_REASKS`), the arithmetic with `calculate`, then
  `ANSWER: <value>`.
- **watcher** (a member `Agent`; tool `get_frames`) calls `get_frames` with
  the frames of its brief and writes one note line per image in its request:
  it knows which frame an image shows by its bytes (`world.frames_by_png`),
  so with no image in its request it notes nothing.

Recovered mistakes (rate `noise`): the watcher writes its first `get_frames`
argument as words (`2 to 5`; the tool refuses it and it writes it again); it
misses a parcel in a frame inside the parcel's run, or reads the counter's
hundreds digit one too low where an earlier frame of the same look shows it
higher: the lead's check catches both and has the frames looked at again.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn
from .world import BATCH, CLIP_ID, clip_world, frames_by_png, frames_text, note_line, parse_frames, parse_notes, visible

DELEGATE = "delegate_task_to_member"  # Agno's team-leader tool (coordinate mode)
MAX_REASKS = 2
PLAN = re.compile(r"^- (watch|note|compute|answer): (.+)$", re.M)
BRIEF = re.compile(r"(?:Watch|Look again at) frames? (\S+) of clip (clip_desk-\d+-\d+)")
_READING = re.compile(r"counter display show in frame (\d+)")
_SPAN = re.compile(r"from frame (\d+) to frame (\d+)")
_COUNT = re.compile(r"is the (\w+ \w+) visible")
_ORDER = re.compile(r"first: the (\w+ \w+) or the (\w+ \w+)\?")
_FRAMES = re.compile(r"clip has (\d+) frames")
_DATA_URL = re.compile(r"^data:image/png;base64,(.+)$")


class Call(wire.Call):
    errors = ("error",)


def history(messages: list[dict[str, Any]]) -> list[Call]:
    return wire.history(messages, Call)


# -- the question and the plan -------------------------------------------------
def question_of(text: str) -> dict[str, Any] | None:
    """The family and figures of a question, or None if it is none of the desk's."""
    n = _FRAMES.search(text)
    frames = int(n.group(1)) if n else 0
    if m := _READING.search(text):
        return {"family": "reading", "frame": int(m.group(1)), "frames": frames}
    if (m := _SPAN.search(text)) and "per frame" in text:
        return {"family": "rate", "a": int(m.group(1)), "b": int(m.group(2)), "frames": frames}
    if m := _SPAN.search(text):
        return {"family": "change", "a": int(m.group(1)), "b": int(m.group(2)), "frames": frames}
    if m := _COUNT.search(text):
        return {"family": "count", "parcel": m.group(1), "frames": frames}
    if m := _ORDER.search(text):
        return {"family": "order", "parcels": [m.group(1), m.group(2)], "frames": frames}
    return None


def plan_for(q: dict[str, Any]) -> dict[str, str]:
    """The lead's plan of a question: which frames to watch (batches), what to note, what to compute and answer."""
    n, family = q["frames"], q["family"]
    if family == "reading":
        k = q["frame"]
        watch = frames_text([f for f in (k - 1, k, k + 1) if 0 <= f < n])
        return {"watch": watch, "note": "the counter", "compute": f"the counter in frame {k}",
                "answer": "the counter's number"}
    if family in ("change", "rate"):
        a, b = q["a"], q["b"]
        compute = f"counter in frame {b} - counter in frame {a}"
        if family == "rate":
            compute = f"({compute}) / {b - a}"
        return {"watch": f"{a},{b}", "note": "the counter", "compute": compute, "answer": "the result"}
    watch = ", ".join(frames_text(list(range(s, min(n, s + BATCH)))) for s in range(0, n, BATCH))
    if family == "count":
        return {"watch": watch, "note": "the parcels", "compute": f"frames showing the {q['parcel']}, added up over "
                "the batches", "answer": "the number of frames"}
    x, y = q["parcels"]
    return {"watch": watch, "note": "the parcels", "compute": f"first frame showing the {x} and the {y}",
            "answer": "the one seen earlier"}


def plan_text(plan: dict[str, str]) -> str:
    return "Plan:\n" + "\n".join(f"- {k}: {plan[k]}" for k in ("watch", "note", "compute", "answer"))


def read_plan(text: str) -> dict[str, str]:
    return dict(PLAN.findall(text))


def brief(frames: str, clip: str, note: str) -> str:
    what = {"the counter": "the counter display's number",
            "the parcels": "every parcel (its colour and shape, and the pixel column x of its centre)"}.get(note, note)
    return (f"Watch frames {frames} of clip {clip} with get_frames and note {what}, one line per frame: "
            "'frame K: counter N; <colour> <shape> at x=X, ...' (or '; no parcels').")


def delegation(task: str, thought: str) -> str:
    return render_call(DELEGATE, {"member_id": "watcher", "task": task}, thought)


# -- the lead's check and computation ----------------------------------------------
def failed_check(notes: dict[int, tuple[int | None, list[str]]], note: str, tracked: list[str]) -> list[int] | None:
    """The frames to look at again when the notes fail the lead's check, else None."""
    frames = sorted(notes)
    if note == "the counter":
        for prev, f in zip(frames, frames[1:]):
            a, b = notes[prev][0], notes[f][0]
            if a is not None and b is not None and b <= a:
                return [prev, f]
        return None
    for name in tracked:
        seen = [f for f in frames if name in notes[f][1]]
        gaps = [f for f in frames if seen and seen[0] < f < seen[-1] and f not in seen]
        if gaps:
            return gaps[:1]
    return None


def tracked_parcels(compute: str) -> list[str]:
    return re.findall(r"the (\w+ (?:circle|square|triangle))", compute)


def computation(plan: dict[str, str], notes: dict[int, tuple[int | None, list[str]]]) -> tuple[str | None, str | None]:
    """(an expression for calculate, or None; the answer when no arithmetic is needed, or None) of the plan's compute
    line on the notes. Both None: the notes lack what the plan needs."""
    compute = plan.get("compute", "")
    counters = {f: c for f, (c, _) in notes.items() if c is not None}
    if m := re.fullmatch(r"the counter in frame (\d+)", compute):
        value = counters.get(int(m.group(1)))
        return None, None if value is None else str(value)
    if m := re.fullmatch(r"(\(?)counter in frame (\d+) ([-+]) counter in frame (\d+)(\)?)(?: / (\d+))?", compute):
        b, a = counters.get(int(m.group(2))), counters.get(int(m.group(4)))
        if a is None or b is None:
            return None, None
        expr = f"{b} {m.group(3)} {a}"
        return (f"({expr}) / {m.group(6)}" if m.group(6) else expr), None
    if m := re.fullmatch(r"frames showing (?:the (\w+ \w+)|any parcel), added up over the batches", compute):
        name, batches = m.group(1), [parse_frames(b, 100) or [] for b in plan.get("watch", "").split(", ")]
        counts = [sum(1 for f in batch if f in notes and (name in notes[f][1] if name else notes[f][1])) for batch in batches if batch]
        return (" + ".join(str(c) for c in counts) if counts else None), None
    if m := re.fullmatch(r"(first|last) frame showing the (\w+ \w+) and the (\w+ \w+)", compute):
        which, names = m.group(1), [m.group(2), m.group(3)]
        seen = {name: [f for f in sorted(notes) if name in notes[f][1]] for name in names}
        if not all(seen.values()):
            return None, None
        at = {name: (frames[0] if which == "first" else frames[-1]) for name, frames in seen.items()}
        return None, min(names, key=lambda name: (at[name], names.index(name)))
    return None, None


class DeskPolicy:
    """The simulated lead and watcher: `respond(agent, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        if agent == "lead":
            return self.lead(user, history(messages))
        if agent == "watcher":
            return self.watcher(user, messages, history(messages), chance)
        raise ValueError(f"clip_desk: no simulated agent {agent!r}")

    # -- lead ------------------------------------------------------------------------------
    @staticmethod
    def lead(question: str, calls: list[Call]) -> str:
        q, clip = question_of(question), CLIP_ID.search(question)
        if q is None or clip is None:
            return "I cannot tell which clip or which question this is."
        delegations = [c for c in calls if c.tool == DELEGATE]
        if not delegations:
            plan = plan_for(q)
            first = plan["watch"].split(", ")[0]
            return delegation(brief(first, clip.group(1), plan["note"]), plan_text(plan) + "\nI ask the watcher for "
                              "the first frames.")
        plan = read_plan(delegations[0].thought)  # the plan, once made, is what the lead follows
        notes = parse_notes("\n".join(c.result or "" for c in delegations))
        reasks = [c for c in delegations if "Look again" in str(c.args.get("task", ""))]
        again = failed_check(notes, plan.get("note", ""), tracked_parcels(plan.get("compute", "")))
        if again is not None and len(reasks) < MAX_REASKS:
            return delegation(brief(frames_text(again), clip.group(1), plan.get("note", "")).replace("Watch", "Look again at", 1),
                              f"The notes fail my check at frame {again[-1]}; I ask the watcher to look again.")
        batches = [b for b in plan.get("watch", "").split(", ") if b]
        asked = len(delegations) - len(reasks)
        if asked < len(batches):
            return delegation(brief(batches[asked], clip.group(1), plan.get("note", "")),
                              f"Next batch of the plan: frames {batches[asked]}.")
        calcs = [c for c in calls if c.tool == "calculate"]
        if calcs and calcs[-1].ok:
            return f"From the watcher's notes: {calcs[-1].args.get('expression')} = {calcs[-1].result}.\nANSWER: {calcs[-1].result}"
        expression, direct = computation(plan, notes)
        if direct is not None:
            return f"From the watcher's notes ({plan.get('compute')}): {direct}.\nANSWER: {direct}"
        if expression is None or len(calcs) >= 2:
            return "The watcher's notes do not give what my plan needs; I cannot answer."
        return render_call("calculate", {"expression": expression}, f"The notes pass my check; {plan.get('compute')}.")

    # -- watcher ----------------------------------------------------------------------------
    def watcher(self, task: str, messages: list[dict[str, Any]], calls: list[Call], chance) -> str:
        wanted = BRIEF.search(task)
        if wanted is None:
            return "I was not asked to watch any frames of a clip."
        spec, clip = wanted.group(1).rstrip(".,"), wanted.group(2)
        looks = [c for c in calls if c.tool == "get_frames"]
        if not looks or (not looks[-1].ok and len(looks) < 3):
            words = not looks and "-" in spec and chance("frames-in-words")
            return render_call("get_frames", {"frames": spec.replace("-", " to ") if words else spec})
        last = looks[-1]
        if not last.ok:
            return f"I could not get frames {spec}: {last.result}"
        try:
            world, known = clip_world(clip), frames_by_png(clip)
        except KeyError:
            return f"I could not get frames {spec}: no clip {clip}."
        shown = [known.get(png, -1) for png in images_after(messages, last.position)]
        frames = [f for f in shown if f >= 0]
        if not frames:
            return f"Notes on frames {spec}: the frames were not shown to me."
        lines: dict[int, list[Any]] = {f: [f, str(world["counter"][f]), visible(world, f)] for f in frames}
        again = "Look again" in task
        if not again:
            self._slip(lines, frames, world, chance)
        head = "Notes after a second look" if again else "Notes"
        return f"{head} on frames {frames_text(frames)}:\n" + "\n".join(note_line(f, lines[f][1], lines[f][2]) for f in frames)

    @staticmethod
    def _slip(lines: dict[int, list[Any]], frames: list[int], world: dict[str, Any], chance) -> None:
        """A recovered slip of the eye, made only where the lead's check catches it."""
        if chance("missed-parcel"):
            runs = {p["name"]: (p["first"], p["last"]) for p in world["parcels"]}
            for f in frames:
                # inside the parcel's run, with both neighbours in this look: the gap shows
                inner = [n for n, _ in lines[f][2] if runs[n][0] < f < runs[n][1] and f - 1 in lines and f + 1 in lines]
                if inner:
                    lines[f][2] = [(n, x) for n, x in lines[f][2] if n != inner[0]]
                    return
        if chance("misread-counter") and len(frames) >= 2:
            f = frames[-1]
            lines[f][1] = str(world["counter"][f] - 100)


def images_after(messages: list[dict[str, Any]], position: int) -> list[bytes]:
    """The PNG bytes of the image parts in the user message that follows the tool call at `position` (Agno puts a
    tool's images there: 'The tool call above generated the attached media.')."""
    for m in messages[position + 1:]:
        if m.get("role") == "assistant":
            break
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, list):
            urls = [(p.get("image_url") or {}).get("url", "") for p in content if p.get("type") == "image_url"]
            return [base64.b64decode(d.group(1)) for u in urls if (d := _DATA_URL.match(u))]
    return []

