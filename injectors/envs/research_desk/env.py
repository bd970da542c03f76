"""research_desk: a five-agent team built as a LangGraph graph, answering numeric questions over a registry.

The team (one LangGraph node each, in this order):

    planner ─► researcher ─► analyst ─► reviewer ─┬─► reporter ─► END
                                 ▲                │ (rejected, at most twice)
                                 └────────────────┘

- **planner** (a `plan` step) writes which records to look up and which
  operation to apply: ``- lookup: <entity> | <attribute> | <year>`` lines and a
  ``- compute: difference|sum`` line.
- **researcher** calls the `lookup` tool once per planned record (``tool_call``
  steps, each followed by the tool's ``tool_result``), then reports its findings
  to the analyst (a `message`).
- **analyst** computes the result from the findings (a `message`).
- **reviewer** recomputes it and approves or rejects (a `message`); a rejected
  calculation goes back to the analyst.
- **reporter** writes the final answer, ``Answer: <integer>`` (a `final_answer`).

Tasks come in three kinds, with different wording (so lessons learnt on one
kind are lexically far from the others): the change of one company's figure
between two years, the combined figure of two companies, and how much larger one
company's figure is than another's. The registry (`task.metadata["records"]`)
also holds look-alike companies and neighbouring years, so a wrong lookup finds
a real but wrong value.

Simulated agents (`DeskPolicy`), following `injectors.sim`:

- per-agent, per-mode error tendencies (`DEFAULT_TENDENCIES`): planner R.4
  (plans a wrong year), researcher A.2 (looks up a look-alike company or a
  neighbouring year) and C.2 (misreports a value to the analyst), analyst R.3
  (miscalculates), reviewer V.2 (approves without recomputing), reporter A.4
  (breaks the answer format). Only the reviewer's check can recover an error
  (the analyst's); every other error is decisive.
- recovered mistakes at rate `noise`: the researcher mistypes a company name,
  the tool finds no record, and it looks it up again correctly.
- lessons: an agent shown a lesson (in its system prompt) whose mode is one of
  its tendencies and whose situation shares a content word with the task
  follows it, and does not make that mistake on that call (`SimContext.slip`).
  A lesson with another mode, or addressed to another agent, changes nothing.

`gold_label(task, trace)` finds the decisive error of a failed run from the
trace alone, by checking each step against the registry: the first step whose
output is wrong and is not corrected later (a rejected calculation that the
analyst redoes correctly is corrected). It is the oracle for the feedback
example (`examples/langgraph_self_improve.py`).
"""

from __future__ import annotations

import random
import re
from typing import Any, TypedDict

from faultlens.middleware.model.trace import AgentInfo, GoldLabel, Outcome, Step, StepKind, Task, Trace

from ..registry import register
from ..base import Conversation, Environment, Runtime, ToolSpec, parse_action, render_action

ATTRIBUTES = {"revenue": "revenue", "headcount": "headcount", "stores": "store count"}
YEARS = list(range(2015, 2025))
_SYLLABLES = ["bri", "sko", "val", "mer", "tan", "quo", "dra", "len", "fos", "kir", "pal", "zem", "rho", "nud", "cav", "jor"]
_SUFFIXES = ["Corp", "Ltd", "Works", "Group", "Labs", "Trading"]

DEFAULT_TENDENCIES: dict[str, dict[str, float]] = {
    "planner": {"R.4": 0.08},
    "researcher": {"A.2": 0.08, "C.2": 0.10},
    "analyst": {"R.3": 0.25},
    "reviewer": {"V.2": 0.5},
    "reporter": {"A.4": 0.08},
}
DEFAULT_NOISE = 0.15
MAX_REVIEWS = 2


def _company(rng: random.Random) -> str:
    return (rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES)).capitalize() + " " + rng.choice(_SUFFIXES)


def _lookalike(name: str) -> str:
    """A different company whose name is one letter away (the researcher's A.2 slip finds it)."""
    rng = random.Random(name)
    stem, suffix = name.split(" ", 1)
    i = rng.randrange(1, len(stem))
    letter = rng.choice([c for c in "aeiourntls" if c != stem[i]])
    return f"{stem[:i]}{letter}{stem[i + 1:]} {suffix}"


