"""`chart_qa` (image): an analyst, a perceiver and an answerer answer questions about a rendered chart.

Each task has its own chart, rendered with matplotlib (Agg) from generated data:
a bar chart (4 to 8 bars, a value printed on each bar) or a line chart (5 to 8
years, one or two series). The chart is a 320x240 PNG; the trace carries it as
step media wherever an agent looks at it.

Agents and the protocol (the simulated policies follow it; real LLM agents get
it in their prompts, and the perceiver gets the image itself):

- analyst: writes a plan (`- read: ...`, `- compute: ...`, `- answer: the
  result`), delegates the reading (`perceiver: read ...`), checks the
  readings against the chart's caption (every label on the chart, every value
  within the y axis) and asks for a zoomed re-read of any reading that fails the
  check, computes (with `calculate` for arithmetic), and reports `Result: X`.
  The check is the verification that catches some errors: a reading outside
  the axis or of a label the chart does not have is re-read; a plausible
  misreading passes.
- perceiver: calls `view_chart` (`full`, or one x label to zoom on it) and
  reports `Readings (SERIES): LABEL = VALUE, ...` for what it was asked to read.
  The simulated perceiver reads the data behind the chart (it finds the chart
  by the id that `view_chart` prints); injected perception errors misread it.
- answerer: replies `Answer: <value>` from the analyst's result.

Trace shapes vary: the perceiver reads every bar or only the named ones, line
charts carry a distractor series, arithmetic questions call the calculator and
comparisons do not, and re-reads add steps.

Recovered mistakes in seeds (rate `noise`): the perceiver slips a digit (a
value outside the axis) or a label, and the analyst's check has it re-read;
the analyst mistypes the calculator expression and retries.
"""

from __future__ import annotations

import re
from typing import cast

from faultlens.middleware.model.trace import AgentInfo, Media, Outcome, StepKind, Task

from faultlens.injectors.generators import slip_text
from ..registry import register
from ..arithmetic import calculate
from ..base import (
    Conversation,
    Environment,
    Runtime,
    ToolSpec,
    parse_action,
    render_action,
)
from ..media_render import crop_columns, png_media, render_chart, user_content
from . import mistakes
from .world import (
    AXIS,
    CHART_ID,
    MONTHS,
    PRODUCTS,
    REGIONS,
    SERIES,
    chart_task,
    compute,
    make_task,
    parse_plan,
    parse_readings,
)


def chart_png(task: Task) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    md = task.metadata
    series = tuple((name, tuple(vals)) for name, vals in md["series"])
    return render_chart(md["chart_kind"], md["title"], tuple(md["labels"]), series, md["ymax"], md["unit"])


def caption(task: Task) -> str:
    md = task.metadata
    names = ", ".join(name for name, _ in md["series"])
    what = "Bar chart" if md["chart_kind"] == "bar" else "Line chart"
    return (f"Chart {md['chart_id']}: {what} '{md['title']}'. Series: {names}. x labels: {', '.join(md['labels'])}. "
            f"y axis from 0 to {md['ymax']} ({md['unit']}).")


def view_chart(argument: str, task: Task) -> str:
    """`full` shows the whole chart; an x label zooms on it. The image goes with the step as media."""
    arg = argument.strip()
    if arg.lower() in ("", "full", "all"):
        return caption(task)
    if arg in task.metadata["labels"]:
        return f"Chart {task.metadata['chart_id']}: zoomed on {arg} (y axis from 0 to {task.metadata['ymax']})."
    return f"No x label '{arg}' on chart {task.metadata['chart_id']}. x labels: {', '.join(task.metadata['labels'])}."


def view_media(argument: str, task: Task) -> list[Media]:
    """The image a `view_chart` call shows (none for an unknown label)."""
    png, columns = chart_png(task)
    arg = argument.strip()
    if arg.lower() in ("", "full", "all"):
        return [png_media(png, f"chart {task.metadata['chart_id']}")]
    labels = task.metadata["labels"]
    if arg in labels:
        left, right = columns[labels.index(arg)]
        return [png_media(crop_columns(png, left, right), f"chart {task.metadata['chart_id']}, zoom on {arg}")]
    return []


_ZOOMED = re.compile(r"zoomed on (\w+)")


_XLABELS = re.compile(r"x labels: (.+?)\. y axis")
_RESULT = re.compile(r"^Result: (.+?)\s*$", re.M)
_ANSWER = re.compile(r"^Answer:\s*(.+?)\s*$", re.M)


def requested(read: str, labels: list[str]) -> tuple[list[str], str | None]:
    """Labels (and series) a `read:` instruction names; `every ...` means all labels."""
    series = None
    m = re.search(r" of (\w+)$", read)
    if m:
        series, read = m.group(1), read[: m.start()]
    if read.startswith("every"):
        return list(labels), series
    names = [w.strip() for w in re.split(r",| and ", read) if w.strip()]
    return names, series


