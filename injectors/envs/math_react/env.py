"""`math_react`: one ReAct agent with a calculator and a unit converter solves word problems.

Each task is a generated word problem that mixes units (feet and metres,
miles and kilometres, pounds and kilograms, gallons and litres, Fahrenheit and
Celsius, hours and minutes), with a distractor sentence carrying numbers that
play no part in the answer. Seven problem families (paint, trip, fuel, lift,
oven, pace, tank) need between two and five tool calls.

Tools (deterministic functions of the argument):

- `calculate`: `+ - * / ( )` over numbers → the value (4 decimals at most);
- `convert`: `<number> <unit> to <unit>` → `<number> <unit> = <value> <unit>`.

The agent (simulated policy; a real LLM gets the same prompt):

1. on half of the problems, first a `Known:` message restating the problem
   sentence by sentence (it plans from this restatement, so a misstated number
   is carried forward); then a numbered plan whose lines name each intermediate value
   (`2. convert 9 ft to m -> height`, `3. calculate width * height -> area`,
   `5. answer litres in L`); the agent follows the plan it wrote, so a bad plan
   is carried forward;
2. one ReAct step per plan line (`Step k: ...` + `Action: <tool>`), resolving
   names with the values it has: a tool output, or a `Note: name = value` it
   wrote itself (it writes such notes now and then, and trusts them);
3. on half of the problems (decided by the problem, not the run), a check: it
   recomputes the last calculation from the tools' outputs (not its notes) and,
   if that disagrees, uses the checked value; this is the verification that
   catches a misnoted value that feeds the last calculation;
4. `Answer: <value> <unit>` rounded to 2 decimals.

When a step fails twice, on some problems (60 %, decided by the problem) it
re-reads the problem and writes a revised plan (once), which it then follows;
on the others it gives up.

Recovered mistakes in seeds (rate `noise`): a misspelt unit or a calculator
typo that the tool rejects and the agent retypes.
"""

from __future__ import annotations

import random
import re

from faultlens.middleware.model.trace import AgentInfo, Outcome, StepKind, Task

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
from . import mistakes
from .world import (
    UNIT_GROUPS,
    UNITS,
    PlanLine,
    calculate,
    convert,
    fmt,
    parse_plan,
    render_plan,
    tool_value,
)

_NAMES = ["Nadia", "Ola", "Tomas", "Priya", "Kenji", "Lucia", "Amara", "Ivan", "Sofia", "Emeka"]
_DISTRACT = [
    "{name}'s family moved house in {year} and paid ${price} for the removal van.",
    "{name} has done this {times} times before.",
    "Last month the job took {times} hours longer.",
    "The shop is {dist} km from {name}'s home.",
    "A neighbour quoted ${price} for the same job.",
]


def _r(rng: random.Random, lo: float, hi: float, step: float) -> float:
    n = int(round((hi - lo) / step))
    value = lo + step * rng.randint(0, n)
    return round(value, 2)


def _n(value: float) -> str:
    return fmt(value)


