"""`smol_analyst`: a real smolagents `CodeAgent` with a managed sub-agent, on simulated models.

The team is smolagents (1.26.0, the `frameworks` extra) running unchanged:

- **analyst**, the manager `CodeAgent` (planning every 3 steps): it answers
  smolagents' planning prompt with a facts survey and a plan (which regions
  to look up, which computation), and follows that plan: it delegates the data look-up to its
  managed agent by writing code (`data = data_agent(task="...")`), checks the
  report (asks again for a region it lacks; otherwise copies the figures into
  lists and prints their month counts), then writes the code that computes the
  answer on those lists (smolagents' executor keeps them) and calls `final_answer(...)`;
- **data_agent**, a managed `CodeAgent` with two tools, `lookup_sales(region)`
  and `lookup_targets(region)` (the task's monthly sales, or sales targets, of
  a region): it looks up what its task asks for, for the regions it names, and
  returns them as `final_answer("North: 12, 15, 9\\n...")`.

Both run their code in smolagents' own `LocalPythonExecutor`. Each agent's
`OpenAIServerModel` has its own base URL (`/agent/<name>/v1`) served in-process
by a `middleware.replay.endpoint.ChatProxy` over the run's `replay.Session` (see
`ag2_experts` for the mechanism); the simulated policy reads smolagents'
requests (list-of-parts content, the "New task:" message, "Observation:" and
"Error: ... Now let's retry" turns, the managed agent's "You're a helpful
agent named 'data_agent'" task, the max-steps request) and answers with
`Thought:` + `<code>` blocks.

Steps: each model output is a step (a `plan`; a `message` when its code calls
the managed agent, or is the data agent's `final_answer`, its report to the
analyst; a `tool_call` of the lookup tool its code calls, or of
`python_interpreter` for the analyst's own code; a `final_answer` when the
analyst's code calls `final_answer`), and each code execution's observation
is a `tool_result` step of tool `python_interpreter` with no call; the
managed agent's steps come between the manager's delegation and its
observation, as they happen. `Runtime.step_calls` maps each model-output step
to its call. `Runtime.native_log` is smolagents' own record of the run (its
memory steps, see `native_log`).

Recovered mistakes in seeds (rate `noise`): the data agent first looks a
region up in lower case, is told the regions that exist, and retries; or the
analyst's first computation misses a closing parenthesis and is rewritten
after smolagents' parse error. (Not a misspelt name: smolagents' executor
resolves an undefined name to the closest defined one.)
"""

from __future__ import annotations

import io
import json
import logging
import random
import re
from contextlib import redirect_stdout
from typing import Any, ClassVar

from faultlens.middleware.model.trace import AgentInfo, Outcome, Step, StepKind, Task
from faultlens.middleware.replay.session import canonical

from .. import register
from ..base import Runtime, stable_seed
from ..framework import BASE_URL, TEXT_ONLY_NOT_APPLICABLE, FrameworkEnvironment, message_text
from .mistakes import MUTATORS
from .tasks import FAMILY_OPERATION, MONTHS, REGIONS, compute, copy_code, plan_text, read_operation

PLANNING_INTERVAL = 3  # the analyst plans before its first action, and again every 3 actions
_CODE = re.compile(r"<code>\n?(.*?)\n?</code>", re.S)
_REGION_LINE = re.compile(r"^(%s): ([\d, ]+)$" % "|".join(REGIONS), re.M)


def _regions_in(text: str) -> list[str]:
    found = [(m.start(), r) for r in REGIONS for m in re.finditer(rf"\b{r}\b", text)]
    return list(dict.fromkeys(r for _, r in sorted(found)))


def _code_of(text: str) -> str:
    m = _CODE.search(text)
    return m.group(1) if m else text


STUCK = "got stuck and failed"  # smolagents' request for an answer once an agent reaches max_steps
COPY_MARK = 'len(months), "months")'  # the analyst's check of a report (see `smol_tasks.copy_code`)
TOOLS = ("lookup_sales", "lookup_targets")
_TOOL_CALL = re.compile(r"\b(%s)\(" % "|".join(TOOLS))