class ChartPolicy:
    """The simulated analyst, perceiver and answerer (each reads only its conversation)."""

    def respond(self, ctx) -> str:
        return getattr(self, ctx.agent)(ctx)

    # analyst ---------------------------------------------------------------
    def analyst(self, ctx) -> str:
        msgs = ctx.messages
        mine = [m["content"] for m in msgs if m["role"] == "assistant"]
        question = ctx.task_text.split("Question: ", 1)[-1].split("\n", 1)[0]
        if not mine:
            lines = plan_for(question)
            return slip_text(ctx, StepKind.plan, "Plan:\n" + "\n".join(f"- {l}" for l in lines + ["answer: the result"]))
        plan = parse_plan(mine[0])
        last = msgs[-1]["content"] if msgs[-1]["role"] == "user" else ""
        if len(mine) == 1:
            read = plan.get("read", "every bar")
            return slip_text(ctx, StepKind.message, f"perceiver: read {read}")
        users = "\n".join(m["content"] for m in msgs if m["role"] == "user")
        values: dict[str, int] = {}
        for m in msgs:
            if m["role"] == "user":
                for line in m["content"].splitlines():
                    values.update(parse_readings(line)[1])
        if last.startswith("Output of calculate:"):
            output = last.split("\n", 1)[-1].strip()
            if re.fullmatch(r"-?[\d.]+", output):
                return slip_text(ctx, StepKind.message, f"Result: {output}")
            expr, direct = compute(plan.get("compute", ""), values)
            return slip_text(ctx, StepKind.tool_call, render_action("calculate", expr or "0", "Let me fix the expression."))
        if last.startswith("From the perceiver:") or last.startswith("Re-read by the perceiver:"):
            axis = AXIS.search(users)
            ymax = int(axis.group(1)) if axis else 100
            xl = _XLABELS.search(users)
            chart_labels = [l.strip() for l in xl.group(1).split(",")] if xl else list(values)
            wanted, _ = requested(plan.get("read", "every"), chart_labels)
            rereads = sum(1 for m in mine if m.startswith("perceiver: zoom"))
            bad = [l for l in wanted if l not in values or not 0 <= values[l] <= ymax]
            if bad and rereads < 2:
                _, series = requested(plan.get("read", "every"), chart_labels)
                of = f" of {series}" if series else ""
                return slip_text(ctx, StepKind.message, f"perceiver: zoom on {bad[0]}{of} and read it again.")
            expr, direct = compute(plan.get("compute", ""), {l: values[l] for l in wanted if l in values})
            head = f"Check: {len(wanted)} reading(s), each on the chart and within 0 to {ymax}."
            if direct is not None:
                return slip_text(ctx, StepKind.message, f"{head}\nResult: {direct}")
            assert expr is not None  # compute gives an expression whenever it gives no direct result
            if ctx.noise("calc"):
                expr = expr + " +"  # a recovered slip: the calculator rejects it and the analyst retries
            return slip_text(ctx, StepKind.tool_call, render_action("calculate", expr, head))
        return slip_text(ctx, StepKind.message, "Result: unknown")

    # perceiver -------------------------------------------------------------
    def perceiver(self, ctx) -> str:
        msgs = ctx.messages
        last = msgs[-1]["content"] if msgs[-1]["role"] == "user" else ""
        instruction = ctx.task_text.split("\n", 1)[0]
        zoom = re.search(r"zoom on (\w+)", last if last.startswith("Instruction") else "")
        if last.startswith("Instruction"):
            target = zoom.group(1) if zoom else "full"
            return slip_text(ctx, StepKind.tool_call, render_action("view_chart", target))
        chart = CHART_ID.search(last)
        if chart is not None and "overview" in instruction:
            shown = _XLABELS.search(last)
            axis = AXIS.search(last)
            kind = "line" if "Line chart" in last else "bar"
            count = len(shown.group(1).split(",")) if shown else 0
            text = (f"Overview: a {kind} chart with {count} x labels ({shown.group(1) if shown else 'unreadable'}), "
                    f"y axis up to {axis.group(1) if axis else 'unknown'}.")
            return slip_text(ctx, StepKind.message, text)
        if chart is None:
            return slip_text(ctx, StepKind.message, "Readings (none): the chart could not be shown.")
        try:
            task = chart_task(chart.group(1))
        except KeyError:
            return slip_text(ctx, StepKind.message, "Readings (none): the chart could not be shown.")
        md = task.metadata
        series = dict((name, vals) for name, vals in md["series"])
        asked = [m["content"] for m in msgs if m["role"] == "user" and m["content"].startswith("Instruction")][-1].split("\n", 1)[0]
        zoomed = _ZOOMED.search(last)
        read = asked.split("read ", 1)[-1].strip().rstrip(".")
        labels, name = requested(read, md["labels"])
        if zoomed:
            labels = [zoomed.group(1)]
            read_zoom = re.search(r"zoom on \w+ of (\w+)", asked)
            name = read_zoom.group(1) if read_zoom else None
        if name not in series:
            name = md["series"][0][0]  # no (known) series named: the first one in the legend
        data = dict(zip(md["labels"], series[name]))
        pairs = [(l, data[l]) for l in labels if l in data]
        if not zoomed and ctx.noise("misread") and pairs:
            # a recovered slip: a digit doubled (outside the axis) or a label misspelt; the check catches it
            rng = ctx.rng("misread")
            k = rng.randrange(len(pairs))
            label, value = pairs[k]
            pairs[k] = (label, int(f"{value}{value % 10}") + md["ymax"]) if rng.random() < 0.5 else (label[:-1], value)
        body = ", ".join(f"{l} = {v}" for l, v in pairs)
        return slip_text(ctx, StepKind.message, f"Readings ({name}): {body}")

    # answerer --------------------------------------------------------------
    def answerer(self, ctx) -> str:
        found = _RESULT.search(ctx.task_text)
        value = found.group(1) if found else "unknown"
        return slip_text(ctx, StepKind.final_answer, f"Answer: {value}")