def _problem(rng: random.Random, family: str) -> tuple[str, list[PlanLine]]:
    name = rng.choice(_NAMES)
    if family == "paint":
        w, h, c, k = _r(rng, 8, 30, 0.5), _r(rng, 7, 12, 0.5), _r(rng, 6, 12, 1), rng.choice([1, 2, 3])
        q = (f"{name} is painting a wall {_n(w)} ft wide and {_n(h)} ft tall. One litre of paint covers {_n(c)} square metres. "
             f"{{distractor}} How many litres of paint are needed for {k} coat{'s' if k > 1 else ''}?")
        plan = [("convert", f"{_n(w)} ft to m", "width"), ("convert", f"{_n(h)} ft to m", "height"),
                ("calculate", "width * height", "area"), ("calculate", f"area * {k} / {_n(c)}", "litres"), ("answer", "litres", "L")]
    elif family == "trip":
        d1, v1, d2, v2 = _r(rng, 10, 90, 1), _r(rng, 30, 70, 5), _r(rng, 10, 120, 1), _r(rng, 40, 110, 10)
        q = (f"{name} drives {_n(d1)} miles at {_n(v1)} mph and then {_n(d2)} km at {_n(v2)} km/h. {{distractor}} "
             f"How many minutes does the whole trip take?")
        plan = [("calculate", f"{_n(d1)} / {_n(v1)}", "hours_first"), ("calculate", f"{_n(d2)} / {_n(v2)}", "hours_second"),
                ("calculate", "hours_first + hours_second", "hours"), ("convert", "hours h to min", "minutes"),
                ("answer", "minutes", "min")]
    elif family == "fuel":
        x, d, n, p = _r(rng, 5, 12, 0.5), _r(rng, 20, 80, 1), rng.randint(2, 6), _r(rng, 3, 5, 0.05)
        q = (f"A van uses {_n(x)} litres of fuel per 100 km. {name}'s delivery route is {_n(d)} miles long and the van drives "
             f"it {n} times a week. Fuel costs ${_n(p)} per gallon. {{distractor}} What does a week of fuel cost, in dollars?")
        plan = [("convert", f"{_n(d)} mi to km", "route_km"), ("calculate", f"route_km * {n} * {_n(x)} / 100", "litres"),
                ("convert", "litres L to gal", "gallons"), ("calculate", f"gallons * {_n(p)}", "cost"), ("answer", "cost", "USD")]
    elif family == "lift":
        n, w, c, cap = rng.randint(6, 30), _r(rng, 5, 40, 0.5), _r(rng, 20, 60, 1), _r(rng, 400, 900, 50)
        q = (f"A crate holds {n} parcels of {_n(w)} lb each, and the empty crate weighs {_n(c)} kg. {name}'s lift can carry "
             f"{_n(cap)} kg. {{distractor}} How many kilograms of the lift's capacity are left when the full crate is on it?")
        plan = [("calculate", f"{n} * {_n(w)}", "pounds"), ("convert", "pounds lb to kg", "parcels_kg"),
                ("calculate", f"{_n(cap)} - parcels_kg - {_n(c)}", "spare"), ("answer", "spare", "kg")]
    elif family == "oven":
        cc = rng.choice([160, 170, 180, 190, 200, 220])
        f = round(cc * 9 / 5 + 32 + rng.randint(8, 60))
        q = (f"A recipe says to bake at {cc} °C, but {name}'s oven dial is in Fahrenheit and is set to {f} °F. {{distractor}} "
             f"By how many degrees Celsius is the oven too hot?")
        plan = [("convert", f"{f} F to C", "oven_c"), ("calculate", f"oven_c - {cc}", "excess"), ("answer", "excess", "C")]
    elif family == "pace":
        d, m, s = _r(rng, 3, 14, 0.5), rng.randint(20, 110), rng.randint(1, 59)
        q = (f"{name} ran {_n(d)} miles in {m} minutes and {s} seconds. {{distractor}} What was the average speed in km/h?")
        plan = [("convert", f"{_n(d)} mi to km", "km"), ("calculate", f"{m} + {s} / 60", "minutes"),
                ("convert", "minutes min to h", "hours"), ("calculate", "km / hours", "speed"), ("answer", "speed", "km/h")]
    else:  # tank
        g, r = rng.randint(40, 400), rng.randint(50, 900)
        q = (f"{name}'s water tank holds {g} gallons. The tap fills it at {r} mL per second. {{distractor}} "
             f"How many hours does it take to fill the empty tank?")
        plan = [("convert", f"{g} gal to L", "litres"), ("convert", f"{r} mL to L", "rate"),
                ("calculate", "litres / rate", "seconds"), ("convert", "seconds s to h", "hours"), ("answer", "hours", "h")]
    distractor = rng.choice(_DISTRACT).format(year=rng.randint(2009, 2023),
                                              price=rng.randint(40, 900), name=name, times=rng.randint(2, 9),
                                              dist=rng.randint(2, 40))
    return q.replace("{distractor}", distractor), plan


FAMILIES = ["paint", "trip", "fuel", "lift", "oven", "pace", "tank"]


