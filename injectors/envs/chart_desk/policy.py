"""The simulated agents of `chart_desk`: a function of the chat request PydanticAI sends for each agent.

Each agent reads the request as PydanticAI builds it from its message
history: the system prompt, the user prompt, assistant turns with their
`tool_calls`, `role: "tool"` returns and, after a `view_chart` return, the
user message PydanticAI adds with the image part (`ToolReturn.content`).
Replies are text in the environments' action form (`wire.render_call`), which
the endpoint turns into an OpenAI tool call, or plain text. A competent desk:

- **lead** plans (`Plan:` lines, chart_qa's plan vocabulary) and asks the
  `chart_reader` agent (the tool `ask_chart_reader`) for the readings; checks
  them against the chart caption the reader passes on (every label asked for
  on the chart, every value within the y axis) and asks for a zoomed re-read of
  a reading that fails; sends arithmetic to the `calculator` agent
  (`ask_calculator`) and reports the structured `ChartAnswer` (the output tool
  `final_result`), taking a calculator's result as the answer;
- **chart_reader** calls `view_chart` (`full`, or the one x label to zoom on),
  reads the values it was asked for from the image, and reports one line
  `Readings (SERIES): LABEL = VALUE, ...` followed by the caption it saw. With
  no image in its request it reports no readings;
- **calculator** evaluates the expression with `evaluate` and reports
  `Result: N`.

The simulated reader 'sees' the chart by the id in the caption `view_chart`
returns beside the image (the data behind the chart), so a reader shown no
image reads nothing. Recovered mistakes (rate `noise`): the reader slips a
digit (a value outside the axis) or a label and the lead's check has it
re-read; a zoom asked with the label in lower case (the tool says no such
label, the reader asks again); the calculator's expression gets a stray
operator and it retries.
"""

from __future__ import annotations

import re
from typing import Any

from faultlens.middleware.replay.session import canonical

from ..agents_desk.wire import Call, history, render_call
from ..base import stable_seed
from ..chart_qa.env import plan_for, requested
from ..chart_qa.world import AXIS, compute, parse_plan, parse_readings
from ..framework import message_text
from .world import CHART_ID, chart_task

XLABELS = re.compile(r"x labels: (.+?)\. y axis")
RESULT = re.compile(r"^Result: (.+?)\s*$", re.M)
MAX_REREADS = 1  # one re-read mends a slip (a slip misreads one label); more would hide real failures
DELEGATES = {"ask_chart_reader": "chart_reader", "ask_calculator": "calculator"}


