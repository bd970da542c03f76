"""`video_qa` (video): one watcher answers questions about a short clip of rendered frames.

Each task has its own clip: 6 to 10 frames of 96x72 pixels (two frames a
second) in which two to four coloured shapes (circle, square, triangle) appear,
move left or right, and disappear. Frames are drawn with Pillow from generated
data. Questions ask about order ("Which appears first: the red circle or the
blue square?"), counts ("In how many frames is the green triangle visible?",
"What is the largest number of shapes visible in one frame?"), first
appearances ("In which frame does the yellow square first appear?") and
motion ("Does the purple circle move left or right?").

The only tool, `get_frames` (`0-3`, `5` or `2,6`), returns the frames; the
trace carries them as step media (with their frame index and time stamp)
wherever the watcher looks at them.

The watcher's run (simulated policy; a real vision model gets the same prompt
and the frames as images):

1. a plan: `- watch frames 0-2, 3-5, 6-7` (batch size varies), `- track: ...`,
   `- answer: ...`;
2. per batch, `get_frames` then notes, one line per frame (`frame 3: red
   circle at x=40, blue square at x=71`); it stops early once a
   first-appearance question is settled;
3. a check: it looks again at the frames around the event its answer rests on
   (the frame before a first appearance, the frames just outside a run of
   visibility, the ends of a motion) and its later notes replace the earlier
   ones: boundary misperceptions are caught, others are not;
4. `Answer: <value>`.

The simulated watcher reads the data behind the clip (found by the clip id the
tool prints); injected perception errors misread it. Recovered mistakes in
seeds (rate `noise`): a shape missed in one frame, which the check or the
question's irrelevance makes harmless, or a run is simply skipped as a seed.
"""

from __future__ import annotations

import base64
import random
import re
from functools import lru_cache

from faultlens.middleware.model.trace import AgentInfo, Media, Outcome, StepKind, Task

from faultlens.injectors.generators import slip_text
from ..registry import register
from ..base import (
    Conversation,
    Environment,
    Runtime,
    ToolSpec,
    parse_action,
    render_action,
    stable_seed,
)
from ..media_render import FRAME_SIZE, png_media, render_frame, user_content
from . import mistakes
from .world import (
    COLOURS,
    SHAPES,
    answer_from,
    parse_frames,
    parse_notes,
    question_spec,
)

KINDS = ["first", "first_frame", "count", "direction", "max_objects"]
FPS = 2.0


# ---------------------------------------------------------------- clips and tasks

def _make_clip(rng: random.Random, n: int) -> list[dict]:
    kinds = rng.sample([(c, s) for c in COLOURS for s in SHAPES], rng.randint(2, 4))
    objects = []
    for k, (colour, shape) in enumerate(kinds):
        a = rng.randrange(0, n - 2)
        b = rng.randrange(a + 2, n + 1)
        dx = rng.choice([-6, -5, -4, -3, 3, 4, 5, 6])
        span = abs(dx) * (b - a - 1)
        x0 = rng.randint(10, 86 - span) if dx > 0 else rng.randint(10 + span, 86)
        objects.append({"name": f"{colour} {shape}", "colour": colour, "shape": shape, "appear": a, "leave": b,
                        "x0": x0, "dx": dx, "y": 12 + 16 * k})
    return objects


def frame_objects(objects: list[dict], f: int) -> list[tuple[str, int]]:
    """(name, x) of the shapes visible in frame f, left to right."""
    seen = [(o["name"], o["x0"] + o["dx"] * (f - o["appear"])) for o in objects if o["appear"] <= f < o["leave"]]
    return sorted(seen, key=lambda s: (s[1], s[0]))