def execute_plan(plan: list[PlanLine]) -> tuple[str, str] | None:
    """Run a plan with the tools (what a careful agent computes): (answer value, unit)."""
    values: dict[str, str] = {}
    for op, arg, name in plan:
        if op == "answer":
            return (f"{float(values[arg]):.2f}", name) if arg in values else None
        resolved = resolve(arg, values)
        out = calculate(resolved, None) if op == "calculate" else convert(resolved, None)  # type: ignore[arg-type]
        value = tool_value(op, out)
        if value is None:
            return None
        values[name] = value
    return None


def resolve(expr: str, values: dict[str, str]) -> str:
    """Replace value names by their values (longest names first, whole words)."""
    for name in sorted(values, key=len, reverse=True):
        expr = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", values[name], expr)
    return expr


_QUESTIONS: list[tuple[re.Pattern, object]] = [
    (re.compile(r"painting a wall ([\d.]+) ft wide and ([\d.]+) ft tall\. One litre of paint covers ([\d.]+) square metres\..* for (\d) coats?\?"),
     lambda m: [("convert", f"{m[1]} ft to m", "width"), ("convert", f"{m[2]} ft to m", "height"),
                ("calculate", "width * height", "area"), ("calculate", f"area * {m[4]} / {m[3]}", "litres"), ("answer", "litres", "L")]),
    (re.compile(r"drives ([\d.]+) miles at ([\d.]+) mph and then ([\d.]+) km at ([\d.]+) km/h\..*How many minutes"),
     lambda m: [("calculate", f"{m[1]} / {m[2]}", "hours_first"), ("calculate", f"{m[3]} / {m[4]}", "hours_second"),
                ("calculate", "hours_first + hours_second", "hours"), ("convert", "hours h to min", "minutes"), ("answer", "minutes", "min")]),
    (re.compile(r"uses ([\d.]+) litres of fuel per 100 km\. .* route is ([\d.]+) miles long and the van drives it (\d+) times a week\. "
                r"Fuel costs \$([\d.]+) per gallon\."),
     lambda m: [("convert", f"{m[2]} mi to km", "route_km"), ("calculate", f"route_km * {m[3]} * {m[1]} / 100", "litres"),
                ("convert", "litres L to gal", "gallons"), ("calculate", f"gallons * {m[4]}", "cost"), ("answer", "cost", "USD")]),
    (re.compile(r"crate holds (\d+) parcels of ([\d.]+) lb each, and the empty crate weighs ([\d.]+) kg\. .* lift can carry ([\d.]+) kg\."),
     lambda m: [("calculate", f"{m[1]} * {m[2]}", "pounds"), ("convert", "pounds lb to kg", "parcels_kg"),
                ("calculate", f"{m[4]} - parcels_kg - {m[3]}", "spare"), ("answer", "spare", "kg")]),
    (re.compile(r"bake at (\d+) °C, but .* set to (\d+) °F\."),
     lambda m: [("convert", f"{m[2]} F to C", "oven_c"), ("calculate", f"oven_c - {m[1]}", "excess"), ("answer", "excess", "C")]),
    (re.compile(r"ran ([\d.]+) miles in (\d+) minutes and (\d+) seconds\."),
     lambda m: [("convert", f"{m[1]} mi to km", "km"), ("calculate", f"{m[2]} + {m[3]} / 60", "minutes"),
                ("convert", "minutes min to h", "hours"), ("calculate", "km / hours", "speed"), ("answer", "speed", "km/h")]),
    (re.compile(r"tank holds (\d+) gallons\. The tap fills it at (\d+) mL per second\."),
     lambda m: [("convert", f"{m[1]} gal to L", "litres"), ("convert", f"{m[2]} mL to L", "rate"),
                ("calculate", "litres / rate", "seconds"), ("convert", "seconds s to h", "hours"), ("answer", "hours", "h")]),
]


def plan_from_question(question: str) -> list[PlanLine] | None:
    for pattern, make in _QUESTIONS:
        m = pattern.search(question)
        if m:
            return make(m)  # type: ignore[operator]
    return None


# ---------------------------------------------------------------- the simulated solver