def _key(entity: str, attribute: str, year: int | str) -> str:
    return f"{entity.strip().lower()}|{attribute.strip().lower()}|{str(year).strip()}"


def _value(attribute: str, rng: random.Random) -> int:
    return {"revenue": rng.randint(120, 990), "headcount": rng.randint(40, 900), "stores": rng.randint(5, 240)}[attribute]


def _make_task(rng: random.Random, index: int, seed: int) -> Task:
    kind = ("change", "combined", "larger")[index % 3]
    attribute = rng.choice(list(ATTRIBUTES))
    a = _company(rng)
    b = _company(rng)
    while b.split()[0] == a.split()[0]:
        b = _company(rng)
    y1, y2 = sorted(rng.sample(YEARS[1:-1], 2))
    label = ATTRIBUTES[attribute]
    if kind == "change":
        query = f"By how much did the {label} of {a} change from {y1} to {y2}? Give the later value minus the earlier one."
        lookups = [(a, attribute, y1), (a, attribute, y2)]
        op = "difference"
    elif kind == "combined":
        query = f"What was the combined {label} of {a} and {b} in {y2}, added together?"
        lookups = [(a, attribute, y2), (b, attribute, y2)]
        op = "sum"
    else:
        query = f"How much larger was the {label} of {a} than that of {b} in {y2}? Subtract the second company's figure from the first's."
        lookups = [(b, attribute, y2), (a, attribute, y2)]
        op = "difference"
    records: dict[str, int] = {}
    entities = {e for e, _, _ in lookups}
    for entity in sorted(entities):
        twin = _lookalike(entity)
        for who in (entity, twin):
            for year in YEARS:
                records[_key(who, attribute, year)] = _value(attribute, rng)
    values = [records[_key(*lk)] for lk in lookups]
    answer = values[1] - values[0] if op == "difference" else values[0] + values[1]
    names = {_key(e, attribute, y): f"{e}, {attribute}, {y}" for e in entities | {_lookalike(e) for e in entities} for y in YEARS}
    return Task(
        id=f"desk-{seed}-{index}",
        query=query,
        reference_answer=str(answer),
        metadata={
            "kind": kind,
            "attribute": attribute,
            "lookups": [list(lk) for lk in lookups],
            "op": op,
            "records": records,
            "names": {k: v for k, v in names.items() if k in records},
        },
    )


def lookup(argument: str, task: Task) -> str:
    """The registry tool: ``<entity> | <attribute> | <year>`` → the recorded value."""
    parts = [p.strip() for p in argument.strip().splitlines()[0].split("|")] if argument.strip() else []
    if len(parts) != 3:
        return "Error: the argument must be '<company> | <attribute> | <year>'."
    value = task.metadata["records"].get(_key(*parts))
    if value is None:
        return f"No record for '{parts[0]}' ({parts[1]}, {parts[2]}). Check the company name."
    return f"{parts[0]}, {parts[1]}, {parts[2]}: {value}"


# ---------------------------------------------------------------- parsing agents' text

_PLAN_LOOKUP = re.compile(r"^-\s*lookup:\s*(.+?)\s*\|\s*(\w+)\s*\|\s*(\d{4})\s*$", re.M | re.I)
_PLAN_OP = re.compile(r"^-\s*compute:\s*(difference|sum)", re.M | re.I)
_FINDING = re.compile(r"^-\s*(.+?),\s*(\w+),\s*(\d{4}):\s*(-?[\d,]+)\s*$", re.M)
_CALC = re.compile(r"Calculation:\s*(-?[\d,]+)\s*([+-])\s*(-?[\d,]+)\s*=\s*(-?[\d,]+)")
_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)
_LOOKUP_OUT = re.compile(r"^(.+?),\s*(\w+),\s*(\d{4}):\s*(-?\d+)\s*$", re.M)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_plan(text: str) -> tuple[list[tuple[str, str, str]], str | None]:
    lookups = [(m[1], m[2].lower(), m[3]) for m in _PLAN_LOOKUP.finditer(text)]
    op = _PLAN_OP.search(text)
    return lookups, (op[1].lower() if op else None)


def parse_findings(text: str) -> list[int]:
    return [_int(m[4]) for m in _FINDING.finditer(text)]