def images_after_last_tool(messages: list[dict[str, Any]]) -> int:
    """How many image parts the request carries after its last tool return (what the agent is shown now)."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "tool"), default=-1)
    count = 0
    for m in messages[last + 1:]:
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, list):
            count += sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url")
    return count


def answer_call(answer: str, reasoning: str, thought: str = "") -> str:
    return render_call("final_result", {"answer": answer, "reasoning": reasoning}, thought)


class DeskPolicy:
    """The simulated chart desk: `respond(agent slug, request, sim) -> text`."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages = [dict(m) for m in request.get("messages") or []]
        key = canonical([[m.get("role"), message_text(m.get("content")), m.get("tool_calls")] for m in messages])

        def chance(label: str) -> bool:
            noise = float(sim.get("noise", 0.0))
            return noise > 0 and (stable_seed(sim.get("seed", 0), agent, key, label) % 10_000) / 10_000 < noise

        users = [message_text(m.get("content")) for m in messages if m.get("role") == "user"]
        prompt = users[0] if users else ""
        calls = history(messages, Call)
        if agent == "lead":
            return self.lead(prompt, calls, chance)
        if agent == "reader":
            return self.reader(prompt, calls, images_after_last_tool(messages), chance, sim)
        if agent == "calculator":
            return self.calculator(prompt, calls, chance)
        raise ValueError(f"chart_desk: no simulated agent {agent!r}")

    # -- lead ---------------------------------------------------------------
    def lead(self, question: str, calls: list[Call], chance) -> str:
        question = question.split("\n", 1)[0]
        plan_lines = plan_for(question)
        if not calls:
            plan = "Plan:\n" + "\n".join(f"- {line}" for line in plan_lines + ["answer: the result"])
            read = dict(line.split(": ", 1) for line in plan_lines)["read"]
            return render_call("ask_chart_reader", {"instruction": f"read {read}"}, plan)
        planned = parse_plan(calls[0].thought) or dict(line.split(": ", 1) for line in plan_lines)
        returned = [c for c in calls if c.result is not None]
        sums = [c for c in returned if c.tool == "ask_calculator"]
        if sums:  # the calculator's result is the answer (it is the last step of every plan that needs it)
            found = RESULT.search(sums[-1].result or "")
            value = found.group(1) if found else "unknown"
            expr = str(sums[-1].args.get("expression", ""))
            return answer_call(value, f"{expr} = {value}, computed by the calculator.")
        readings = [c.result or "" for c in returned if c.tool == "ask_chart_reader"]
        values: dict[str, int] = {}
        for text in readings:
            for line in text.splitlines():
                values.update(parse_readings(line)[1])
        seen = "\n".join(readings)
        axis = AXIS.findall(seen)
        ymax = int(axis[-1]) if axis else 100
        shown = XLABELS.search(seen)
        chart_labels = [label.strip() for label in shown.group(1).split(",")] if shown else list(values)
        wanted, series = requested(planned.get("read", "every"), chart_labels)
        rereads = sum(1 for c in calls if c.tool == "ask_chart_reader" and "zoom on" in str(c.args.get("instruction")))
        bad = [label for label in wanted if label not in values or not 0 <= values[label] <= ymax]
        if bad and rereads < MAX_REREADS:
            of = f" of {series}" if series else ""
            return render_call("ask_chart_reader", {"instruction": f"zoom on {bad[0]}{of} and read it again"},
                               f"The reading of {bad[0]} fails the check against the chart; asking for a re-read.")
        used = {label: values[label] for label in wanted if label in values}
        expression, direct = compute(planned.get("compute", ""), used)
        head = f"Check: {len(wanted)} reading(s), each on the chart and within 0 to {ymax}."
        listed = ", ".join(f"{k} = {v}" for k, v in used.items())
        if direct is not None:
            return answer_call(direct, f"From the readings {listed}: {planned.get('compute', '')} is {direct}.", head)
        return render_call("ask_calculator", {"expression": expression}, head)

    # -- chart_reader ---------------------------------------------------------
    def reader(self, instruction: str, calls: list[Call], images: int, chance, sim: dict[str, Any]) -> str:
        zoom = re.search(r"zoom on (\w+)", instruction)
        views = [c for c in calls if c.tool == "view_chart"]
        if not calls or (calls[-1].tool == "view_chart" and (calls[-1].result or "").startswith("error") and len(views) < 3):
            target = zoom.group(1) if zoom else "full"
            if zoom and not views and chance("lower-case-label"):
                target = target.lower()
            return render_call("view_chart", {"view": target}, "Looking at the chart." if not zoom else f"Zooming on {target}.")
        last = calls[-1].result or ""  # what its last tool call gave it: the reader reads from that look only
        chart = CHART_ID.search(last)
        if chart is None or images == 0:
            return "Readings (none): the chart could not be shown."
        try:
            task = chart_task(chart.group(1))
        except KeyError:
            return "Readings (none): the chart could not be shown."
        md = task.metadata
        series = {name: vals for name, vals in md["series"]}
        zoomed = re.search(r"zoomed on (\w+)", last)
        read = instruction.split("read ", 1)[-1].strip().rstrip(".")
        labels, name = requested(read, md["labels"])
        if zoomed:
            labels = [zoomed.group(1)]
            of = re.search(r"zoom on \w+ of (\w+)", instruction)
            name = of.group(1) if of else None
        if name not in series:
            name = md["series"][0][0]  # no (known) series named: the first one in the legend
        data = dict(zip(md["labels"], series[name]))
        pairs = [(label, data[label]) for label in labels if label in data]
        # a look at a whole chart is where slips happen: either of two glances may slip (a zoom does not)
        if not zoomed and pairs and (chance("misread") or chance("misread-again")):
            # a recovered slip: a digit doubled (outside the axis) or a label misspelt; the lead's check catches it
            k = stable_seed(sim.get("seed", 0), "misread", instruction) % len(pairs)
            label, value = pairs[k]
            pairs[k] = (label, int(f"{value}{value % 10}") + md["ymax"]) if k % 2 == 0 else (label[:-1], value)
        body = ", ".join(f"{label} = {value}" for label, value in pairs)
        return f"Readings ({name}): {body}\n{last}"

    # -- calculator -----------------------------------------------------------
    def calculator(self, expression: str, calls: list[Call], chance) -> str:
        expression = expression.split("Evaluate: ", 1)[-1].strip()
        evals = [c for c in calls if c.tool == "evaluate"]
        last = (evals[-1].result or "").strip() if evals else ""
        if evals and re.fullmatch(r"-?\d+(?:\.\d+)?", last):
            return f"Result: {last}"
        if len(evals) >= 2:
            return "Result: unknown"
        expr = expression + " +" if not evals and chance("calc") else expression
        return render_call("evaluate", {"expression": expr}, "Evaluating the expression." if not evals else "Fixing the expression.")