def _make_task(seed: int, index: int) -> Task:
    rng = random.Random(stable_seed("video_qa", seed, index))
    clip_id = f"video_qa-{seed}-{index}"
    n = rng.randint(6, 10)
    objects = _make_clip(rng, n)
    kind = KINDS[index % len(KINDS)]
    names = [o["name"] for o in objects]
    by = {o["name"]: o for o in objects}
    if kind == "first":
        pairs = [(x, y) for x in names for y in names if x < y and by[x]["appear"] != by[y]["appear"]]
        if not pairs:
            kind = "count"
        else:
            x, y = rng.choice(pairs)
            if rng.random() < 0.5:
                x, y = y, x
            question = f"Which shape appears first in the clip: the {x} or the {y}?"
            answer = x if by[x]["appear"] < by[y]["appear"] else y
    target = rng.choice(names)
    if kind == "first_frame":
        question = f"In which frame does the {target} first appear? (Frames are numbered from 0.)"
        answer = str(by[target]["appear"])
    elif kind == "count":
        question = f"In how many frames of the clip is the {target} visible?"
        answer = str(by[target]["leave"] - by[target]["appear"])
    elif kind == "direction":
        question = f"Does the {target} move left or right across the clip?"
        answer = "right" if by[target]["dx"] > 0 else "left"
    elif kind == "max_objects":
        question = "What is the largest number of shapes visible together in one frame of the clip?"
        answer = str(max(len(frame_objects(objects, f)) for f in range(n)))
    return Task(id=clip_id, query=question, reference_answer=answer,
                metadata={"clip_id": clip_id, "frames": n, "fps": FPS, "objects": objects, "question_kind": kind,
                          "names": names})


@lru_cache(maxsize=256)
def clip_task(clip_id: str) -> Task:
    """The task behind a clip id (`video_qa-SEED-INDEX`): what the simulated watcher 'sees'."""
    m = re.fullmatch(r"video_qa-(\d+)-(\d+)", clip_id.strip())
    if m is None:
        raise KeyError(clip_id)
    return _make_task(int(m.group(1)), int(m.group(2)))


def frame_png(task: Task, f: int) -> bytes:
    objects = task.metadata["objects"]
    by = {o["name"]: o for o in objects}
    drawn = tuple((by[name]["colour"], by[name]["shape"], x, by[name]["y"]) for name, x in frame_objects(objects, f))
    return render_frame(drawn)


def get_frames(argument: str, task: Task) -> str:
    n = task.metadata["frames"]
    frames = parse_frames(argument, n)
    if frames is None:
        return f"Clip {task.metadata['clip_id']}: cannot read frames {argument.strip()!r}; give a range like 0-3, a frame like 5, or a list like 2,6."
    if not frames:
        return f"Clip {task.metadata['clip_id']}: no such frames (the clip has frames 0 to {n - 1})."
    listed = ", ".join(str(f) for f in frames)
    return f"Clip {task.metadata['clip_id']}: frames {listed} of {n} ({FRAME_SIZE[0]}x{FRAME_SIZE[1]} px, {FPS:g} frames a second)."


def frames_media(argument: str, task: Task) -> list[Media]:
    frames = parse_frames(argument, task.metadata["frames"]) or []
    return [png_media(frame_png(task, f), f"clip {task.metadata['clip_id']} frame {f}", frame_index=f, timestamp_s=f / FPS)
            for f in frames]


# ---------------------------------------------------------------- notes

_CLIP = re.compile(r"Clip (video_qa-\d+-\d+): frames ([\d, ]+) of (\d+)")


_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)


def render_notes(frames: list[int], seen: dict[int, list[tuple[str, int]]]) -> str:
    lines = []
    for f in frames:
        objs = seen.get(f, [])
        lines.append(f"frame {f}: " + (", ".join(f"{name} at x={x}" for name, x in objs) if objs else "no shapes"))
    return "\n".join(lines)


def check_frames(kind: str, names: list[str], notes: dict[int, list[tuple[str, int]]], n: int) -> list[int]:
    """The frames the watcher looks at again before answering."""
    def frames_with(name: str) -> list[int]:
        return sorted(f for f, objs in notes.items() if any(m == name for m, _ in objs))

    if kind in ("first", "first_frame"):
        firsts = [frames_with(name)[0] for name in names if frames_with(name)]
        if not firsts:
            return []
        e = min(firsts)
        return [f for f in (e - 1, e) if f >= 0]
    if kind == "count" and names:
        seen = frames_with(names[0])
        if not seen:
            return []
        return [f for f in (seen[0] - 1, seen[-1] + 1) if 0 <= f < n]
    if kind == "direction" and names:
        seen = frames_with(names[0])
        return [seen[0], seen[-1]] if len(seen) >= 2 else []
    if not notes:
        return []
    best = max(notes, key=lambda f: (len(notes[f]), -f))
    return [best]


def _range_text(frames: list[int]) -> str:
    if len(frames) > 1 and frames == list(range(frames[0], frames[-1] + 1)):
        return f"{frames[0]}-{frames[-1]}"
    return ",".join(str(f) for f in frames)


# ---------------------------------------------------------------- the simulated watcher

