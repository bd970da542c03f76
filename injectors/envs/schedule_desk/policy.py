"""The simulated solver of `schedule_desk`: a function of the chat request DSPy's `ReAct` sends through litellm.

DSPy's `ChatAdapter` writes each request as a system message (the
signature's fields and instructions) and a user message of `[[ ## field ## ]]`
sections: the question, then the trajectory so far (`thought_i`,
`tool_name_i`, `tool_args_i`, `observation_i`). Two predictors ask: `react`
(outputs `next_thought`, `next_tool_name`, `next_tool_args`) at each turn,
and `extract` (a `ChainOfThought`: `reasoning`, `answer`) once at the end.
The reply is the output fields in the same sections. A competent solver:

- **react** writes a plan in its first thought (the people and day, the
  duration, the start the question asks for) and follows it: it reads each
  invitee's calendar in the plan's order (taking the i-th calendar it read as
  the plan's i-th person's, and that calendar's line of the plan's day), then
  passes all their meetings to `free_slots` with the plan's duration, then
  calls `finish`;
- **extract** reads the last `free_slots` windows and answers the start the
  plan asks for on an `ANSWER:` line.

Recovered mistake (rate `noise`): the solver's first calendar call misspells
the person's name; the tool says no such calendar and the solver asks again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.replay.session import canonical

from ..framework import message_text, noise_chance
from .world import GOALS, Question, busy_text, day_meetings, hhmm, intervals, pick, read_question

AGENT = "solver"
FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n*\[\[ ## \w+ ## \]\]|\n\nRespond with the corresponding|\Z)", re.S)
# The plan's lines (the solver's first thought): who, which day, how long, and which start.
PLAN = re.compile(r"^1\. calendar: ([\w, ]+) \((\w+)\)\n2\. free_slots: their \w+ meetings, (\d+) minutes\n3\. answer: (.+)$", re.M)


@dataclass
class Turn:
    """One turn of the trajectory: the thought, the tool, its arguments and what it returned."""

    thought: str
    tool: str
    args: dict[str, Any]
    observation: str = ""

    @property
    def ok(self) -> bool:
        return not self.observation.startswith(("error", "Execution error"))


@dataclass
class Request:
    predictor: str  # "react" or "extract"
    question: str
    turns: list[Turn] = field(default_factory=list)


def fields(text: str) -> dict[str, str]:
    """A ChatAdapter message's `[[ ## name ## ]]` sections (the trajectory's own sections flattened in)."""
    return {m.group(1): m.group(2).strip() for m in FIELD.finditer(text)}


def turns_of(sections: dict[str, str]) -> list[Turn]:
    out = []
    i = 0
    while f"tool_name_{i}" in sections:
        try:
            args = json.loads(sections.get(f"tool_args_{i}", "{}"))
        except json.JSONDecodeError:
            args = {}
        out.append(Turn(sections.get(f"thought_{i}", ""), sections[f"tool_name_{i}"], args if isinstance(args, dict) else {},
                        sections.get(f"observation_{i}", "")))
        i += 1
    return out


def read_request(request: dict[str, Any]) -> Request:
    messages = request.get("messages") or []
    system = message_text(messages[0].get("content")) if messages else ""
    user = "\n".join(message_text(m.get("content")) for m in messages if m.get("role") == "user")
    sections = fields(user)
    predictor = "react" if "`next_thought`" in system else "extract"
    return Request(predictor, sections.get("question", ""), turns_of(sections))


def render(values: dict[str, str]) -> str:
    """A reply in ChatAdapter's form: each output field's section, then `[[ ## completed ## ]]`."""
    return "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in values.items()) + "[[ ## completed ## ]]"


def action(thought: str, tool: str, args: dict[str, Any]) -> str:
    return render({"next_thought": thought, "next_tool_name": tool, "next_tool_args": json.dumps(args)})


def plan_text(q: Question) -> str:
    return "\n".join(["Plan:", f"1. calendar: {', '.join(q.people)} ({q.day})",
                      f"2. free_slots: their {q.day} meetings, {q.minutes} minutes", f"3. answer: {GOALS[q.family]}"])


def read_plan(thought: str) -> Question | None:
    m = PLAN.search(thought)
    if m is None:
        return None
    family = next((f for f, g in GOALS.items() if g == m.group(4)), "earliest")
    return Question(tuple(p for p in m.group(1).split(", ") if p), m.group(2), int(m.group(3)), family)


def misspelt(name: str) -> str:
    return name + name[-1]


class SolverPolicy:
    """The simulated solver: `respond(agent, request, sim) -> text` (a ChatAdapter reply)."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        if agent != AGENT:
            raise ValueError(f"schedule_desk: no simulated agent {agent!r}")
        chance = noise_chance(sim, agent, canonical([m.get("content") for m in request.get("messages") or []]))
        asked = read_request(request)
        if asked.predictor == "extract":
            return self.extract(asked)
        return self.react(asked, chance)

    @staticmethod
    def plan(asked: Request) -> Question | None:
        """The plan the solver follows: its first thought's, once written; else its reading of the question."""
        if asked.turns:
            return read_plan(asked.turns[0].thought) or read_question(asked.question)
        return read_question(asked.question)

    def react(self, asked: Request, chance) -> str:
        q = self.plan(asked)
        if q is None:
            return action("I cannot tell who is to meet, or when.", "finish", {})
        turns = asked.turns
        read = [t for t in turns if t.tool == "calendar" and t.ok]
        if len(read) < len(q.people):
            failed = [t for t in turns if t.tool == "calendar" and not t.ok]
            if len(failed) >= 3:
                return action("I cannot read the calendars I need.", "finish", {})
            person = q.people[len(read)]
            name = misspelt(person) if not failed and chance("misspelt-name") else person
            if not turns:
                return action(f"{plan_text(q)}\nI read {person}'s calendar first.", "calendar", {"person": name})
            return action(f"Step 1 of the plan: {person}'s calendar.", "calendar", {"person": name})
        slots = [t for t in turns if t.tool == "free_slots"]
        if not slots or (not slots[-1].ok and len(slots) < 3):
            busy = busy_text([m for t in read for m in day_meetings(t.observation, q.day)])
            return action(f"Step 2 of the plan: the free slots of {q.minutes} minutes around their {q.day} meetings.",
                          "free_slots", {"busy": busy, "minutes": q.minutes})
        return action("I have the free windows; the answer can be read from them.", "finish", {})

    def extract(self, asked: Request) -> str:
        q = self.plan(asked)
        slots = [t for t in asked.turns if t.tool == "free_slots" and t.ok]
        if q is None or not slots:
            return render({"reasoning": "The trajectory holds no free windows to choose from.",
                           "answer": "I could not find a time that suits everyone."})
        windows = intervals(slots[-1].observation) if slots[-1].observation.startswith("Free windows") else []
        start = pick(windows, q.family, q.minutes)
        if start is None:
            return render({"reasoning": "No free window fits the meeting.", "answer": "There is no such time."})
        listed = ", ".join(f"{hhmm(s)}-{hhmm(e)}" for s, e in windows)
        return render({"reasoning": f"The common free windows of at least {q.minutes} minutes on {q.day} are {listed}; "
                                    f"{GOALS[q.family]} is {hhmm(start)}.",
                       "answer": f"ANSWER: {hhmm(start)}"})
