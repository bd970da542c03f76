"""The simulated agents of `math_society`: functions of the chat request CAMEL's role-playing agents send.

- **task_specifier** (CAMEL's `TaskSpecifyAgent`; its request is CAMEL's
  task-specify prompt around the question) makes the problem specific: the
  question, a `Given:` line with the question's own figures, a `Look up:`
  line with the facts the sheet must give and a `Find:` line with what is
  asked;
- **instructor** (the AI user; it reads the specified task in CAMEL's user
  system prompt, and the solver's replies as its user messages) first writes
  its plan (the look-ups, the formula the `Find:` quantity needs, the answer)
  and instructs the look-ups, then instructs the calculation of the plan's
  formula on the figures (the `Given:` line's and the solver's report's),
  and says `CAMEL_TASK_DONE` once the solver reports its result. It follows
  its own plan, and asks again (at most twice) for what a reply lacks;
- **solver** (the AI assistant, with the `lookup` and `calculate` tools)
  carries out each instruction with its tools and reports `Solution:` lines
  (`<fact>: <value>` for the facts it was asked for, `<expression> =
  <value>` for a calculation), each ending with CAMEL's `Next request.`;
  told the task is done, it answers with its last result on an `ANSWER:` line.

Recovered mistakes (rate `noise`): the solver's first look-up writes the
fact's name capitalised (`lookup` refuses it and lists the facts; it looks
again), and the instructor writes its first calculation with a `×` sign
(`calculate` refuses it, the solver reports so, and the instructor writes it
again).
"""

from __future__ import annotations

import re
from typing import Any

from ..agents_desk import wire
from ..agents_desk.wire import render_call
from ..framework import chat_turn, message_text
from .world import evaluate_formula, formula_of, read_fact

AGENTS = ("task_specifier", "instructor", "solver")
DONE = "CAMEL_TASK_DONE"  # CAMEL's role-playing protocol: the AI user's word that the task is completed
NEXT = "Next request."
TIMES = "\u00d7"
_SPEC_TASK = re.compile(r"complete: (.+)\.\nPlease make it more specific", re.S)
_TASK = re.compile(r"Here is the task: (.+?)\. Never forget our task!", re.S)
GIVEN = re.compile(r"^Given: (.+)$", re.M)
LOOKUP = re.compile(r"^Look up: (.+)$", re.M)
FIND = re.compile(r"^Find: (.+)$", re.M)
PLAN_FORMULA = re.compile(r"^2\. calculate: (.+)$", re.M)
PLAN_FACTS = re.compile(r"^1\. look up (.+)$", re.M)
LOOKUP_ORDER = re.compile(r"^Instruction: Look up these facts with the lookup tool: (.+)\.$", re.M)
CALC_ORDER = re.compile(r"^Instruction: Calculate (.+) with the calculate tool\.$", re.M)
REPORT_LINE = re.compile(r"^(.+?): (-?\d+)$", re.M)
RESULT = re.compile(r"^Solution: (.+) = (-?\d+(?:\.\d+)?)$", re.M)
_PAIR = re.compile(r"^(.+?) = (\d+)$")
# The question templates' figures, per family (world.make_task).
_CHANGE = re.compile(r"buys (\d+) (.+?)s and (\d+) (.+?)s at the school shop and pays with a (\d+)-euro note")
_PACKS = re.compile(r"needs (\d+) (.+?)s for the art class")
_WAGES = re.compile(r"works (\d+) hours on Saturday and (\d+) hours on Sunday at the fair as a (.+?), gets .*? pays (\d+) "
                    r"euros for the bus")


class Call(wire.Call):
    errors = ("error", "Tool execution failed")


def history(messages: list[dict[str, Any]]) -> list[Call]:
    return wire.history(messages, Call)


def specify(question: str) -> tuple[list[tuple[str, int]], list[str], str] | None:
    """(the given figures, the facts to look up, what is asked) of a question, or None if it is none of ours."""
    if m := _CHANGE.search(question):
        a, first, b, second, note = m.groups()
        return ([(f"{first}s", int(a)), (f"{second}s", int(b)), ("note", int(note))],
                [f"{first} price", f"{second} price"], "the change")
    if m := _PACKS.search(question):
        return [(f"{m.group(2)}s", int(m.group(1)))], [f"{m.group(2)} pack size", f"{m.group(2)} pack price"], "the cost of the packs"
    if m := _WAGES.search(question):
        h1, h2, job, bus = m.groups()
        return ([("saturday hours", int(h1)), ("sunday hours", int(h2)), ("bus fare", int(bus))],
                [f"{job} hourly wage", f"{job} daily bonus"], "the money left")
    return None


def specified_text(question: str, given: list[tuple[str, int]], facts: list[str], find: str) -> str:
    return "\n".join([f"Problem: {question}", "Given: " + "; ".join(f"{n} = {v}" for n, v in given),
                      "Look up: " + "; ".join(facts), f"Find: {find}"])


def read_specified(task: str) -> tuple[list[tuple[str, int]], list[str], str] | None:
    """What the instructor reads of the specified task: (given figures, facts, the asked quantity)."""
    given, lookup, find = GIVEN.search(task), LOOKUP.search(task), FIND.search(task)
    if given is None or lookup is None or find is None:
        return None
    pairs = [_PAIR.match(p.strip()) for p in given.group(1).split(";")]
    if not all(pairs):
        return None
    return ([(p.group(1), int(p.group(2))) for p in pairs if p], [f.strip() for f in lookup.group(1).split(";")],
            find.group(1).strip())


def lookup_instruction(facts: list[str], plan: str = "") -> str:
    return (f"Instruction: Look up these facts with the lookup tool: {'; '.join(facts)}.\n"
            f"Input: {plan or 'None'}")