class WatcherPolicy:
    """Plans the batches, watches, notes, checks the decisive frames, answers."""

    def respond(self, ctx) -> str:
        msgs = ctx.messages
        mine = [m["content"] for m in msgs if m["role"] == "assistant"]
        first = ctx.task_text
        question = first.split("Question: ", 1)[-1].split("\n", 1)[0]
        kind, names = question_spec(question)
        total = re.search(r"\((\d+) frames", first)
        n = int(total.group(1)) if total else 6
        previews = preview_frames(ctx.config.seed, first, n)
        glanced = sum(1 for m in mine if m.startswith(GLANCE))
        last = msgs[-1]["content"] if msgs[-1]["role"] == "user" else ""
        if mine and mine[-1].startswith(GLANCE) and last.startswith("Output of get_frames"):
            # a glance gives an overview only; the notes that answer the question come from the planned batches
            shown = _CLIP.search(last)
            count = len(shown.group(2).split(",")) if shown else 0
            return slip_text(ctx, StepKind.message, f"Preview: {count} frame(s) seen; the clip has {n} frames. Now the plan.")
        if not any(m.startswith("Plan:") for m in mine) and glanced < len(previews):
            # Some runs glance at a frame or two before planning, so the plan is not always the first step.
            return slip_text(ctx, StepKind.tool_call, render_action("get_frames", previews[glanced], GLANCE + " the clip before planning."))
        mine = [m for m in mine if not m.startswith((GLANCE, "Preview:"))]
        if not mine:
            size = ctx.rng("batch").choice([2, 3, 3, 4, 4])
            batches = [list(range(s, min(n, s + size))) for s in range(0, n, size)]
            track = ", ".join(names) if names else "every shape"
            goal = {"first": "the shape seen first", "first_frame": "the first frame showing it",
                    "count": "the number of frames showing it", "direction": "the direction of its motion",
                    "max_objects": "the largest number of shapes in one frame"}[kind]
            text = ("Plan:\n- watch frames " + ", ".join(_range_text(b) for b in batches) + f"\n- track: {track}\n- answer: {goal}")
            return slip_text(ctx, StepKind.plan, text)
        clip = _CLIP.search(last)
        if last.startswith("Output of get_frames") and clip:
            return self._observe(ctx, clip, checking=any(m.startswith("Let me look again") for m in mine))
        if last.startswith("Output of get_frames"):
            return slip_text(ctx, StepKind.message, "No frames were shown.")
        planned = re.search(r"^- watch frames (.+)$", mine[0], re.M)
        planned_batches = [b for b in (planned.group(1).split(", ") if planned else [])]
        tracked = re.search(r"^- track: (.+)$", mine[0], re.M)
        if tracked and tracked.group(1) != "every shape":
            names = [t.strip() for t in tracked.group(1).split(",")]  # the watcher follows its own plan
        notes = parse_notes([m for m in mine if m.startswith("Notes")])
        checked = any(m.startswith("Let me look again") for m in mine)
        settled = kind in ("first", "first_frame") and any(
            any(name == t for name, _ in objs) for objs in notes.values() for t in names)
        # one request per planned batch, in order: the watcher does not audit which frames it really got
        made = sum(1 for m in mine if parse_action(m) is not None and not m.startswith("Let me look again"))
        todo = planned_batches[made:]
        if todo and not settled:
            return slip_text(ctx, StepKind.tool_call, render_action("get_frames", todo[0]))
        if not checked:
            frames = check_frames(kind, names, notes, n)
            if frames:
                return slip_text(ctx, StepKind.tool_call, render_action("get_frames", _range_text(frames), "Let me look again at the frames my answer rests on."))
        return slip_text(ctx, StepKind.final_answer, f"Answer: {answer_from(kind, names, notes)}")

    def _observe(self, ctx, clip: re.Match, checking: bool) -> str:
        try:
            task = clip_task(clip.group(1))
        except KeyError:
            return slip_text(ctx, StepKind.message, "No frames were shown.")
        frames = [int(f) for f in clip.group(2).replace(" ", "").split(",") if f]
        objects = task.metadata["objects"]
        seen = {f: frame_objects(objects, f) for f in frames}
        if not checking and ctx.noise("miss"):
            # a recovered slip: one shape missed in one frame (caught by the check, or irrelevant)
            rng = ctx.rng("miss")
            busy = [f for f in frames if seen[f]]
            if busy:
                f = rng.choice(busy)
                seen[f] = [o for o in seen[f] if o != rng.choice(seen[f])]
        head = "Notes after a second look" if checking else "Notes"
        return slip_text(ctx, StepKind.message, f"{head} on frames {_range_text(frames)}:\n{render_notes(frames, seen)}")


