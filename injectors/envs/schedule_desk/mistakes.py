"""Error rules of `schedule_desk` (tried before the generic ones): mistakes in the solver's ReAct replies.

Where each rule acts (see `schedule_desk.env` for the steps): the plan, the solver's first reply (R.4 the other
day, PL.1 an invitee left out, A.5 finishing before any calendar), a calendar call (A.2 the colleague's calendar,
A.1 the free slots asked for before the last calendar is read), any ReAct reply (A.3 a tool DSPy's program does
not have), the `free_slots` call (A.2 another duration, V.1 a meeting read earlier left out, R.1 a meeting no
calendar holds) and the extracted answer (R.2 the wrong window, R.3 a slipped time, A.4 a time not in HH:MM).
The solver follows its plan and takes the i-th calendar it read as the plan's i-th person's, so each of these
carries to the answer.
"""

from __future__ import annotations

import json

from faultlens.middleware.model.trace import StepKind

from faultlens.injectors.generators import Generated, GenInput
from .policy import PLAN, action, fields, read_question, render
from .world import CLOSE, DAYS, OPEN, busy_text, free_windows, hhmm, intervals, other_duration, pick

_LUNCH_TEXT = "13:00"


def _react(inp: GenInput, *kinds: StepKind) -> tuple[str, str, dict] | None:
    """(thought, tool, arguments) of a ReAct reply of one of `kinds`, or None."""
    if inp.kind not in kinds:
        return None
    f = fields(inp.text)
    if "next_tool_name" not in f:
        return None
    try:
        args = json.loads(f.get("next_tool_args", "{}"))
    except json.JSONDecodeError:
        return None
    return f.get("next_thought", ""), f["next_tool_name"], args if isinstance(args, dict) else {}


def _r4(inp: GenInput) -> Generated | None:
    """The plan reads the other day's meetings."""
    got = _react(inp, StepKind.plan)
    m = PLAN.search(got[0]) if got else None
    if got is None or m is None:
        return None
    day = m.group(2)
    other = DAYS[1 - DAYS.index(day)] if day in DAYS else None
    if other is None:
        return None
    thought = got[0].replace(f"({day})", f"({other})").replace(f"their {day} meetings", f"their {other} meetings")
    return Generated(action(thought, got[1], got[2]), f"plans the meeting on {other} where the question asks for {day}")


def _pl1(inp: GenInput) -> Generated | None:
    """The plan leaves the last invitee out (only two calendars are read)."""
    got = _react(inp, StepKind.plan)
    m = PLAN.search(got[0]) if got else None
    if got is None or m is None:
        return None
    people = m.group(1).split(", ")
    if len(people) < 2:
        return None
    line = m.group(0).splitlines()[0]
    thought = got[0].replace(line, line.replace(m.group(1), ", ".join(people[:-1])))
    return Generated(action(thought, got[1], got[2]), f"plans to read only {', '.join(people[:-1])}'s calendars, "
                     f"leaving {people[-1]} out")


def _a5(inp: GenInput) -> Generated | None:
    """The solver finishes at its first reply, before reading any calendar."""
    if _react(inp, StepKind.plan) is None:
        return None
    return Generated(action("These people keep their afternoons open; no need to read the calendars.", "finish", {}),
                     "finishes before reading any calendar")


def _colleague(inp: GenInput) -> str | None:
    q = read_question(inp.task_query)
    known = inp.distractors[2] if len(inp.distractors) > 2 else []
    others = [p for p in known if q is None or p not in q.people]
    return others[0] if others else None


def _a2(inp: GenInput) -> Generated | None:
    """A calendar call for the colleague who is not invited, or `free_slots` with another duration."""
    got = _react(inp, StepKind.plan, StepKind.tool_call)
    if got is None:
        return None
    thought, tool, args = got
    if tool == "calendar" and "person" in args:
        colleague = _colleague(inp)
        if colleague is None or colleague == args["person"]:
            return None
        return Generated(action(thought, tool, {**args, "person": colleague}),
                         f"reads {colleague}'s calendar (not invited) in place of {args['person']}'s")
    if tool == "free_slots" and isinstance(args.get("minutes"), int):
        minutes = other_duration(args["minutes"])
        thought = thought.replace(f"of {args['minutes']} minutes", f"of {minutes} minutes")
        return Generated(action(thought, tool, {**args, "minutes": minutes}),
                         f"asks for free slots of {minutes} minutes where the meeting lasts {args['minutes']}")
    return None


def _a1(inp: GenInput) -> Generated | None:
    """`free_slots` over the meetings read so far, where the next invitee's calendar was due."""
    got = _react(inp, StepKind.tool_call)
    q = read_question(inp.task_query)
    if got is None or got[1] != "calendar" or q is None:
        return None
    seen = [p.text for p in inp.prefix if p.text.endswith("calendar:") or "'s calendar:\n" in p.text]
    if not seen:
        return None
    busy = busy_text([m for text in seen for m in _day_line(text, q.day)])
    return Generated(action(f"Step 2 of the plan: the free slots of {q.minutes} minutes around their {q.day} meetings.",
                            "free_slots", {"busy": busy, "minutes": q.minutes}),
                     f"calls free_slots where the plan's next step is reading {got[2].get('person')}'s calendar")


