"""Framework teams whose every model call goes through the live gateway, with simulated agents that slip and follow lessons.

A framework environment (AG2, smolagents, Magentic-One, OpenAI Agents SDK)
runs its framework's real orchestration against simulated agents behind an
in-process endpoint. `GatewayTeam` puts a `middleware.capture.live_gateway.Gateway` in
front of those agents (`framework.routed_through`): each call the framework
makes is handled by the gateway (lessons added to the system message for
enabled agents, the call recorded as a step of the run) and forwarded to the
simulated agent.

The simulated agents make mistakes and follow lessons under the rule of the
`research_desk` team (`injectors.sim.SimContext`):

- **tendencies**: per agent, per failure mode, the probability that a call of
  that agent slips; the reply is rewritten by the environment's own error rule
  of that mode (`TemplateGenerator`, the injection pipeline's generators). A
  mode no rule of which applies to the reply makes no slip at that call.
- **lessons**: an agent shown (in its system message) a lesson whose mode is
  one of its tendencies and whose situation shares a content word with the
  task follows it: that tendency does not fire on that call. A lesson with
  another mode, or sent to another agent, changes nothing.

The agent reads the gateway's lessons block and then answers from the
request without it, so a policy that parses its prompt sees what the
framework sent. Each slip is kept beside the run (`RunRecord.slips`, never in
the trace): the first one is the exact gold label of a failed run (the
oracle of the self-improvement experiment).
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.capture.live_gateway import LESSONS_BEGIN, LESSONS_END, RUN_HEADER, TASK_HEADER, Gateway, completion_text
from faultlens.middleware.model.trace import GoldLabel, StepKind, Task, Trace
from faultlens.middleware.replay.session import CallRecord, Drift, Recording, Session, canonical
from faultlens.middleware.replay.rerunners import REGENERATED_KEPT, NotRerunnable, Trial

from .envs.base import parse_action, render_action
from .envs.framework import routed_through
from .generators import GenInput, PrefixItem, TemplateGenerator
from .seeding import stable_seed
from .sim import content_words

__all__ = ["TENDENCIES", "GatewayTeam", "RunRecord", "Slip", "first_slip", "follows_lesson", "strip_lessons"]

Completion = dict[str, Any]
Upstream = Callable[[str, dict[str, Any]], Completion]

# Per environment, per agent (the name in its base URL), per failure mode: the chance a call slips. The
# gateway sees every call as a model call (not a plan or a final answer), so the modes are of what a reply
# says or does: R.3 a miscalculated number, C.2 a value passed on wrongly, A.2 a call's wrong arguments;
# modes an environment's rules make at that agent's calls (docs/feedback.md, "Any framework").
TENDENCIES: dict[str, dict[str, dict[str, float]]] = {
    "ag2_experts": {"planner": {"C.2": 0.25}, "coder": {"C.2": 0.25}},
    "smol_analyst": {"analyst": {"R.3": 0.10}, "data_agent": {"C.2": 0.15}},
    "magentic_team": {"orchestrator": {"R.3": 0.05}, "web_surfer": {"A.2": 0.10}, "coder": {"C.2": 0.20}},
    "agents_desk": {"triage": {"A.2": 0.12}, "refunds": {"A.2": 0.12}, "orders": {"A.2": 0.30}},
}

_BLOCK = re.compile(re.escape(LESSONS_BEGIN) + r".*?" + re.escape(LESSONS_END), re.S)
# A lesson line of `feedback.hooks.format_lesson`: its mode code and its situation.
_LESSON_LINE = re.compile(r"^- \[lesson [^ |]+ \| for [^|]+? \| (?P<mode>\S+)[^\]]*\] When: (?P<situation>.*?)\. Mistake:", re.M)
_KINDS = (StepKind.plan, StepKind.message, StepKind.final_answer)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def strip_lessons(request: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the request without the gateway's lessons block, the block's text)."""
    shown: list[str] = []
    messages = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if message.get("role") in ("system", "developer") and LESSONS_BEGIN in _text(content):
            shown.append(_text(content))
            if isinstance(content, list):
                parts = [p for p in content if not (isinstance(p, dict) and LESSONS_BEGIN in str(p.get("text", "")))]
                message = {**message, "content": parts}
                if not parts:
                    continue
            else:
                rest = _BLOCK.sub("", str(content)).rstrip()
                if not rest:
                    continue  # the gateway added this system message for the block alone
                message = {**message, "content": rest}
        messages.append(message)
    return {**request, "messages": messages}, "\n".join(shown)


def follows_lesson(block: str, mode: str, task: str) -> bool:
    """A lesson for `mode` is in the block and its situation shares a content word with the task (`SimContext.follows_lesson`)."""
    words = content_words(task)
    return any(m["mode"] == mode and content_words(m["situation"]) & words for m in _LESSON_LINE.finditer(block))


