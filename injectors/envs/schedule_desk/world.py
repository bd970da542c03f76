"""The calendars behind `schedule_desk`: a task's people and meetings, its question families, the tools' texts and the
reference answers.

A task asks for a meeting time three people can all make on one day (calendar
scheduling under constraints, the kind NATURAL PLAN's calendar-scheduling
tasks stand for). Each task has four people (the three invited and a
colleague who is not), each with two to three meetings on Monday and on
Tuesday, on a half-hour grid inside the working day 09:00-17:00. The
families: `earliest` (the earliest start of a common free slot of N
minutes), `latest` (the latest start of one that ends by 17:00) and
`after_lunch` (the earliest start at or after 13:00). A task is drawn again
until its answer exists and changes when the other day is read, when the
last invitee is left out, and when the duration is another.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

FAMILIES = ("earliest", "latest", "after_lunch")
PEOPLE = ("Ana", "Ben", "Chloe", "Dev", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun")
DAYS = ("Monday", "Tuesday")
DURATIONS = (30, 60, 90)
TOPICS = ("Standup", "Review", "1:1", "Planning", "Interview", "Demo", "Workshop", "Sync")
OPEN, CLOSE, LUNCH = 9 * 60, 17 * 60, 13 * 60
GOALS = {"earliest": "the earliest start", "latest": "the latest start", "after_lunch": "the earliest start from 13:00"}
INTERVAL = re.compile(r"(\d{2}):(\d{2})-(\d{2}):(\d{2})")

Interval = tuple[int, int]


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def intervals(text: str) -> list[Interval]:
    """The `HH:MM-HH:MM` intervals a text names, in order."""
    return [(int(a) * 60 + int(b), int(c) * 60 + int(d)) for a, b, c, d in INTERVAL.findall(text)]


def busy_text(busy: list[Interval]) -> str:
    """Meetings as the solver passes them to `free_slots`: sorted, each once, comma-separated."""
    return ", ".join(f"{hhmm(s)}-{hhmm(e)}" for s, e in sorted(set(busy)))


def free_windows(busy: list[Interval], minutes: int) -> list[Interval]:
    """The free windows of the working day of at least `minutes` between the `busy` intervals."""
    out, start = [], OPEN
    for s, e in sorted(busy):
        if s - start >= minutes:
            out.append((start, s))
        start = max(start, e)
    if CLOSE - start >= minutes:
        out.append((start, CLOSE))
    return out


def pick(windows: list[Interval], family: str, minutes: int) -> int | None:
    """The start the family asks for among the free windows, or None."""
    if not windows:
        return None
    if family == "earliest":
        return windows[0][0]
    if family == "latest":
        return windows[-1][1] - minutes
    return next((max(s, LUNCH) for s, e in windows if max(s, LUNCH) + minutes <= e), None)


@dataclass(frozen=True)
class Question:
    people: tuple[str, ...]
    day: str
    minutes: int
    family: str


def question_text(q: Question) -> str:
    names = f"{', '.join(q.people[:-1])} and {q.people[-1]}"
    when = {"earliest": "the earliest time", "latest": "the latest time",
            "after_lunch": "the earliest time from 13:00"}[q.family]
    return (f"Find {when} on {q.day} when {names} are all free for a {q.minutes}-minute meeting, within the working "
            f"day 09:00-17:00. End with a line 'ANSWER: HH:MM' (the start time).")


_QUESTION = re.compile(r"Find the (earliest|latest) time( from 13:00)? on (\w+) when ([\w, ]+?) are all free for a (\d+)-minute")


def read_question(text: str) -> Question | None:
    m = _QUESTION.search(text)
    if m is None:
        return None
    family = "after_lunch" if m.group(2) else m.group(1)
    people = tuple(p for p in re.split(r", | and ", m.group(4)) if p)
    return Question(people, m.group(3), int(m.group(5)), family)


def calendar_text(person: str, calendar: dict[str, list[list[Any]]]) -> str:
    """What the `calendar` tool shows of a person: both days, one line each."""
    lines = [f"{day}: " + "; ".join(f"{hhmm(s)}-{hhmm(e)} {topic}" for s, e, topic in calendar[day]) for day in DAYS]
    return f"{person}'s calendar:\n" + "\n".join(lines)


def day_meetings(calendar_output: str, day: str) -> list[Interval]:
    """The meetings of `day` in a `calendar` tool output."""
    m = re.search(rf"^{day}: (.*)$", calendar_output, re.M)
    return intervals(m.group(1)) if m else []


def busy_of(world: dict[str, Any], people: tuple[str, ...] | list[str], day: str) -> list[Interval]:
    return [(s, e) for p in people for s, e, _ in world["calendars"][p][day]]


def answer_for(world: dict[str, Any], people: tuple[str, ...] | list[str], day: str, minutes: int, family: str) -> int | None:
    return pick(free_windows(busy_of(world, people, day), minutes), family, minutes)


def _meetings(rng: random.Random) -> list[list[Any]]:
    out: list[list[Any]] = []
    for start in sorted(rng.sample(range(OPEN, CLOSE - 30, 30), rng.randint(2, 3))):
        end = min(start + rng.choice((30, 60, 90)), CLOSE)
        if not out or start >= out[-1][1]:
            out.append([start, end, rng.choice(TOPICS)])
    return out


def _distinct(world: dict[str, Any], q: Question) -> bool:
    """The answer exists, and reading the other day, leaving out the last invitee or another duration changes it."""
    right = answer_for(world, q.people, q.day, q.minutes, q.family)
    other_day = DAYS[1 - DAYS.index(q.day)]
    other = [answer_for(world, q.people, other_day, q.minutes, q.family),
             answer_for(world, q.people[:-1], q.day, q.minutes, q.family),
             answer_for(world, q.people, q.day, other_duration(q.minutes), q.family)]
    return right is not None and right != OPEN and all(a != right for a in other)


def other_duration(minutes: int) -> int:
    """The duration a misread request would use instead (the next one of 30, 60, 90, round)."""
    return DURATIONS[(DURATIONS.index(minutes) + 1) % len(DURATIONS)] if minutes in DURATIONS else minutes + 30


def make_task(rng: random.Random, family: str) -> tuple[str, dict[str, Any]]:
    """(the question, the calendars and question) of one task of `family`."""
    while True:
        people = rng.sample(PEOPLE, 4)
        world: dict[str, Any] = {"calendars": {p: {d: _meetings(rng) for d in DAYS} for p in people}}
        q = Question(tuple(people[:3]), rng.choice(DAYS), rng.choice(DURATIONS), family)
        if _distinct(world, q):
            world["question"] = {"people": list(q.people), "day": q.day, "minutes": q.minutes, "family": family}
            world["colleague"] = people[3]
            return question_text(q), world


def answer_of(world: dict[str, Any]) -> str:
    q = world["question"]
    start = answer_for(world, q["people"], q["day"], q["minutes"], q["family"])
    assert start is not None
    return hhmm(start)