_Q = [
    (re.compile(r"Which (\w+) has the highest"), lambda m: ["read: every bar", "compute: the label with the highest value"]),
    (re.compile(r"Which (\w+) has the lowest"), lambda m: ["read: every bar", "compute: the label with the lowest value"]),
    (re.compile(r"How many more .+ does (\w+) have than (\w+)\?"), lambda m: [f"read: {m[1]}, {m[2]}", f"compute: {m[1]} - {m[2]}"]),
    (re.compile(r"What are the combined .+ of (\w+), (\w+) and (\w+)\?"),
     lambda m: [f"read: {m[1]}, {m[2]}, {m[3]}", f"compute: {m[1]} + {m[2]} + {m[3]}"]),
    (re.compile(r"What is (\w+) in (\w+) according"), lambda m: [f"read: {m[2]} of {m[1]}", f"compute: {m[2]}"]),
    (re.compile(r"What is the .+ of (\w+) according"), lambda m: [f"read: {m[1]}", f"compute: {m[1]}"]),
    (re.compile(r"By how much did (\w+) change from (\d+) to (\d+)\?"), lambda m: [f"read: {m[2]}, {m[3]} of {m[1]}", f"compute: {m[3]} - {m[2]}"]),
    (re.compile(r"In which year did (\w+) reach its highest"), lambda m: [f"read: every year of {m[1]}", "compute: the label with the highest value"]),
    (re.compile(r"In which year was (\w+) above (\d+) for the first time"),
     lambda m: [f"read: every year of {m[1]}", f"compute: the first label with a value above {m[2]}"]),
]


def plan_for(question: str) -> list[str]:
    for pattern, make in _Q:
        m = pattern.search(question)
        if m:
            return make(m)
    return ["read: every bar", "compute: the label with the highest value"]


# ---------------------------------------------------------------- the environment

_PROMPTS = {
    "analyst": ("You are the analyst of a chart-reading team (analyst, perceiver, answerer). You cannot see the chart; "
                "the perceiver can. First reply with a plan: 'Plan:' then '- read: <labels, or every bar / every year of "
                "SERIES>', '- compute: <LABEL - LABEL | LABEL + LABEL + ... | the label with the highest value | the label "
                "with the lowest value | the first label with a value above N | LABEL>', '- answer: the result'. Then "
                "delegate with 'perceiver: read <what>'. When readings arrive, check them against the chart caption "
                "(every label on the chart, every value between 0 and the axis maximum); for a reading that fails, reply "
                "'perceiver: zoom on LABEL and read it again.'. Then compute: for arithmetic reply 'Action: calculate' and "
                "the expression on the next line; finally reply 'Result: <value>'."),
    "perceiver": ("You are the perceiver of a chart-reading team. You look at charts with the view_chart tool "
                  "('Action: view_chart' and on the next line 'full', or an x label to zoom on it) and report exactly "
                  "what you were asked to read as one line 'Readings (SERIES): LABEL = VALUE, LABEL = VALUE'."),
    "answerer": "You are the answerer of a chart-reading team. Reply with one line 'Answer: <value>' from the analyst's result (a bare number or a label).",
}