class SmolPolicy:
    """The simulated analyst and data agent: functions of the request smolagents sends."""

    def respond(self, agent: str, request: dict[str, Any], sim: dict[str, Any]) -> str:
        messages = [dict(m, content=message_text(m.get("content"))) for m in request.get("messages") or []]
        key = canonical([m["content"] for m in messages])

        def chance(label: str) -> bool:
            noise = float(sim.get("noise", 0.0))
            return noise > 0 and stable_seed(sim.get("seed", 0), agent, key, label) % 10_000 / 10_000 < noise

        if messages and messages[0].get("role") == "system" and STUCK in messages[0]["content"]:
            # smolagents asks for an answer from the memory of an agent that ran out of steps: it has none
            return "I could not finish the task within my steps."
        body = [m for m in messages if m.get("role") != "system"]
        task = body[0]["content"] if body else ""
        last = body[-1]["content"] if body else ""
        turns = sum(1 for m in body if m.get("role") == "assistant")
        if agent == "data_agent":
            return self.data_agent(task, last, turns, chance)
        if agent == "analyst":
            return self.analyst(task, body, last, chance)
        raise ValueError(f"smol_analyst: no simulated agent {agent!r}")

    @staticmethod
    def data_agent(task: str, last: str, turns: int, chance) -> str:
        asked = task.split("Task:", 1)[-1].split("---", 2)[0] if "Task:" in task else task
        regions = _regions_in(asked)
        if not regions:
            return "Thought: The task names no region I know.\n<code>\nfinal_answer(\"No region named in the task.\")\n</code>"
        # it looks up what it is asked for: the sales, or the targets when the task asks for targets
        tool, what = ("lookup_targets", "monthly sales targets") if "target" in asked else ("lookup_sales", "monthly sales")
        found = dict(_REGION_LINE.findall(last))
        if turns == 0 or "unknown region" in last:
            lower = turns == 0 and chance("lower")
            names = [r.lower() if lower else r for r in regions]
            loop = "\n".join(f'print("{r}: " + {tool}("{n}"))' for r, n in zip(regions, names))
            return f"Thought: I will look up the {what} of {', '.join(regions)}.\n<code>\n{loop}\n</code>"
        report = "\\n".join(f"{r}: {found[r]}" for r in regions if r in found)
        return f"Thought: I have the figures; I report them to my manager.\n<code>\nfinal_answer(\"{report}\")\n</code>"

    @staticmethod
    def analyst(task: str, body: list[dict[str, Any]], last: str, chance) -> str:
        question = task.removeprefix("New task:\n")
        family = "total" if "combined" in question else "best_gap" if "best month" in question else "mean"
        op, regions = FAMILY_OPERATION[family], _regions_in(question)
        # The plan, once made, is what the analyst follows (it says which regions and which computation).
        plans = [m["content"] for m in body if "## 2. Plan" in m["content"] and "Compute:" in m["content"]]
        planned = read_operation(plans[-1]) if plans else None
        if planned is not None:
            op, regions = planned[0], list(dict.fromkeys(planned[1]))
        if "First in part 1, write the facts survey" in last or "Now write your updated facts below" in last:
            return plan_text(regions, op, updated="updated facts" in last)
        actions = [i for i, m in enumerate(body) if m.get("role") == "assistant" and "## 2. Plan" not in m["content"]]
        if not actions:
            return (f"Thought: I need the monthly sales of {' and '.join(regions)}; my data_agent can look them up.\n"
                    f"<code>\ndata = data_agent(task=\"Look up the monthly sales of {' and '.join(regions)}.\")\n"
                    "print(data)\n</code>")
        # the figures come from the data agent's reports (the observations that hold region lines)
        data: dict[str, list[int]] = {}
        for m in body:
            if m.get("role") == "user" and "managed agent" in m["content"]:
                for region, values in _REGION_LINE.findall(m["content"]):
                    data[region] = [int(v) for v in values.replace(" ", "").split(",") if v]
        missing = [r for r in regions if r not in data]
        if missing:
            return (f"Thought: I still need {' and '.join(missing)}.\n<code>\ndata = data_agent(task=\"Look up the monthly "
                    f"sales of {' and '.join(missing)}.\")\nprint(data)\n</code>")
        # Its check of the report: the figures copied into lists (smolagents keeps them for the next action) and
        # their months counted; done again if the copy's code failed.
        checked = [i for i in actions if COPY_MARK in body[i]["content"]]
        if not checked or (checked[-1] + 1 < len(body) and "Error:" in body[checked[-1] + 1]["content"]):
            return (f"Thought: data_agent reported the figures of {' and '.join(regions)}, the regions my plan needs; "
                    f"I copy them and check each region has {MONTHS} months.\n<code>\n{copy_code(data, regions)}\n</code>")
        code = compute(op, regions)
        if "Error:" in last:
            return f"Thought: The previous code failed; here it is again.\n<code>\n{code}\n</code>"
        if chance("paren"):
            # the last line's closing parenthesis is missing: smolagents cannot parse the code, and the analyst rewrites it
            return f"Thought: I have the figures; I compute the answer.\n<code>\n{code.removesuffix(')')}\n</code>"
        return f"Thought: The figures check out; I compute the answer.\n<code>\n{code}\n</code>"