def parse_calc(text: str) -> tuple[int, str, int, int] | None:
    m = _CALC.search(text or "")
    return (_int(m[1]), m[2], _int(m[3]), _int(m[4])) if m else None


def render_plan(lookups: list[tuple[str, str, Any]], op: str) -> str:
    lines = ["Plan:"] + [f"- lookup: {e} | {a} | {y}" for e, a, y in lookups]
    order = "second minus first" if op == "difference" else "first plus second"
    return "\n".join(lines + [f"- compute: {op} ({order})"])


_QUESTION = [
    (re.compile(r"By how much did the (.+?) of (.+?) change from (\d{4}) to (\d{4})\?"),
     lambda m: ([(m[2], m[1], m[3]), (m[2], m[1], m[4])], "difference")),
    (re.compile(r"What was the combined (.+?) of (.+?) and (.+?) in (\d{4}),"),
     lambda m: ([(m[2], m[1], m[4]), (m[3], m[1], m[4])], "sum")),
    (re.compile(r"How much larger was the (.+?) of (.+?) than that of (.+?) in (\d{4})\?"),
     lambda m: ([(m[3], m[1], m[4]), (m[2], m[1], m[4])], "difference")),
]
_LABEL_TO_ATTRIBUTE = {label: name for name, label in ATTRIBUTES.items()}


def plan_for(question: str) -> tuple[list[tuple[str, str, str]], str] | None:
    """The correct plan for a question (what a careful planner writes)."""
    for pattern, make in _QUESTION:
        m = pattern.search(question)
        if m:
            lookups, op = make(m)
            return [(e, _LABEL_TO_ATTRIBUTE.get(a, a), y) for e, a, y in lookups], op
    return None


# ---------------------------------------------------------------- simulated agents

def _user_texts(messages: list[dict]) -> list[str]:
    return [str(m.get("content") or "") for m in messages if m.get("role") == "user"]


def _section(text: str, header: str) -> str:
    """The block of `text` after a line starting with `header` (up to the next blank line)."""
    start = text.find(header)
    if start < 0:
        return ""
    rest = text[start + len(header):]
    return rest.split("\n\n", 1)[0]