_STEP = re.compile(r"^Step (\d+):", re.M)
_CHECK = re.compile(r"^Check:", re.M)
_NOTE = re.compile(r"^Note: (\w+) = (-?\d+(?:\.\d+)?)", re.M)
_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)
_VERB = {"convert": "convert", "calculate": "calculate"}


def _typo(argument: str, op: str, rng: random.Random) -> str:
    if op == "convert":
        return re.sub(r" to (\S+)$", lambda m: " to " + {"m": "mtr", "km": "kms", "L": "ltr", "kg": "kgs", "C": "cel",
                                                             "gal": "gall", "h": "hr", "min": "mins"}.get(m.group(1), m.group(1) + "s"), argument)
    return argument.replace(" * ", " x ", 1) if " * " in argument else argument.replace(" / ", " ÷ ", 1)


class SolverState:
    """What the solver reads back from its conversation."""

    def __init__(self, messages: list[dict]) -> None:
        assistant_idx = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        plans = [i for i in assistant_idx if messages[i]["content"].startswith("Plan:")]
        self.plan = parse_plan(messages[plans[0]]["content"]) if plans else []
        self.values: dict[str, str] = {}       # what it believes (notes override tool outputs)
        self.tool_values: dict[str, str] = {}  # what the tools said
        self.done: set[int] = set()
        self.failures: dict[int, int] = {}
        self.checked: str | None = None
        self.corrected: str | None = None
        self.check_done = False
        self.noted: set[str] = set()
        self.last_step: int | None = None
        self.replanned = len(plans) > 1
        for i in assistant_idx[1:]:
            text = messages[i]["content"]
            if i in plans[1:]:
                # a revised plan: steps whose line changed are to be done again, and retries start afresh
                new = parse_plan(text)
                self.done = {k for k in self.done if k <= len(new) and k <= len(self.plan) and new[k - 1] == self.plan[k - 1]}
                self.plan, self.failures = new, {}
                continue
            for name, value in _NOTE.findall(text):
                self.values[name] = value
                self.noted.add(name)
                self.done.update(k for k, line in enumerate(self.plan, 1) if line[2] == name)
            action = parse_action(text)
            output = messages[i + 1]["content"] if i + 1 < len(messages) and messages[i + 1]["role"] == "user" else ""
            output = output.split("\n", 1)[-1] if output.startswith("Observation") else output
            if action is None:
                continue
            if _CHECK.search(text):
                self.check_done = True
                self.checked = tool_value("calculate", output)
                calcs = [k for k, line in enumerate(self.plan, 1) if line[0] == "calculate"]
                if calcs and self.checked is not None:
                    name = self.plan[calcs[-1] - 1][2]
                    if self.values.get(name) != self.checked:
                        # trust the check: take its value and redo the steps that used the old one
                        self.values[name] = self.tool_values[name] = self.checked
                        self.corrected = name
                        self.done -= {k for k in range(calcs[-1] + 1, len(self.plan) + 1)}
                continue
            step = _STEP.search(text)
            if step is None:
                continue
            k = int(step.group(1))
            self.last_step = k
            if not 1 <= k <= len(self.plan):
                continue
            op, _, name = self.plan[k - 1]
            value = tool_value(action.tool if action.tool in _VERB else op, output)
            if value is None:
                self.failures[k] = self.failures.get(k, 0) + 1
                continue
            self.values[name] = value
            self.tool_values[name] = value
            self.done.add(k)

    def next_step(self) -> int | None:
        for k, line in enumerate(self.plan, 1):
            if line[0] != "answer" and k not in self.done:
                return k
        return None