@dataclass(frozen=True)
class Slip:
    call: int  # the call's position in the run (= its step index in the gateway's trace)
    agent: str
    mode: str
    reason: str
    corrected: str = ""  # what the agent would have said without the slip (the gateway's step text of it)


@dataclass
class RunRecord:
    """One run of the team through the gateway: its id, the framework's own trace and recording, the slips made."""

    run_id: str
    task: Task
    seed: int = 0
    sim: dict[str, Any] = field(default_factory=dict)
    trace: Trace | None = None
    recording: Recording | None = None
    slips: list[Slip] = field(default_factory=list)
    calls: int = 0
    followed: int = 0  # calls where a tendency was held back by a lesson

    @property
    def gold(self) -> GoldLabel | None:
        return first_slip(self.slips)


def first_slip(slips: list[Slip]) -> GoldLabel | None:
    """The gold label of a run: its first slip (None when its agents made none)."""
    if not slips:
        return None
    first = slips[0]
    return GoldLabel(step=first.call, agent=first.agent, mode=first.mode, reason=first.reason)


def slip_completion(env: Any, mode: str, agent: str, request: dict[str, Any], completion: Completion,
                    task: Task, rng: random.Random) -> tuple[Completion, str] | None:
    """`completion` rewritten by a rule of `mode` (the environment's first, then the generic ones), or None."""
    choices = completion.get("choices") or []
    if not choices:
        return None
    out = copy.deepcopy(completion)
    message = out["choices"][0].get("message") or {}
    calls = message.get("tool_calls") or []
    kinds: tuple[StepKind, ...]
    if calls:
        fn = calls[0].get("function") or {}
        text, kinds = render_action(str(fn.get("name", "")), str(fn.get("arguments", "")), _text(message.get("content"))), (StepKind.tool_call,)
    else:
        text, kinds = _text(message.get("content")), _KINDS
    if not text.strip():
        return None
    prefix = [PrefixItem(str(m.get("name") or m.get("role", "")), str(m.get("role", "")), _text(m.get("content")))
              for m in request.get("messages") or []]
    tools = sorted(str((t.get("function") or {}).get("name", "")) for t in request.get("tools") or [] if isinstance(t, dict))
    generator = TemplateGenerator()
    for kind in kinds:
        inp = GenInput(mode=mode, kind=kind, agent=agent, text=text, prefix=prefix, rng=rng, tools=tools or sorted(env.tools),
                       agents=env.agent_names, env_name=env.name, task_query=task.query,
                       distractors=env.distractor_groups(task))
        generated = generator.generate(inp)
        if generated is None:
            continue
        if calls:
            action = parse_action(generated.text)
            if action is None:
                continue
            calls[0]["function"] = {"name": action.tool, "arguments": action.argument}
            if action.thought:
                message["content"] = action.thought
        else:
            message["content"] = generated.text
        return out, generated.reason
    return None