class DeskPolicy:
    """The simulated research desk. Each agent acts on what its conversation shows it."""

    def respond(self, ctx) -> str:
        return getattr(self, "_" + ctx.agent)(ctx)

    def _planner(self, ctx) -> str:
        question = ctx.task_text.split("Question: ", 1)[-1].split("\n", 1)[0]
        plan = plan_for(question)
        if plan is None:
            return "Plan:\n- compute: sum (first plus second)"
        lookups, op = plan
        if ctx.slip(StepKind.plan) == "R.4":
            # ignores the year the question states: plans a neighbouring one
            rng = ctx.rng("R.4")
            i = rng.randrange(len(lookups))
            e, a, y = lookups[i]
            lookups = [*lookups]
            lookups[i] = (e, a, str(int(y) + rng.choice([-1, 1])))
        return render_plan(lookups, op)

    def _researcher(self, ctx) -> str:
        users = _user_texts(ctx.messages)
        lookups, _ = parse_plan(users[0])
        outputs = users[1:]  # one "Output of lookup" message per action taken
        found = [o for o in outputs if _LOOKUP_OUT.search(o)]
        if outputs and "No record" in outputs[-1] and len(outputs) < 2 * max(1, len(lookups)) + 2:
            e, a, y = lookups[len(found)]
            return render_action("lookup", f"{e} | {a} | {y}", "No record: I mistyped the name; looking it up again.")
        if len(found) < len(lookups):
            e, a, y = lookups[len(found)]
            if ctx.slip(StepKind.tool_call) == "A.2":
                rng = ctx.rng("A.2")
                if rng.random() < 0.5:
                    e = _lookalike(e)
                else:
                    y = str(int(y) + rng.choice([-1, 1]))
            elif not outputs or _LOOKUP_OUT.search(outputs[-1]):
                if ctx.noise(f"typo{len(found)}"):
                    e = e[:-1] if " " not in e[-2:] else e  # drops the last letter of the suffix
            return render_action("lookup", f"{e} | {a} | {y}", f"Looking up {a} for {lookups[len(found)][0]}.")
        values = []
        for (e, a, y), out in zip(lookups, found):
            m = _LOOKUP_OUT.search(out)
            assert m is not None  # `found` holds the lookups' outputs
            values.append(int(m[4]))
        if values and ctx.slip(StepKind.message) == "C.2":
            rng = ctx.rng("C.2")
            i = rng.randrange(len(values))
            digits = str(values[i])
            values[i] = int(digits[::-1]) if len(set(digits)) > 1 and digits[-1] != "0" else values[i] * 10
        lines = [f"- {e}, {a}, {y}: {v}" for (e, a, y), v in zip(lookups, values)]
        return "Findings:\n" + "\n".join(lines)

    def _analyst(self, ctx) -> str:
        first = _user_texts(ctx.messages)[0]
        _, op = parse_plan(first)
        values = parse_findings(_section(first, "Findings"))
        if len(values) < 2:
            return "Calculation: I cannot compute this; the findings do not hold two values."
        a, b = values[0], values[1]
        result = b - a if op == "difference" else a + b
        sign = "-" if op == "difference" else "+"
        x, y = (b, a) if op == "difference" else (a, b)
        if ctx.slip(StepKind.message) == "R.3":
            rng = ctx.rng("R.3")
            result += rng.choice([-100, -10, -1, 1, 10, 100])
        return f"Calculation: {x} {sign} {y} = {result}"

    def _reviewer(self, ctx) -> str:
        text = _user_texts(ctx.messages)[0]
        calc = parse_calc(text)
        if ctx.slip(StepKind.message) == "V.2":
            return "APPROVED: the calculation looks fine."
        if calc is None:
            return "REJECTED: there is no calculation of the form 'Calculation: a - b = c' to check."
        x, sign, y, result = calc
        right = x - y if sign == "-" else x + y
        if right != result:
            return f"REJECTED: {x} {sign} {y} is {right}, not {result}. Recompute."
        return f"APPROVED: {x} {sign} {y} = {result} checks out."

    def _reporter(self, ctx) -> str:
        calc = parse_calc(_user_texts(ctx.messages)[0])
        if calc is None:
            return "Answer: unknown"
        result = calc[3]
        if ctx.slip(StepKind.final_answer) == "A.4":
            return f"Answer: about {result / 1000:.2f} thousand"
        return f"Answer: {result}"


# ---------------------------------------------------------------- the LangGraph team

class DeskState(TypedDict, total=False):
    question: str
    plan: str
    findings: str
    calc: str
    review: str
    reviews: int
    answer: str | None


def _rt(config: dict) -> Runtime:
    return config["configurable"]["faultlens_runtime"]


def _planner_node(state: DeskState, config) -> dict:
    rt = _rt(config)
    plan = rt.ask("planner", Conversation().user(f"Question: {state['question']}\nWrite the plan.").messages, kind=StepKind.plan)
    return {"plan": plan}


def _researcher_node(state: DeskState, config) -> dict:
    rt = _rt(config)
    conv = Conversation().user(f"Plan from the planner:\n{state['plan']}\n\nQuestion: {state['question']}\n"
                               "Look up each planned record with the lookup tool, one call at a time, then report your findings.")
    for _ in range(8):
        reply = rt.ask("researcher", conv.messages, kind=StepKind.message)
        conv.assistant(reply)
        if parse_action(reply) is None:
            return {"findings": reply}
        conv.user(f"Output of lookup:\n{rt.act('researcher', reply)}")
    return {"findings": "Findings: (none: too many lookups)"}


def _analyst_node(state: DeskState, config) -> dict:
    rt = _rt(config)
    conv = Conversation().user(f"Question: {state['question']}\n\n{state['plan']}\n\n{state['findings']}\n\n"
                               "Compute the result: reply 'Calculation: <a> <+|-> <b> = <result>'.")
    if state.get("review", "").startswith("REJECTED"):
        conv.assistant(state["calc"]).user(f"The reviewer replied: {state['review']}")
    return {"calc": rt.ask("analyst", conv.messages, kind=StepKind.message)}