def calc_instruction(expression: str, figures: dict[str, int]) -> str:
    return (f"Instruction: Calculate {expression} with the calculate tool.\n"
            "Input: " + "; ".join(f"{n} = {v}" for n, v in figures.items()))


def plan_text(facts: list[str], formula: str) -> str:
    return "\n".join(["Plan:", f"1. look up {'; '.join(facts)}", f"2. calculate: {formula}", "3. answer with the result"])


class TeamPolicy:
    """The simulated task specifier, instructor and solver: `respond(agent, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages, user, chance = chat_turn(agent, request, sim)
        if agent == "task_specifier":
            return self.task_specifier(user)
        system = message_text(messages[0].get("content")) if messages else ""
        task = _TASK.search(system)
        if agent == "instructor":
            return self.instructor(task.group(1) if task else "", messages, chance)
        if agent == "solver":
            return self.solver(messages, chance)
        raise ValueError(f"math_society: no simulated agent {agent!r}")

    # -- task specifier ---------------------------------------------------------------
    @staticmethod
    def task_specifier(prompt: str) -> str:
        m = _SPEC_TASK.search(prompt)
        question = m.group(1) if m else prompt
        found = specify(question)
        if found is None:
            return f"Problem: {question}"
        return specified_text(question.split(" The figures not given")[0], *found)

    # -- instructor (CAMEL's AI user) --------------------------------------------------
    @staticmethod
    def instructor(task: str, messages: list[dict[str, Any]], chance) -> str:
        spec = read_specified(task)
        if spec is None:
            return DONE  # nothing it can instruct: the task as specified names no figures
        given, facts, find = spec
        mine = [message_text(m.get("content")) for m in messages if m.get("role") == "assistant"]
        # the solver's replies, after CAMEL's opening message
        replies = [message_text(m.get("content")) for m in messages if m.get("role") == "user"][1:]
        if not mine:
            formula = formula_of(find, [n for n, _ in given], facts)
            if formula is None:
                return DONE
            return lookup_instruction(facts, plan_text(facts, formula))
        # once made, its plan is what it follows: the facts it looks up and the formula
        plan, planned = PLAN_FORMULA.search(mine[0]), PLAN_FACTS.search(mine[0])
        formula = plan.group(1) if plan else formula_of(find, [n for n, _ in given], facts) or ""
        facts = [f.strip() for f in planned.group(1).split(";")] if planned else facts
        reported = {name: int(v) for r in replies for name, v in REPORT_LINE.findall(r) if name in facts}
        last = mine[-1]
        if LOOKUP_ORDER.search(last):
            missing = [f for f in facts if f not in reported]
            if missing:
                lookups = sum(1 for i in mine if LOOKUP_ORDER.search(i))
                return lookup_instruction(missing) if lookups < 3 else DONE
        if CALC_ORDER.search(last):
            if replies and RESULT.search(replies[-1]):
                return DONE
            if sum(1 for i in mine if CALC_ORDER.search(i)) >= 3:
                return DONE
        figures = {**dict(given), **{f: reported[f] for f in facts if f in reported}}
        expression = evaluate_formula(formula, figures)
        if not any(CALC_ORDER.search(i) for i in mine) and chance("times-sign"):
            expression = expression.replace(" * ", f" {TIMES} ")
        return calc_instruction(expression, figures)

    # -- solver (CAMEL's AI assistant) -------------------------------------------------
    @staticmethod
    def solver(messages: list[dict[str, Any]], chance) -> str:
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not users:
            return f"Solution: I have no instruction yet.\n{NEXT}"
        at = users[-1]
        instruction = message_text(messages[at].get("content"))
        calls = [c for c in history(messages) if c.position > at]
        if DONE in instruction:
            mine = [message_text(m.get("content")) for m in messages if m.get("role") == "assistant"]
            results = [r for t in mine for r in RESULT.findall(t)]
            return f"The task is done: {results[-1][0]} = {results[-1][1]}.\nANSWER: {results[-1][1]}" if results else \
                "The task ended before any result was computed."
        if m := LOOKUP_ORDER.search(instruction):
            first_ever = not [c for c in history(messages) if c.tool == "lookup"]
            return TeamPolicy._lookups([f.strip() for f in m.group(1).split(";")], calls, first_ever and chance("capitalised"))
        if m := CALC_ORDER.search(instruction):
            expression = m.group(1)
            done = [c for c in calls if c.tool == "calculate"]
            if not done:
                return render_call("calculate", {"expression": expression})
            if not done[-1].ok:
                return f"Solution: The calculator could not evaluate it: {done[-1].result}\n{NEXT}"
            return f"Solution: {done[-1].args.get('expression', expression)} = {done[-1].result}\n{NEXT}"
        return f"Solution: I cannot carry out this instruction with my tools.\n{NEXT}"

    @staticmethod
    def _lookups(facts: list[str], calls: list[Call], sloppy: bool) -> str:
        """The next look-up of this instruction, or the report of what the look-ups gave, fact by fact in order."""
        lookups = [c for c in calls if c.tool == "lookup"]
        lines: list[str] = []
        for fact in facts:
            tries = 0
            while lookups and tries < 3:
                call = lookups.pop(0)
                tries += 1
                found = read_fact(call.result or "") if call.ok else None
                if found is not None:
                    lines.append(f"{fact}: {found[1]}")  # the fact it was asked for, the value it looked up
                    break
            else:
                if tries >= 3:
                    lines.append(f"{fact}: not found ({call.result})")
                    continue
                name = fact.capitalize() if sloppy and not calls else fact
                return render_call("lookup", {"name": name})
        return "Solution:\n" + "\n".join(lines) + f"\n{NEXT}"
