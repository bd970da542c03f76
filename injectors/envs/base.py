"""The environment interface: tasks, tools, a team of agents, an evaluator.

How to add an environment (an afternoon's work)
-----------------------------------------------
1. Create the package `injectors/envs/<name>/`, named as the environment:
   `env.py` holds a subclass of `Environment` decorated with `@register`,
   `__init__.py` imports it (`injectors.envs.get(name)` / `names()` import
   every package here), `mistakes.py` its error rules, and `world.py` or
   `tasks.py` what the agents and the rules share. Its tests go in
   `tests/injectors/envs/test_<name>.py`.
2. Set the class attributes `name`, `modality` ("text" | "image" | "video"),
   `topology` ("single" | "multi"), `agents` (list of `AgentInfo`, the first is
   the one that starts) and `tools` (tool name → `ToolSpec`).
3. Implement:
   - `tasks(seed, n)`: n `Task`s generated from the seed, each with its
     `reference_answer` and whatever data the tools need in `task.metadata`
     (deterministic: same seed, same tasks, byte for byte).
   - `system_prompt(agent, task)`: the prompt a real LLM agent gets. Its first
     line must be `You are the <agent> ...` (the simulated model reads it to know
     which agent it plays). Lessons are appended by `Runtime`, not by you.
   - `program(task, rt)`: the team's control flow. Every model call is
     `rt.ask(agent, messages, kind=...)` and every tool call is
     `rt.tool(agent, tool, argument)`; nothing else may reach a model or a tool
     (that is what makes record/replay exact). Return the final answer text.
   - `evaluate(task, answer)`: an `Outcome` (success, score, evaluator, detail).
   - `policy()`: the simulated agents' `SimPolicy` (see `injectors.sim`): a
     function of the conversation an agent is given and nothing else.
   - optionally `distractor_groups(task)`: groups of interchangeable values
     (names of people, towns, columns...) that error generators swap to make
     errors look natural (`task` is None when a simulated agent asks: return
     what you can without it), and `mutators()`: environment-specific error
     rules per mode (`{"C.1": [rule, ...]}`, rule: `GenInput -> Generated |
     None`, see `injectors.generators`), tried before the generic ones.
4. Add a test that a seed run succeeds with simulated agents, replays with zero
   drift, and that each of its rules makes the task fail.

Steps: by default exactly one `Step` per recorded call. A model call becomes a `plan`,
`message` or `final_answer` step (the `kind` you pass to `ask`), or a
`tool_call` step if its text is an action (see `parse_action`); a tool call
becomes a `tool_result` step of the calling agent. So step index t is call t
of the `middleware.replay.session.Session`, and replacing call t's response replaces
step t.

An environment that runs a real agent framework (set `framework`, e.g. "ag2")
cannot keep that rule: the framework makes control calls that are no step
(an AG2 group chat's speaker selection) and steps with no call (its code
executor's output). Its `program` adds steps with `rt.record_step` and sets
`rt.step_calls`, the recorded call of each step (None: no call). Injection
then replaces the response of step t's call (built by `injected_response`),
and only steps with a call are candidates. Framework environments are listed
by `envs.names(include_frameworks=True)`, not by `envs.names()`, and need their
framework installed (`requires`) to run or to build the bundled benchmark.
`injectors.envs.framework` has what they share (`FrameworkEnvironment`, whose
`program` opens with `framework_imports` around the framework's imports and
`simulated_endpoint` for the run's endpoint, and
`InProcessEndpoint`: the framework's OpenAI client talks to a `ChatProxy`
over the run's session; `reply=agents_desk.wire.completion` answers with tool
calls), and `injectors.envs.tool_steps.StepLog` records a tool-calling team's
steps from its recorded replies; `ag2_experts` and `smol_analyst` are
examples, `adk_team` one of a tool-calling team.

Actions are text, so they work with any model: a reply whose first line is
`Action: <tool>` calls that tool with the rest of the reply as its single
argument (a fenced code block is unwrapped). Anything before that line is
the agent's thought.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from faultlens.middleware.errors import ConfigError
from faultlens.middleware.model.trace import AgentInfo, Lesson, Modality, Outcome, Source, Step, StepKind, Task, Trace
from faultlens.middleware.replay.session import CallRecord, Recording, Session

from ..seeding import stable_seed as stable_seed  # re-exported: the environments seed with it
from ..sim import SIM_PREFIX as SIM_PREFIX
from ..sim import ensure_registered

Topology = Literal["single", "multi"]



@dataclass(frozen=True)
class ToolSpec:
    """A tool: `run(argument, task) -> output text`. Tools are deterministic
    functions of their argument and the task (so replay is exact)."""

    name: str
    description: str
    argument: str
    run: Callable[[str, Task], str]


@dataclass(frozen=True)
class Action:
    tool: str
    argument: str
    thought: str = ""


_ACTION = re.compile(r"^Action:\s*([A-Za-z_][\w.-]*)\s*$", re.M)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```\s*$", re.S)


def parse_action(text: str) -> Action | None:
    """Read `Action: <tool>` + argument from a reply, or None if it is not an action."""
    match = _ACTION.search(text)
    if match is None:
        return None
    thought = text[: match.start()].strip()
    argument = text[match.end():].strip()
    fenced = _FENCE.match(argument)
    if fenced:
        argument = fenced.group(1)
    return Action(match.group(1), argument, thought)


def render_action(tool: str, argument: str, thought: str = "", code: bool = False) -> str:
    """The text form of an action; `parse_action(render_action(...))` gives it back."""
    body = f"```python\n{argument}\n```" if code else argument
    head = f"{thought}\n" if thought else ""
    return f"{head}Action: {tool}\n{body}"


@dataclass
class RunResult:
    trace: Trace
    recording: Recording
    answer: str | None
    # The recorded call of each step (None: the step has no call); None means step t is call t.
    step_calls: list[int | None] | None = None
    # The framework's own log of the run (deterministic text), when it keeps one.
    native_log: str | None = None

    def call_of(self, t: int) -> int | None:
        """The index of the recorded call that made step t (None if no call did)."""
        return t if self.step_calls is None else self.step_calls[t]


class Environment:
    """Base class of task environments. See the module docstring."""

    name: ClassVar[str] = ""
    modality: ClassVar[Modality] = "text"
    topology: ClassVar[Topology] = "single"
    agents: ClassVar[list[AgentInfo]] = []
    tools: ClassVar[dict[str, ToolSpec]] = {}
    description: ClassVar[str] = ""
    # The task family and the public benchmark it stands in for, as the datasheet names it ("code with tests
    # (HumanEval, MBPP)"): the bundled benchmark's spread beside Who&When Pro's 26 scenario benchmarks.
    stands_in_for: ClassVar[str] = ""
    # Modes whose injected errors essentially never make this environment's task fail (yield under 5% of
    # attempts), each with a one-line reason. Injection skips them here; the datasheet lists them.
    not_applicable: ClassVar[dict[str, str]] = {}
    # The agent framework the team runs on (None: the team is written against `Runtime` directly).
    framework: ClassVar[str | None] = None
    # The Python modules the framework needs (its optional extra); `missing()` says which are not installed.
    requires: ClassVar[tuple[str, ...]] = ()
    # The optional extra that installs them: `frameworks`, or `frameworks2` for frameworks that cannot share its
    # resolve (they live in their own virtualenv; `benchmark.shards` builds their shards with its interpreter).
    extra: ClassVar[str] = "frameworks"

    def missing(self) -> list[str]:
        """The modules of `requires` that cannot be imported here (the optional extra is not installed)."""
        import importlib.util

        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def elsewhere(self) -> Path | None:
        """The interpreter that runs this environment when its framework is not installed here but in the virtualenv
        of its extra (`extra_python`); None when it runs here; a `ConfigError` saying how to make one when neither can.
        A shard's builder, a replay lab team's program and the detector's data script use it."""
        absent = self.missing()
        if not absent:
            return None
        python = extra_python(self.extra)
        if python is None:
            raise ConfigError(f"{self.name} needs {' and '.join(absent)}, which {sys.executable} cannot import, and there "
                              f"is no virtualenv of its extra: pip install 'faultlens[{self.extra}]' here, or make one at "
                              f".venv-{self.extra} (`make test` does; `make frameworks2` makes .venv-frameworks2 alone), "
                              f"or set FAULTLENS_{self.extra.upper()}_PYTHON to a Python that has the extra")
        return python

    # -- to implement -------------------------------------------------------
    def tasks(self, seed: int, n: int) -> list[Task]:
        raise NotImplementedError

    def system_prompt(self, agent: str, task: Task) -> str:
        raise NotImplementedError

    def program(self, task: Task, rt: Runtime) -> str | None:
        raise NotImplementedError

    def evaluate(self, task: Task, answer: str | None) -> Outcome:
        raise NotImplementedError

    def policy(self):  # -> injectors.sim.SimPolicy
        raise NotImplementedError

    def distractor_groups(self, task: Task | None) -> list[list[str]]:
        return []

    def mutators(self) -> dict[str, list[Callable[[Any], Any]]]:
        return {}

    # -- provided -----------------------------------------------------------
    def injected_response(self, record: CallRecord, text: str) -> Any:
        """The response that puts the generated action `text` at the recorded call `record`."""
        return {"output": text} if record.kind == "tool" else {"content": text}

    @property
    def agent_names(self) -> list[str]:
        return [a.name for a in self.agents]

    def sim_model(self) -> str:
        return f"{SIM_PREFIX}/{self.name}"

    def run(
        self,
        task: Task,
        *,
        model: str | None = None,
        session: Session | None = None,
        sim: dict[str, Any] | None = None,
        lessons: dict[str, list[Lesson]] | None = None,
        trace_id: str | None = None,
        tracer: Any = None,
    ) -> RunResult:
        """Run the team on `task` and return the trace, the recording and the answer.

        `model`: a litellm model for every agent (default: the simulated model
        `faultlens-sim/<env>`). `session`: a `middleware.replay.session.Session` (pass a
        replaying one to warm-start; `Drift` propagates). `sim`: the simulated
        agents' settings (`injectors.sim.SimConfig` as a dict), ignored by real
        models. `lessons`: per agent, lessons put into its system prompt.
        `tracer`: a `middleware.capture.tracer.Tracer`; when given, the run is also
        recorded as OpenTelemetry spans through it.
        """
        rt = Runtime(self, task, model=model or self.sim_model(), session=session or Session(), sim=sim, lessons=lessons)
        source = Source(framework=self.framework or "faultlens", benchmark=self.name, modality=self.modality, format="faultlens")
        trace_id = trace_id or f"{self.name}-{task.id}"
        metadata: dict[str, Any] = {"environment": self.name, "topology": self.topology, "model": rt.model}
        if rt.model.startswith(SIM_PREFIX + "/"):
            # The simulated agents' settings make them the same agents again: what a rerun needs.
            metadata["sim"] = rt.sim
        if tracer is not None:
            # Each step is also a span of this run in the tracer (and so in its store and exporters).
            rt.tracer = tracer
            with tracer.run(task=task, agents=list(self.agents), source=source, trace_id=trace_id, metadata=metadata) as run:
                answer = self.program(task, rt)
                rt.flush()
                outcome = self.evaluate(task, answer)
                run.record_outcome(outcome.success, score=outcome.score, detail=outcome.detail, evaluator=outcome.evaluator)
        else:
            answer = self.program(task, rt)
            outcome = self.evaluate(task, answer)
        trace = Trace(
            id=trace_id,
            task=task,
            agents=list(self.agents),
            steps=rt.steps,
            outcome=outcome,
            source=source,
            created_at=0.0,
            metadata=metadata,
        )
        return RunResult(trace, rt.session.recorded, answer, rt.step_calls, rt.native_log)