def _reviewer_node(state: DeskState, config) -> dict:
    rt = _rt(config)
    text = (f"{state['findings']}\n\nCalculation from the analyst:\n{state['calc']}\n\n"
            "Check the calculation by recomputing it. Reply 'APPROVED: ...' or 'REJECTED: <reason>'.")
    review = rt.ask("reviewer", Conversation().user(text).messages, kind=StepKind.message)
    return {"review": review, "reviews": state.get("reviews", 0) + 1}


def _reporter_node(state: DeskState, config) -> dict:
    rt = _rt(config)
    text = f"{state['calc']}\n\nQuestion: {state['question']}\nWrite the final answer as 'Answer: <integer>'."
    reply = rt.ask("reporter", Conversation().user(text).messages, kind=StepKind.final_answer)
    m = _ANSWER.search(reply)
    return {"answer": m[1] if m else None}


def _after_review(state: DeskState) -> str:
    if state.get("review", "").startswith("REJECTED") and state.get("reviews", 0) < MAX_REVIEWS:
        return "analyst"
    return "reporter"


_GRAPH = None


def graph():
    """The compiled LangGraph team (built once; the runtime travels in the config)."""
    global _GRAPH
    if _GRAPH is None:
        from langgraph.graph import END, START, StateGraph

        g = StateGraph(DeskState)
        g.add_node("planner", _planner_node)
        g.add_node("researcher", _researcher_node)
        g.add_node("analyst", _analyst_node)
        g.add_node("reviewer", _reviewer_node)
        g.add_node("reporter", _reporter_node)
        g.add_edge(START, "planner")
        g.add_edge("planner", "researcher")
        g.add_edge("researcher", "analyst")
        g.add_edge("analyst", "reviewer")
        g.add_conditional_edges("reviewer", _after_review, {"analyst": "analyst", "reporter": "reporter"})
        g.add_edge("reporter", END)
        _GRAPH = g.compile()
    return _GRAPH


_PROMPTS = {
    "planner": ("You are the planner of a research desk. Given a question about companies' figures, write a plan: "
                "'Plan:', then one line '- lookup: <company> | <revenue|headcount|stores> | <year>' per record needed, "
                "in the order the computation uses them, then '- compute: difference (second minus first)' or "
                "'- compute: sum (first plus second)'."),
    "researcher": ("You are the researcher of a research desk. Look up the records in the planner's plan with the tool "
                   "'lookup' by replying 'Action: lookup' and, on the next line, '<company> | <attribute> | <year>'. "
                   "One lookup per reply. When you have them all, reply 'Findings:' and one line "
                   "'- <company>, <attribute>, <year>: <value>' per record, in plan order."),
    "analyst": ("You are the analyst of a research desk. From the plan and the researcher's findings, compute the result "
                "and reply exactly 'Calculation: <a> <+|-> <b> = <result>' (for a difference: second value minus first)."),
    "reviewer": ("You are the reviewer of a research desk. Recompute the analyst's calculation from the findings. "
                 "Reply 'APPROVED: ...' if it is right, else 'REJECTED: <what is wrong>'."),
    "reporter": "You are the reporter of a research desk. Reply with the approved result as 'Answer: <integer>' and nothing else.",
}


@register
class ResearchDesk(Environment):
    name = "research_desk"
    stands_in_for = "numeric QA over a registry (FRAMES)"
    modality = "text"
    topology = "multi"
    description = "a LangGraph team (planner, researcher, analyst, reviewer, reporter) answering numeric questions over a registry"
    not_applicable = {
        "A.3": "a call to a tool that does not exist returns the tool list and the node calls the real one next (0/66 kept)",
    }
    agents = [
        AgentInfo(name="planner", role="planner", description="plans the lookups and the operation"),
        AgentInfo(name="researcher", role="researcher", description="looks records up with the lookup tool and reports them"),
        AgentInfo(name="analyst", role="analyst", description="computes the result from the findings"),
        AgentInfo(name="reviewer", role="verifier", description="recomputes and approves or rejects the calculation"),
        AgentInfo(name="reporter", role="answerer", description="writes the final answer"),
    ]
    tools = {"lookup": ToolSpec("lookup", "the registry: '<company> | <attribute> | <year>' → value", "query", lookup)}

    def tasks(self, seed: int, n: int) -> list[Task]:
        rng = random.Random(seed)
        return [_make_task(rng, i, seed) for i in range(n)]

    def system_prompt(self, agent: str, task: Task) -> str:
        return _PROMPTS[agent]

    def program(self, task: Task, rt: Runtime) -> str | None:
        final = graph().invoke({"question": task.query, "reviews": 0}, config={"configurable": {"faultlens_runtime": rt}})
        return final.get("answer")

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        ok = answer is not None and re.fullmatch(r"-?[\d,]+", answer.strip()) is not None and _int(answer) == int(task.reference_answer or "0")
        return Outcome(success=ok, score=float(ok), evaluator="research_desk.exact",
                       detail=f"expected {task.reference_answer}, got {answer!r}")

    def policy(self) -> DeskPolicy:
        return DeskPolicy()

    def distractors(self, task: Task) -> list[str]:
        return [v for v in task.metadata.get("names", {}).values()]

    def default_sim(self, seed: int = 0) -> dict[str, Any]:
        """The simulated agents' settings used by the feedback example."""
        return {"seed": seed, "noise": DEFAULT_NOISE, "tendencies": {a: dict(m) for a, m in DEFAULT_TENDENCIES.items()}}