@register
class SmolAnalyst(FrameworkEnvironment):
    name = "smol_analyst"
    stands_in_for = "data analysis with code (InfiAgent-DABench)"
    framework: ClassVar[str | None] = "smolagents"
    requires: ClassVar[tuple[str, ...]] = ("smolagents",)
    modality = "text"
    topology = "multi"
    agents = [AgentInfo(name="analyst", role="manager", description="A CodeAgent that delegates look-ups and computes the answer."),
              AgentInfo(name="data_agent", role="managed agent", description="A CodeAgent that looks up regional sales.")]
    tools = {}
    description = "A smolagents CodeAgent with a managed CodeAgent answering questions over regional sales."
    not_applicable = {
        **TEXT_ONLY_NOT_APPLICABLE,
        "A.6": "a repeated code action gets the same observation and the agent moves on at its next step, well within "
               "max_steps: a repetition costs a step, never the task (tests/injectors/envs/test_smol_analyst.py)",
        "V.3": "the tools run inside smolagents' Python executor: their outputs are observations that no model call "
               "makes, so no injectable step is a tool's or the environment's output",
    }

    def tasks(self, seed: int, n: int) -> list[Task]:
        out = []
        for i in range(n):
            rng = random.Random(stable_seed(seed, self.name, i))
            data = {r: [rng.randint(10, 99) for _ in range(MONTHS)] for r in REGIONS}
            targets = {r: [rng.randint(3, 9) * 10 for _ in range(MONTHS)] for r in REGIONS}
            a, b = rng.sample(REGIONS, 2)
            family = ("total", "best_gap", "mean")[(seed + i) % 3]
            ans: int | float  # sums and gaps of integer sales; a rounded mean
            if family == "total":
                q, ans = f"What were the combined sales of the {a} and {b} regions over the last {MONTHS} months?", sum(data[a]) + sum(data[b])
            elif family == "best_gap":
                q, ans = f"By how much did the best month of the {a} region exceed the best month of the {b} region?", max(data[a]) - max(data[b])
            else:
                q, ans = f"What were the mean monthly sales of the {a} region, rounded to 1 decimal?", round(sum(data[a]) / MONTHS, 1)
            out.append(Task(id=f"{self.name}-{seed}-{i}", query=q, reference_answer=str(ans),
                            metadata={"family": family, "sales": {r: ", ".join(map(str, v)) for r, v in data.items()},
                                      "targets": {r: ", ".join(map(str, v)) for r, v in targets.items()}}))
        return out

    def system_prompt(self, agent: str, task: Task) -> str:
        return f"You are the {agent} (smolagents' own system prompt is used)."

    def policy(self) -> SmolPolicy:
        return SmolPolicy()

    def mutators(self) -> dict[str, list[Any]]:
        return MUTATORS

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return [list(REGIONS)]

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        want = task.reference_answer or ""
        try:
            ok = answer is not None and abs(float(str(answer)) - float(want)) < 1e-6
        except ValueError:
            ok = False
        return Outcome(success=ok, score=1.0 if ok else 0.0, evaluator="smol_analyst:numeric",
                       detail=f"answered {answer!r}, expected {want!r}")

    def program(self, task: Task, rt: Runtime) -> str | None:
        with self.framework_imports("smolagents"):
            from smolagents import CodeAgent, OpenAIServerModel, Tool
        endpoint = self.simulated_endpoint(rt)
        sales, targets = task.metadata["sales"], task.metadata["targets"]

        def figures(table: dict[str, str], region: str) -> str:
            if region not in table:
                return f"unknown region {region!r}; regions: {', '.join(table)}"
            return table[region]

        class LookupSales(Tool):
            name = "lookup_sales"
            description = "The monthly sales figures of a region, oldest month first, comma-separated."
            inputs = {"region": {"type": "string", "description": "the region's name, e.g. 'North'"}}
            output_type = "string"

            def forward(self, region: str) -> str:
                return figures(sales, region)

        class LookupTargets(Tool):
            name = "lookup_targets"
            description = "The monthly sales targets set for a region, oldest month first, comma-separated."
            inputs = {"region": {"type": "string", "description": "the region's name, e.g. 'North'"}}
            output_type = "string"

            def forward(self, region: str) -> str:
                return figures(targets, region)

        def model(agent: str) -> Any:
            return OpenAIServerModel(model_id=rt.model, api_base=BASE_URL.format(agent=agent),
                                     api_key="faultlens-sim", client_kwargs={"http_client": endpoint.client(), "max_retries": 0})

        from smolagents.memory import ActionStep, PlanningStep

        # Planning and action steps as they finish, per agent (a managed agent's memory is reset at each of its runs),
        # and all of them in the order they finished (the native log).
        actions: dict[str, list[Any]] = {"analyst": [], "data_agent": []}
        finished: list[tuple[str, Any]] = []

        def keep(name: str) -> Any:
            def callback(step: Any, *args: Any, **kwargs: Any) -> None:
                actions[name].append(step)
                finished.append((name, step))
            return callback

        data_agent = CodeAgent(tools=[LookupSales(), LookupTargets()], model=model("data_agent"), name="data_agent", max_steps=4,
                               description="Looks up the monthly sales (or sales targets) of the regions named in its task.",
                               verbosity_level=-1,
                               step_callbacks={ActionStep: keep("data_agent")})
        analyst = CodeAgent(tools=[], model=model("analyst"), managed_agents=[data_agent], max_steps=6, verbosity_level=-1,
                            planning_interval=PLANNING_INTERVAL,
                            step_callbacks={ActionStep: keep("analyst"), PlanningStep: keep("analyst")})
        logging.getLogger("smolagents").setLevel(logging.WARNING)
        try:
            with redirect_stdout(io.StringIO()):
                answer = analyst.run(task.query)
        except Exception:
            endpoint.reraise()
            raise
        endpoint.reraise()
        self._steps(rt, actions)
        rt.native_log = native_log(analyst.memory.steps[:1], finished)
        return None if answer is None else str(answer)

    @staticmethod
    def _steps(rt: Runtime, actions: dict[str, list[Any]]) -> None:
        """Walk the recorded calls in order; each is the next action step of its agent (see the module docstring)."""
        used = {n: 0 for n in actions}
        step_calls: list[int | None] = []
        pending: list[tuple[str, str]] = []  # the manager's observation waits for its managed agent's steps

        def add(agent: str, kind: StepKind, text: str, call: int | None) -> None:
            extra: dict[str, Any] = {"model": rt.model}
            if kind == StepKind.tool_result:
                extra = {"tool_name": "python_interpreter", "tool_result": text, "metadata": {"role": "tool"}}
            elif kind == StepKind.tool_call:
                called = _TOOL_CALL.search(_code_of(text))
                extra["tool_name"] = called.group(1) if called else "python_interpreter"
                extra["tool_arguments"] = {"code": _code_of(text)}
            rt.record_step(Step(index=len(rt.steps), agent=agent, kind=kind, content=text, **extra))
            step_calls.append(call)

        for call in rt.session.calls:
            agent = call.agent
            if agent == "analyst":
                for a, text in pending:
                    add(a, StepKind.tool_result, text, None)
                pending.clear()
            action = actions[agent][used[agent]]
            used[agent] += 1
            text = message_text(call.response["choices"][0]["message"]["content"])
            if not hasattr(action, "is_final_answer"):  # a planning step: one call, no code run
                add(agent, StepKind.plan, text, call.index)
                continue
            # A managed agent's final answer is its message to the manager; the run's final answer is the analyst's
            # (also the one smolagents asks for when the analyst ran out of steps). The analyst's delegation is a
            # message; its other code (its check, its computation when that fails) and the data agent's look-ups
            # are tool calls (of python_interpreter, or of the lookup tool its code calls).
            out_of_steps = action.error is not None and type(action.error).__name__ == "AgentMaxStepsError"
            code = _code_of(text)
            if (action.is_final_answer or out_of_steps) and agent == "analyst":
                kind = StepKind.final_answer
            elif _TOOL_CALL.search(code) or (agent == "analyst" and "<code>" in text and "data_agent(" not in code
                                             and not action.is_final_answer):
                kind = StepKind.tool_call
            else:
                kind = StepKind.message
            add(agent, kind, text, call.index)
            # what smolagents shows the model next: the observation, then the error, if any (`ActionStep.to_messages`)
            observation = "\n".join(p for p in (action.observations, f"Error:\n{action.error}" if action.error else None) if p)
            if observation and not action.is_final_answer and not out_of_steps:
                if agent == "analyst":
                    pending.append((agent, observation))
                else:
                    add(agent, StepKind.tool_result, observation, None)
        for a, text in pending:
            add(a, StepKind.tool_result, text, None)
        rt.step_calls = step_calls


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def native_log(task_steps: list[Any], finished: list[tuple[str, Any]]) -> str:
    """smolagents' own record of the run: its memory steps as smolagents serialises them (`step.dict()`, what
    `agent.memory.get_full_steps()` returns), one JSON line per step in the order they finished, with the agent's
    name and the step's type; the analyst's task first. Timings and object addresses are dropped (deterministic)."""
    lines = []
    for agent, step in [("analyst", s) for s in task_steps] + finished:
        record = step.dict()
        record.pop("timing", None)
        for message in record.get("model_input_messages") or []:
            message.pop("raw", None)
        if isinstance(record.get("model_output_message"), dict):
            record["model_output_message"].pop("raw", None)
        lines.append(_ADDRESS.sub("", json.dumps({"agent": agent, "type": type(step).__name__, **record},
                                                 sort_keys=True, ensure_ascii=False, default=str)))
    return "\n".join(lines) + "\n"