class SolverPolicy:
    """The simulated ReAct solver: plans, acts step by step from its plan, sometimes notes and checks, answers."""

    def _plan_turn(self, ctx, mine: list[str]) -> str:
        """Before any plan: list what is known (sometimes), then plan from the problem (or from that list)."""
        question = ctx.task_text.split("Problem: ", 1)[-1].split("\n", 1)[0]
        known = next((text for text in mine if text.startswith("Known:")), None)
        if known is None and not mine and ctx.rng("known").random() < 0.5:
            sentences = re.split(r"(?<=[.?!])\s+(?=[A-Z])", question)
            return slip_text(ctx, StepKind.message, "Known:\n" + "\n".join(f"- {x}" for x in sentences))
        if known is not None:
            question = " ".join(line[2:] for line in known.splitlines()[1:] if line.startswith("- "))
        plan = plan_from_question(question)
        if plan is None:
            return slip_text(ctx, StepKind.final_answer, "I cannot set this problem up.\nAnswer: unknown")
        return slip_text(ctx, StepKind.plan, render_plan(plan))

    def respond(self, ctx) -> str:
        msgs = ctx.messages
        mine = [m["content"] for m in msgs if m["role"] == "assistant"]
        if not any(text.startswith("Plan:") for text in mine):
            return self._plan_turn(ctx, mine)
        st = SolverState(msgs)
        k = st.next_step()
        # a note now and then after a calculation, which it trusts from then on
        prev = msgs[-2]["content"] if len(msgs) >= 2 else ""
        prev_action = parse_action(prev)
        if (k is not None and prev_action is not None and prev_action.tool == "calculate" and not _CHECK.search(prev)
                and st.last_step is not None and st.last_step in st.done and ctx.rng("note").random() < 0.45):
            name = st.plan[st.last_step - 1][2]
            if name in st.values and name not in st.noted:
                return slip_text(ctx, StepKind.message, f"Note: {name} = {st.values[name]}")
        if k is not None:
            op, arg, name = st.plan[k - 1]
            if st.failures.get(k, 0) >= 2:
                question = ctx.task_text.split("Problem: ", 1)[-1].split("\n", 1)[0]
                fresh = plan_from_question(question)
                # on some problems it re-reads the problem and revises its plan (once); otherwise it gives up
                if (not st.replanned and fresh is not None and fresh != st.plan
                        and random.Random(stable_seed(ctx.config.seed, question, "replan")).random() < 0.6):
                    return slip_text(ctx, StepKind.plan, render_plan(fresh))
                return slip_text(ctx, StepKind.final_answer, f"The {op} step keeps failing, so I cannot finish.\nAnswer: unknown")
            argument = resolve(arg, st.values)
            if op not in _VERB:
                return slip_text(ctx, StepKind.final_answer, "My plan has a step I cannot carry out.\nAnswer: unknown")
            if re.search(r"[A-Za-z_]{3,}", argument.replace(" to ", " ")) and op == "calculate":
                missing = re.findall(r"[A-Za-z_]{3,}", argument)
                return slip_text(ctx, StepKind.final_answer, f"I have no value for {missing[0]}.\nAnswer: unknown")
            thought = f"Step {k}: {op} {arg} to get {name}." if k not in st.failures else f"Step {k}: that did not work; again, properly."
            if k not in st.failures and ctx.noise(f"typo{k}"):
                argument = _typo(argument, op, ctx.rng(f"typo{k}"))
            return slip_text(ctx, StepKind.tool_call, render_action(op, argument, thought))
        answer = next((line for line in st.plan if line[0] == "answer"), None)
        if answer is None:
            return slip_text(ctx, StepKind.final_answer, "I have no answer step in my plan.\nAnswer: unknown")
        _, target, unit = answer
        calcs = [(k, line) for k, line in enumerate(st.plan, 1) if line[0] == "calculate"]
        # the check: recompute the last calculation from the tools' outputs (decided once per problem)
        if calcs and not st.check_done and random.Random(stable_seed(ctx.config.seed, ctx.task_text, "check")).random() < 0.5:
            k, (_, arg, name) = calcs[-1]
            argument = resolve(arg, st.tool_values)
            if not re.search(r"[A-Za-z_]{3,}", argument):
                return slip_text(ctx, StepKind.tool_call, render_action("calculate", argument, f"Check: recompute {name} from the tool outputs."))
        value = st.values.get(target)
        if st.corrected:
            lead = f"The check gives {st.corrected} = {st.values[st.corrected]}, which I use; so {target} = {value}."
        else:
            lead = f"{target} = {value}."
        if value is None:
            return slip_text(ctx, StepKind.final_answer, f"I do not have {target}.\nAnswer: unknown")
        return slip_text(ctx, StepKind.final_answer, f"{lead}\nAnswer: {float(value):.2f} {unit}")