def _researcher_error(steps: list[Step], records: dict, planned: list[tuple[str, str, str]], truth: list) -> GoldLabel | None:
    """The researcher's decisive error, judged against the plan it was given: a wrong lookup, or findings that misreport one."""
    findings_step = None
    done = 0
    for step in steps:
        if step.agent != "researcher":
            continue
        if step.kind == StepKind.tool_call:
            argument = str((step.tool_arguments or {}).get("query", ""))
            parts = [p.strip() for p in argument.split("|")]
            if len(parts) == 3 and _key(*parts) in records and done < len(planned):
                if _key(*parts) != _key(*planned[done]):
                    return GoldLabel(step=step.index, agent="researcher", mode="A.2", reason=f"looked up {argument!r} instead of {' | '.join(planned[done])!r}")
                done += 1
        elif step.kind == StepKind.message:
            findings_step = step
    if findings_step is not None and parse_findings(findings_step.content) != truth:
        return GoldLabel(step=findings_step.index, agent="researcher", mode="C.2", reason="reported a value other than the lookup returned")
    return None


def gold_label(task: Task, trace: Trace) -> GoldLabel | None:
    """The decisive error of a failed run (agent, step, mode), found by checking each step against the registry.

    Returns None for a run that succeeded or whose failure no step explains.
    """
    if trace.outcome is None or trace.outcome.success:
        return None
    records = task.metadata["records"]
    planned = [(e, a, str(y)) for e, a, y in task.metadata["lookups"]]
    truth = [records[_key(*lk)] for lk in planned]
    steps = trace.steps
    plan_step = next((s for s in steps if s.agent == "planner"), None)
    if plan_step is not None:
        lookups, _ = parse_plan(plan_step.content)
        if [(_key(*lk)) for lk in lookups] != [_key(*lk) for lk in planned]:
            return GoldLabel(step=plan_step.index, agent="planner", mode="R.4", reason="the plan looks up a year the question does not ask for")
        # the researcher is judged against the plan it was given
    researcher = _researcher_error(steps, records, planned, truth)
    if researcher is not None:
        return researcher
    op = task.metadata["op"]
    right = truth[1] - truth[0] if op == "difference" else truth[0] + truth[1]
    calcs = [s for s in steps if s.agent == "analyst"]
    final_calc = calcs[-1] if calcs else None
    if final_calc is not None:
        parsed = parse_calc(final_calc.content)
        if parsed is None or parsed[3] != right:
            # the first wrong calculation that was never corrected: every one from the last correct one on
            first_wrong = final_calc
            for s in reversed(calcs):
                p = parse_calc(s.content)
                if p is not None and p[3] == right:
                    break
                first_wrong = s
            return GoldLabel(step=first_wrong.index, agent="analyst", mode="R.3", reason=f"computed {parsed[3] if parsed else 'nothing'} instead of {right}")
    reporter = next((s for s in steps if s.agent == "reporter"), None)
    if reporter is not None:
        return GoldLabel(step=reporter.index, agent="reporter", mode="A.4", reason="the answer is not a bare integer equal to the approved result")
    return None