def _day_line(text: str, day: str) -> list[tuple[int, int]]:
    for line in text.splitlines():
        if line.startswith(f"{day}: "):
            return intervals(line)
    return []


def _a3(inp: GenInput) -> Generated | None:
    """A ReAct reply that calls a tool the program does not have."""
    got = _react(inp, StepKind.plan, StepKind.tool_call)
    q = read_question(inp.task_query)
    if got is None or q is None:
        return None
    args = {"people": list(q.people), "day": q.day, "minutes": q.minutes}
    return Generated(action(got[0], "find_meeting_time", args), "calls find_meeting_time, a tool the program does not have")


def _slots(inp: GenInput) -> tuple[str, dict, list[tuple[int, int]], int, str] | None:
    """(thought, arguments, busy intervals, minutes, family) of a `free_slots` call."""
    got = _react(inp, StepKind.tool_call)
    q = read_question(inp.task_query)
    if got is None or got[1] != "free_slots" or q is None or not isinstance(got[2].get("minutes"), int):
        return None
    return got[0], got[2], intervals(str(got[2].get("busy", ""))), got[2]["minutes"], q.family


def _start(busy: list[tuple[int, int]], minutes: int, family: str) -> int | None:
    return pick(free_windows(busy, minutes), family, minutes)


def _v1(inp: GenInput) -> Generated | None:
    """`free_slots` without one of the meetings read earlier (one whose absence moves the answer)."""
    got = _slots(inp)
    if got is None:
        return None
    thought, args, busy, minutes, family = got
    right = _start(busy, minutes, family)
    lost = [m for m in busy if _start([b for b in busy if b != m], minutes, family) != right]
    if not lost:
        return None
    gone = inp.rng.choice(lost)
    kept = busy_text([b for b in busy if b != gone])
    return Generated(action(thought, "free_slots", {**args, "busy": kept}),
                     f"leaves out the {hhmm(gone[0])}-{hhmm(gone[1])} meeting read earlier in the run")


def _r1(inp: GenInput) -> Generated | None:
    """`free_slots` with a meeting that no calendar holds, over the right start."""
    got = _slots(inp)
    if got is None:
        return None
    thought, args, busy, minutes, family = got
    right = _start(busy, minutes, family)
    if right is None:
        return None
    made = (right, min(right + 30, CLOSE))
    text = f"{hhmm(made[0])}-{hhmm(made[1])}"
    if text in inp.prefix_text() or _start(busy + [made], minutes, family) == right:
        return None
    return Generated(action(thought, "free_slots", {**args, "busy": busy_text(busy + [made])}),
                     f"adds a {text} meeting that no calendar holds")


def _extract(inp: GenInput) -> tuple[str, str] | None:
    """(reasoning, answer time) of the extracted answer."""
    if inp.kind != StepKind.final_answer:
        return None
    f = fields(inp.text)
    answer = f.get("answer", "")
    if not answer.startswith("ANSWER: "):
        return None
    return f.get("reasoning", ""), answer.removeprefix("ANSWER: ")


def _minutes(time: str) -> int:
    h, m = time.split(":")
    return int(h) * 60 + int(m)


def _r2(inp: GenInput) -> Generated | None:
    """The answer is taken from another free window than the one the question asks for."""
    got = _extract(inp)
    if got is None:
        return None
    reasoning, time = got
    starts = [hhmm(s) for s, _ in intervals(reasoning.split(" are ", 1)[-1])]
    others = [s for s in starts if s != time]
    if not others:
        return None
    new = others[-1] if "latest" in reasoning else others[0]
    return Generated(render({"reasoning": reasoning.replace(f"is {time}.", f"is {new}."), "answer": f"ANSWER: {new}"}),
                     f"answers {new}, the start of another free window, where the question's start is {time}")


def _r3(inp: GenInput) -> Generated | None:
    """The start is written down half an hour off."""
    got = _extract(inp)
    if got is None:
        return None
    reasoning, time = got
    at = _minutes(time)
    new = hhmm(at + 30 if at + 30 < CLOSE else at - 30)
    if _minutes(new) < OPEN:
        return None
    return Generated(render({"reasoning": reasoning, "answer": f"ANSWER: {new}"}), f"answers {new} where it found {time}")


def _a4(inp: GenInput) -> Generated | None:
    """The answer line is not a bare HH:MM time."""
    got = _extract(inp)
    if got is None:
        return None
    reasoning, time = got
    at = _minutes(time)
    twelve = f"{(at // 60 - 1) % 12 + 1}:{at % 60:02d} {'pm' if at >= 12 * 60 else 'am'}"
    new = inp.rng.choice([twelve, time.replace(":", "."), f"{time} ({_LUNCH_TEXT} onwards)" if at >= 780 else f"{time} h"])
    return Generated(render({"reasoning": reasoning, "answer": f"ANSWER: {new}"}), f"gives the start as {new!r}, not HH:MM")


MUTATORS = {"R.1": [_r1], "R.2": [_r2], "R.3": [_r3], "R.4": [_r4], "PL.1": [_pl1], "A.1": [_a1], "A.2": [_a2],
            "A.3": [_a3], "A.4": [_a4], "A.5": [_a5], "V.1": [_v1]}