# ---------------------------------------------------------------- the environment

PROMPT = (
    "You are the solver, a careful assistant that solves word problems with two tools.\n"
    "Tools: 'calculate' (an arithmetic expression with numbers, + - * / and parentheses) and 'convert' "
    "('<number> <unit> to <unit>'; units: " + ", ".join(UNITS) + ").\n"
    "First reply with a numbered plan: one line per tool call, '<n>. convert <number> <unit> to <unit> -> <name>' or "
    "'<n>. calculate <expression over numbers and earlier names> -> <name>', and a last line '<n>. answer <name> in <unit>'.\n"
    "Then carry the plan out one step per reply: a thought 'Step <n>: ...' and, on the next line, 'Action: <tool>' with "
    "the argument on the line after it (names replaced by their values). You may write 'Note: <name> = <value>' to "
    "keep a value. Finish with a line 'Answer: <value rounded to 2 decimals> <unit>'."
)


@register
class MathReact(Environment):
    name = "math_react"
    stands_in_for = "math word problems with tools (GSM8K)"
    modality = "text"
    topology = "single"
    description = "one ReAct agent with a calculator and a unit converter solves word problems that mix units"
    agents = [AgentInfo(name="solver", role="ReAct agent", description="plans, calls calculate/convert, answers")]
    tools = {
        "calculate": ToolSpec("calculate", "evaluate an arithmetic expression", "expression", calculate),
        "convert": ToolSpec("convert", "convert '<number> <unit> to <unit>'", "conversion", convert),
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        rng = random.Random(seed)
        out: list[Task] = []
        i = 0
        while len(out) < n:
            family = FAMILIES[(i + seed) % len(FAMILIES)]
            question, plan = _problem(rng, family)
            i += 1
            result = execute_plan(plan)
            if result is None or float(result[0]) <= 0:
                continue  # e.g. a lift that cannot take the crate: draw again
            value, unit = result
            out.append(Task(id=f"math_react-{seed}-{len(out)}", query=question, reference_answer=f"{value} {unit}",
                            metadata={"family": family, "plan": [list(p) for p in plan], "unit": unit}))
        return out

    def system_prompt(self, agent: str, task: Task) -> str:
        return PROMPT

    def program(self, task: Task, rt: Runtime) -> str | None:
        conv = Conversation().user(f"Problem: {task.query}\nReply with your plan first.")
        for turn in range(16):
            reply = rt.ask("solver", conv.messages, kind=StepKind.message)
            conv.assistant(reply)
            if reply.startswith("Plan:") and rt.steps[-1].kind == StepKind.message:
                rt.steps[-1].kind = StepKind.plan
            if parse_action(reply) is not None:
                conv.user(f"Observation:\n{rt.act('solver', reply)}")
                continue
            m = _ANSWER.search(reply)
            if m is not None:
                rt.steps[-1].kind = StepKind.final_answer
                return m.group(1)
            conv.user("Continue with the next step.")
        return None

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        ok = answer is not None and same_answer(answer, task.reference_answer or "")
        return Outcome(success=ok, score=float(ok), evaluator="math_react.numeric",
                       detail=f"expected {task.reference_answer!r}, got {answer!r}")

    def policy(self) -> SolverPolicy:
        return SolverPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [list(g) for g in UNIT_GROUPS]

    def mutators(self):
        return mistakes.MUTATORS


def same_answer(answer: str, reference: str) -> bool:
    """`<number> <unit>`: the unit must match and the number be within 0.01 (or 0.05 % of the value)."""
    m = re.fullmatch(r"(-?[\d,]*\.?\d+)\s*(\S*)", answer.strip())
    ref_value, ref_unit = reference.split(" ", 1)
    if m is None:
        return False
    unit = m.group(2)
    try:
        value = float(m.group(1).replace(",", ""))
    except ValueError:
        return False
    return unit == ref_unit and abs(value - float(ref_value)) <= max(0.01, 0.0005 * abs(float(ref_value)))