class GatewayTeam:
    """Runs an environment's team with its calls through `gateway`, and re-runs its failed runs (a `Rerunner`).

        team = GatewayTeam(env)
        team.gateway = Gateway(CallableUpstream(team.upstream), store, lessons)   # the gateway's upstream is the team
        record = team.run(task, "run-1")

    As a rerunner (`counterfactual`'s trials), `rerun(trace, t)` replays calls
    0..t-1 of a run it made from the run's recording, draws call t anew from
    its agent (the same request, a new draw of its slips), reuses the recorded
    answer of every later call whose request did not change, runs the rest
    live, and judges the task. Call i of the run is step i of the trace the
    gateway recorded. Reruns do not go through the gateway (they are trials,
    not runs); their agents are shown the lessons the gateway would show them.
    """

    name = "gateway_team"

    def __init__(self, env: Any, tendencies: dict[str, dict[str, float]] | None = None):
        self.env = env
        self.tendencies = TENDENCIES.get(env.name, {}) if tendencies is None else tendencies
        self.gateway: Gateway | None = None
        self.records: dict[str, RunRecord] = {}
        self._run: RunRecord | None = None
        self._inner: Upstream | None = None
        self._trial: str | None = None  # the salt of the trial being made (None: a run through the gateway)
        self._draws: dict[tuple[str, int], int] = {}

    # -- the simulated agents, slipping where their tendencies say ---------------
    def _answer(self, agent: str, request: dict[str, Any], block: str, key: str) -> Completion:
        run, inner = self._run, self._inner
        if run is None or inner is None:
            raise RuntimeError("GatewayTeam called outside GatewayTeam.run / rerun")
        completion = inner(agent, request)
        for mode in sorted(self.tendencies.get(agent) or {}):
            if block and follows_lesson(block, mode, run.task.query):
                run.followed += 1
                continue
            rng = random.Random(stable_seed(run.seed, self.env.name, run.task.id or run.task.query, agent, key, mode))
            if rng.random() >= self.tendencies[agent][mode]:
                continue
            slipped = slip_completion(self.env, mode, agent, request, completion, run.task, rng)
            if slipped is not None:
                if self._trial is None:
                    run.slips.append(Slip(run.calls - 1, agent, mode, slipped[1], completion_text(completion)))
                return slipped[0]
        return completion

    def upstream(self, agent: str, request: dict[str, Any]) -> Completion:
        """The gateway's upstream: the agent reads the lessons block, then answers the request without it."""
        if self._run is None:
            raise RuntimeError("GatewayTeam.upstream called outside GatewayTeam.run")
        plain, block = strip_lessons(request)
        index = self._run.calls
        self._run.calls += 1
        return self._answer(agent, plain, block, str(index))

    def _trial_answer(self, agent: str, request: dict[str, Any]) -> Completion:
        assert self._run is not None and self._trial is not None
        block = ""
        lessons = self.gateway.lessons if self.gateway is not None else None
        shown = lessons(agent, self._run.task.query) if lessons is not None else None
        if shown is not None and shown.ids:
            block = shown.text
        return self._answer(agent, request, block, f"{self._trial}:{canonical(request.get('messages'))}")

    def _route(self, inner: Upstream) -> Upstream:
        self._inner = inner

        def call(agent: str, request: dict[str, Any]) -> Completion:
            if self._trial is not None:
                return self._trial_answer(agent, request)
            assert self.gateway is not None and self._run is not None
            headers = {RUN_HEADER: self._run.run_id, TASK_HEADER: self._run.task.query}
            answer = self.gateway.handle(agent, request, headers)
            if answer.status != 200:
                raise RuntimeError(f"gateway answered {answer.status}: {answer.body[:200]!r}")
            return json.loads(answer.body)

        return call

    # -- runs -------------------------------------------------------------------
    def run(self, task: Task, run_id: str, *, seed: int = 0, sim: dict[str, Any] | None = None) -> RunRecord:
        """Run the team on `task` through the gateway as run `run_id`; the framework's trace carries the outcome."""
        if self.gateway is None:
            raise RuntimeError("set team.gateway first (a Gateway whose upstream is CallableUpstream(team.upstream))")
        record = RunRecord(run_id, task, seed=seed, sim=sim if sim is not None else {"seed": seed})
        self._run = record
        try:
            with routed_through(self._route):
                result = self.env.run(task, sim=record.sim, trace_id=f"{self.env.name}-{run_id}")
        finally:
            self._run = self._inner = None
        record.trace, record.recording = result.trace, result.recording
        self.records[run_id] = record
        return record

    # -- the Rerunner protocol ----------------------------------------------------
    def can_rerun(self, trace: Trace) -> bool:
        return trace.id in self.records

    def rerun(self, trace: Trace, step: int, replacement: str | None = None) -> Trial:
        """Replay calls 0..step-1, draw call `step` anew (or answer it with `replacement`), continue, judge."""
        original = self.records.get(trace.id)
        if original is None or original.recording is None:
            raise NotRerunnable(f"{self.name}: run {trace.id} was not made by this team")
        recording = original.recording
        if len(recording) != len(trace.steps) or not 0 <= step < len(trace.steps):
            raise NotRerunnable(f"{self.name}: run {trace.id} has {len(recording)} calls and {len(trace.steps)} steps; "
                                f"step {step} cannot be re-run")
        draw = self._draws[trace.id, step] = self._draws.get((trace.id, step), 0) + 1
        started = time.monotonic()
        regenerated: list[str] = []

        def redraw(record: CallRecord) -> Completion:
            if replacement is not None:
                out = copy.deepcopy(record.response)
                out["choices"][0]["message"] = {"role": "assistant", "content": replacement}
            else:
                out = self._trial_answer(record.agent, record.request)
            regenerated.append(completion_text(out))
            return out

        session = Session(recording, replay_until=step, overrides={step: redraw}, reuse_unchanged_from=step + 1)
        trial_run = RunRecord(trace.id, original.task, seed=original.seed, sim=original.sim)
        self._run, self._trial = trial_run, f"trial:{step}:{draw}"
        try:
            with routed_through(self._route):
                result = self.env.run(original.task, session=session, sim=original.sim, trace_id=f"{self.env.name}-{trace.id}-trial")
        except Drift as drift:
            raise NotRerunnable(f"{self.name}: the team asked something else on replay: {drift}") from drift
        finally:
            self._run = self._inner = self._trial = None
        new = regenerated[0] if regenerated else ""
        outcome = result.trace.outcome
        return Trial(step=step, success=bool(outcome and outcome.success), changed=new != trace.steps[step].content,
                     regenerated=new[:REGENERATED_KEPT], live_calls=session.live + 1, seconds=round(time.monotonic() - started, 4),
                     detail=(outcome.detail or "") if outcome else "")