GLANCE = "Let me glance at"
# How many glances a run takes before its plan (drawn per task and agent seed).
GLANCE_COUNTS = [0, 0, 1, 1, 1, 2]


def preview_frames(sim_seed: int, task_text: str, n: int) -> list[str]:
    """The frame arguments of the glances a run takes before planning (a function of the agents' seed and the task)."""
    rng = random.Random(stable_seed("video_qa-glance", sim_seed, task_text))
    options = ["0", f"{n - 1}", f"0,{n - 1}", f"{n // 2}", f"0,{n // 2}"]
    return rng.sample(options, rng.choice(GLANCE_COUNTS))


# ---------------------------------------------------------------- the environment

PROMPT = ("You are the watcher of a video question-answering system. You cannot see the clip until you ask for "
          "frames: reply 'Action: get_frames' and on the next line a range like 0-3, a frame like 5 or a list like 2,6. "
          "First reply with a plan: 'Plan:', '- watch frames <batches>', '- track: <shapes>', '- answer: <what>'. After "
          "each batch reply with notes: 'Notes on frames A-B:' then one line per frame, 'frame K: <colour> <shape> at "
          "x=<pixel column of its centre>, ...' or 'frame K: no shapes'. Before answering, look again at the frames your "
          "answer rests on (begin that reply with 'Let me look again'), then reply 'Answer: <value>' (a shape such as "
          "'red circle', a frame number, a count, or left/right).")


@register
class VideoQA(Environment):
    name = "video_qa"
    stands_in_for = "video QA (Video-MME)"
    modality = "video"
    topology = "single"
    description = "one watcher answers questions about order, counts, first appearances and motion in short rendered clips"
    not_applicable = {
        "V.2": "looking again at other frames only matters when the notes are already wrong at the event: 1 of 32 attempts failed",
        "V.3": "a broken get_frames output rarely touches the frames the answer rests on, and the re-check looks at those: 1 of 38 attempts failed",
    }
    agents = [AgentInfo(name="watcher", role="video analyst", description="requests frames, takes notes, checks, answers")]
    tools = {"get_frames": ToolSpec("get_frames", "return frames of the clip (a range 0-3, a frame 5 or a list 2,6) as images",
                                    "frames", get_frames)}

    def tasks(self, seed: int, n: int) -> list[Task]:
        return [_make_task(seed, i) for i in range(n)]

    def system_prompt(self, agent: str, task: Task) -> str:
        return PROMPT

    def program(self, task: Task, rt: Runtime) -> str | None:
        vision = not rt.model.startswith("faultlens-sim/")
        conv = Conversation().user(f"Question: {task.query}\nClip: {task.metadata['clip_id']} "
                                   f"({task.metadata['frames']} frames, numbered from 0). Write your plan first.")
        shown: list[Media] = []
        for turn in range(24):
            reply = rt.ask("watcher", conv.messages, kind=_kind_of_reply)
            conv.assistant(reply)
            action = parse_action(reply)
            if action is not None:
                output = rt.tool("watcher", action.tool, action.argument)
                shown = frames_media(action.argument, task) if action.tool == "get_frames" else []
                rt.steps[-1].media = list(shown)
                pngs = [base64.b64decode(m.data) for m in shown if m.data]
                conv.messages.append({"role": "user", "content": user_content(f"Output of {action.tool}:\n{output}", pngs, vision)})
                continue
            found = _ANSWER.search(reply)
            if found is not None:
                rt.steps[-1].kind = StepKind.final_answer
                return found.group(1)
            if reply.startswith("Notes"):
                rt.steps[-1].media = list(shown)  # the frames these notes describe
            shown = []
            conv.user("Continue.")
        return None

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        ok = answer is not None and answer.strip().lower().removeprefix("the ") == (task.reference_answer or "").lower()
        return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator="video_qa.exact",
                       detail=f"expected {task.reference_answer!r}, got {answer!r}")

    def policy(self) -> WatcherPolicy:
        return WatcherPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        shapes = [f"{c} {s}" for c in COLOURS for s in SHAPES]
        return [shapes, ["left", "right"]]

    def mutators(self):
        return mistakes.MUTATORS


def _kind_of_reply(text: str) -> StepKind:
    return StepKind.plan if text.lstrip().startswith("Plan:") else StepKind.message