class Runtime:
    """What an environment's `program` talks to: `ask` a model, call a `tool`.

    Both go through the `Session`, so they are recorded (or replayed), and each
    becomes one `Step`.
    """

    def __init__(
        self,
        env: Environment,
        task: Task,
        *,
        model: str,
        session: Session,
        sim: dict[str, Any] | None = None,
        lessons: dict[str, list[Lesson]] | None = None,
    ) -> None:
        self.env, self.task, self.model, self.session = env, task, model, session
        self.sim = sim or {}
        self.lessons = lessons or {}
        self.steps: list[Step] = []
        self.tracer: Any = None
        self._emitted = 0
        # Set by programs whose steps are not one per call (see the module docstring).
        self.step_calls: list[int | None] | None = None
        # Set by a framework environment's program: the framework's own log of the run (`RunResult.native_log`).
        self.native_log: str | None = None

    def _add(self, step: Step) -> None:
        # Spans are emitted one step late, so a program may still adjust the
        # step it just got (its kind, its media) before it is recorded.
        self.flush()
        self.steps.append(step)

    def record_step(self, step: Step) -> None:
        """Add a step the program made itself (a framework environment's message); its index must be next."""
        if step.index != len(self.steps):
            raise ValueError(f"step index {step.index} is not the next one ({len(self.steps)})")
        self._add(step)

    def flush(self) -> None:
        """Emit the steps not yet recorded as spans (called by `Environment.run` at the end)."""
        if self.tracer is None:
            return
        while self._emitted < len(self.steps):
            self._emit(self.steps[self._emitted])
            self._emitted += 1

    def _emit(self, step: Step) -> None:
        """Record `step` as one GenAI-convention span of the tracer's current run."""
        from faultlens.middleware.spans import conventions as S

        here = self.tracer.call_context()
        if here is None:
            return
        attributes: dict[str, Any] = {S.STEP_KIND: step.kind.value, S.AGENT_NAME: step.agent, S.CONVERSATION_ID: here.run.id,
                                      S.CONTENT: step.content, S.STEP_INDEX: step.index}
        if step.tool_name is not None:
            attributes[S.TOOL_NAME] = step.tool_name
            attributes[S.TOOL_ARGUMENTS] = json.dumps(step.tool_arguments, ensure_ascii=False)
        if step.tool_result is not None:
            attributes[S.TOOL_RESULT] = json.dumps(step.tool_result, ensure_ascii=False)
        if step.model:
            attributes[S.REQUEST_MODEL] = step.model
        if step.lessons:
            attributes[S.LESSONS] = list(step.lessons)
        if step.media:
            attributes[S.MEDIA] = json.dumps([m.model_dump(mode="json", exclude_none=True) for m in step.media])
        if step.metadata:
            attributes[S.STEP_METADATA] = json.dumps(step.metadata, ensure_ascii=False)
        self.tracer.otel.start_span(f"{step.kind.value} {step.agent}", context=here.context, attributes=attributes).end()

    # The system prompt of an agent, with its lessons (issue 8's hook).
    def system(self, agent: str) -> str:
        prompt = self.env.system_prompt(agent, self.task)
        shown = self.lessons.get(agent) or []
        if shown:
            lines = [f"- [{l.mode or 'general'}] When: {l.situation} Do: {l.advice}" for l in shown]
            prompt += "\n\nLessons from earlier runs (apply them when the situation matches):\n" + "\n".join(lines)
        return prompt

    def ask(self, agent: str, messages: Sequence[dict[str, str]],
            kind: StepKind | str | Callable[[str], StepKind] = StepKind.message) -> str:
        """One model call by `agent`. `messages` excludes the system prompt (added here).

        `kind` is the step kind of the reply, or a function of the reply text
        that decides it (e.g. a final answer when it has an 'Answer:' line); a
        reply that is an action is a `tool_call` step regardless.
        """
        full = [{"role": "system", "content": self.system(agent)}, *messages]
        request: dict[str, Any] = {"model": self.model, "messages": full, "temperature": 0}
        if self.model.startswith(SIM_PREFIX + "/"):
            request["sim"] = self.sim
        response = self.session.call("model", agent, request, self._complete)
        text = str(response.get("content") or "")
        action = parse_action(text)
        index = len(self.steps)
        shown = [l.id for l in self.lessons.get(agent) or []]
        if action is not None:
            spec = self.env.tools.get(action.tool)
            step = Step(index=index, agent=agent, kind=StepKind.tool_call, content=text, tool_name=action.tool,
                        tool_arguments={spec.argument if spec else "input": action.argument}, model=self.model, lessons=shown)
        else:
            resolved = kind(text) if callable(kind) else kind
            step = Step(index=index, agent=agent, kind=StepKind(resolved), content=text, model=self.model, lessons=shown)
        self._add(step)
        return text

    def tool(self, agent: str, name: str, argument: str) -> str:
        """Run tool `name` for `agent` (an unknown tool answers with the tools that exist)."""
        request = {"tool": name, "argument": argument}

        def live(req: dict[str, Any]) -> dict[str, Any]:
            spec = self.env.tools.get(req["tool"])
            if spec is None:
                return {"output": f"Unknown tool '{req['tool']}'. Available tools: {', '.join(self.env.tools)}."}
            return {"output": spec.run(req["argument"], self.task)}

        output = str(self.session.call("tool", agent, request, live)["output"])
        self._add(Step(index=len(self.steps), agent=agent, kind=StepKind.tool_result, content=output,
                       tool_name=name, tool_arguments={"input": argument}, tool_result=output, metadata={"role": "tool"}))
        return output

    def act(self, agent: str, text: str) -> str | None:
        """If `text` is an action, run its tool and return the output (else None)."""
        action = parse_action(text)
        if action is None:
            return None
        return self.tool(agent, action.tool, action.argument)

    def _complete(self, request: dict[str, Any]) -> dict[str, Any]:
        import litellm

        ensure_registered()
        kwargs: dict[str, Any] = {}
        if "sim" in request:
            kwargs["metadata"] = {"faultlens_sim": request["sim"]}
        else:
            kwargs["num_retries"] = 2  # a real provider's transient failures (rate limits, timeouts)
        response = litellm.completion(model=request["model"], messages=request["messages"],
                                      temperature=request.get("temperature", 0), **kwargs)
        return {"content": response.choices[0].message.content or ""}


def last_assistant(messages: Sequence[dict[str, str]]) -> str | None:
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return m.get("content") or ""
    return None


@dataclass
class Conversation:
    """A helper for programs: an agent's running message list."""

    messages: list[dict[str, Any]] = field(default_factory=list)  # content: text, or text and image parts

    def user(self, text: str) -> Conversation:
        self.messages.append({"role": "user", "content": text})
        return self

    def assistant(self, text: str) -> Conversation:
        self.messages.append({"role": "assistant", "content": text})
        return self


def extra_python(extra: str) -> Path | None:
    """The Python of the virtualenv that holds the optional `extra`: $FAULTLENS_<EXTRA>_PYTHON, else
    `.venv-<extra>/bin/python` under the working folder (where `make test` puts it); None when neither exists."""
    named = os.environ.get(f"FAULTLENS_{extra.upper()}_PYTHON")
    path = Path(named) if named else Path(f".venv-{extra}") / "bin" / "python"
    return path.absolute() if path.is_file() else None  # not resolve(): a venv's python is a symlink out of it