@register
class ChartQA(Environment):
    name = "chart_qa"
    stands_in_for = "chart QA (ChartQA)"
    modality = "image"
    topology = "multi"
    description = "analyst, perceiver and answerer answer questions about bar and line charts rendered with matplotlib"
    not_applicable = {
        "A.6": "a repeated message or tool call leaves the values the team passes on unchanged: 0 of 28 attempts failed the task",
    }
    agents = [
        AgentInfo(name="analyst", role="orchestrator", description="plans, checks readings, computes"),
        AgentInfo(name="perceiver", role="worker", description="looks at the chart and reads values"),
        AgentInfo(name="answerer", role="worker", description="writes the final answer"),
    ]
    tools = {
        "view_chart": ToolSpec("view_chart", "show the chart ('full') or zoom on one x label; returns the caption and the image",
                               "view", view_chart),
        "calculate": ToolSpec("calculate", "evaluate an arithmetic expression", "expression", calculate),
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        return [make_task(seed, i) for i in range(n)]

    def system_prompt(self, agent: str, task: Task) -> str:
        return _PROMPTS[agent]

    def program(self, task: Task, rt: Runtime) -> str | None:
        vision = not rt.model.startswith("faultlens-sim/")
        overview = ""
        if task.metadata.get("glance"):
            seen, _ = self._perceive(rt, task, "give an overview of the chart (type, series, labels, axis).", vision)
            overview = f"\nOverview from the perceiver: {seen}"
        analyst = Conversation().user(f"Question: {task.query}\nChart: {task.metadata['chart_id']}{overview}\nWrite the plan.")
        analyst.assistant(rt.ask("analyst", analyst.messages, kind=StepKind.plan))
        analyst.user("Delegate the reading.")
        delegation = rt.ask("analyst", analyst.messages, kind=StepKind.message)
        analyst.assistant(delegation)
        for _ in range(8):
            if delegation.startswith("perceiver:"):
                readings, shown = self._perceive(rt, task, delegation.split(":", 1)[1].strip(), vision)
                prefix = "Re-read by the perceiver:" if "zoom on" in delegation else "From the perceiver:"
                analyst.user(f"{prefix} {readings}\n{shown}")
            elif (action := parse_action(delegation)) is not None:
                output = rt.tool("analyst", action.tool, action.argument)
                analyst.user(f"Output of {action.tool}:\n{output}")
            elif (result := _RESULT.search(delegation)) is not None:
                reply = rt.ask("answerer", Conversation().user(
                    f"Question: {task.query}\nFrom the analyst:\nResult: {result.group(1)}").messages, kind=StepKind.final_answer)
                found = _ANSWER.search(reply)
                return found.group(1) if found else None
            elif (found := _ANSWER.search(delegation)) is not None:
                rt.steps[-1].kind = StepKind.final_answer
                return found.group(1)
            else:
                analyst.user("Continue.")
            delegation = rt.ask("analyst", analyst.messages, kind=StepKind.message)
            analyst.assistant(delegation)
        return None

    def _perceive(self, rt: Runtime, task: Task, instruction: str, vision: bool) -> tuple[str, str]:
        """The perceiver's turn: view the chart, read. Returns its readings and the caption it saw."""
        conv = Conversation().user(f"Instruction from the analyst: {instruction}\nChart: {task.metadata['chart_id']}")
        caption_seen, media = "", cast(list[Media], [])
        for _ in range(3):
            reply = rt.ask("perceiver", conv.messages)
            action = parse_action(reply)
            if action is None:
                rt.steps[-1].media = list(media)  # the image it read from
                return reply, caption_seen
            conv.assistant(reply)
            output = rt.tool("perceiver", action.tool, action.argument)
            if action.tool == "view_chart":
                media = view_media(action.argument, task)
                rt.steps[-1].media = list(media)
                caption_seen = output if output.startswith("Chart") else caption_seen
            pngs = [__import__("base64").b64decode(m.data) for m in media if m.data]
            conv.messages.append({"role": "user", "content": user_content(f"Output of {action.tool}:\n{output}", pngs, vision)})
        return "Readings (none): no reading was made.", caption_seen

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        ok = answer is not None and _same(answer, task.reference_answer or "")
        return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator="chart_qa.exact",
                       detail=f"expected {task.reference_answer!r}, got {answer!r}")

    def policy(self) -> ChartPolicy:
        return ChartPolicy()

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        if task is None:
            return [REGIONS, PRODUCTS, MONTHS, SERIES]
        return [list(task.metadata["labels"]), [name for name, _ in task.metadata["series"]]]

    def mutators(self):
        return mistakes.MUTATORS


def _same(answer: str, reference: str) -> bool:
    try:
        return abs(float(answer.replace(",", "")) - float(reference)) < 1e-6
    except ValueError:
        return answer.strip().lower() == reference.strip().lower()
