"""The simulated agents of a framework team as the gateway's upstream (the parent side of the replay lab).

The team's program (`replay_lab.program`) runs in a separate process and
sends every model call over HTTP to a gateway; the gateway's upstream is a
`SimulatedAgents` in the parent, answering as the environment's simulated
agents (its `policy`) for the task at hand. Agents slip with per-agent,
per-mode tendencies (`LAB_TENDENCIES`; the slip is the environment's own
error rule of that mode, `slipping_team.slip_completion`) and hold a tendency
back when the call's system message holds a lesson of that mode whose
situation shares a word with the task (`slipping_team.follows_lesson`).

A slip is a function of (task, agent, request, draw): the n-th time the same
agent is asked the same request (its lessons block aside) on a task is draw
n. A re-run that replays a call never asks the upstream; a call drawn anew, or
asked again because an earlier correction changed it, is a new draw, as a
sampled model's would be. So a run and its re-runs are reproducible, and the
slips of the recorded run (`LabRun.slips`, kept here, never in the trace)
give its exact gold: its first slip, or the first that fails the run by
itself when the agents recovered from an earlier one (found by re-running with
no slip after it: `rerun(task, slips=False)`, the lab's oracle).
"""

from __future__ import annotations

import copy
import hashlib
import random
import re
import shlex
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from faultlens.middleware.capture.live_gateway import LESSONS_BEGIN, LESSONS_END, completion_text
from faultlens.middleware.model.trace import GoldLabel, Task
from faultlens.middleware.replay.gateway_calls import TRANSPORT, call_steps, request_key, request_of
from faultlens.middleware.replay.session import canonical

from ..envs.framework import completion as text_completion
from ..slipping_team import TENDENCIES, Slip, first_slip, follows_lesson, slip_completion
from ..seeding import stable_seed

__all__ = ["LAB_TENDENCIES", "LabRun", "SimulatedAgents", "asked", "program_command", "recorded_asks"]

Completion = dict[str, Any]

# The framework teams added after the gateway experiment (issue 47), chosen the same way: on 12 tasks each (seed
# 77000), one agent at a time made to slip at every call in one mode with the generic rules switched off, so a slip
# is the team's own rule (its `mistakes.py`) made at that agent's call as the gateway sees it. Every mode kept slipped
# in at least 7 of the 12 runs and failed at least 7 (no run failed with no slip). Where no rule of R.3, C.2 or A.2
# applies at an agent's calls, the mode is another its rules make there (code_desk's lead: A.4, its answer's code
# loses its indentation; math_society's instructor: R.2, a wrong step in its instruction); code_desk's tester has
# none (its rules read a failing verdict, which a slip-free run never gives), so it never slips. The rates, within
# the others' range, spread the failed runs' first slips over the agents (40 tasks of seed 31000 run in process);
# code_desk's coder's slips are mostly caught by its tester and fixed, as a team recovers.
NEW_TEAMS_TENDENCIES: dict[str, dict[str, dict[str, float]]] = {
    "docs_team": {"lead": {"R.3": 0.15}, "researcher": {"A.2": 0.08}},
    "airline_desk": {"coordinator": {"R.3": 0.12}, "records": {"A.2": 0.25}, "policy": {"C.2": 0.12}},
    "schedule_desk": {"solver": {"A.2": 0.10, "R.3": 0.08}},
    "code_desk": {"lead": {"A.4": 0.10}, "coder": {"R.3": 0.20}},
    "clip_desk": {"lead": {"R.3": 0.15}, "watcher": {"C.2": 0.15}},
    "search_crew": {"manager": {"R.3": 0.12}, "searcher": {"C.2": 0.08}, "analyst": {"C.2": 0.10}},
    "ledger_chat": {"analyst": {"A.2": 0.06}, "reviewer": {"C.2": 0.12}, "reporter": {"R.3": 0.12}},
    "math_society": {"task_specifier": {"C.2": 0.12}, "instructor": {"R.2": 0.12}, "solver": {"A.2": 0.06}},
}
# The gateway experiment's tendencies, and the four teams it did not run. As there, the modes are ones a gateway
# step shows and the team's own rules make at that agent's calls (checked on 12 tasks each with every agent given
# R.3, C.2 and A.2): A.2 a tool call's wrong arguments, R.3 a miscalculated number, C.2 a value passed on wrongly.
LAB_TENDENCIES: dict[str, dict[str, dict[str, float]]] = {
    **TENDENCIES,
    "supervisor_team": {"supervisor": {"C.2": 0.10}, "researcher": {"A.2": 0.12}, "calculator": {"R.3": 0.15}},
    "chart_desk": {"lead": {"A.2": 0.12}, "reader": {"R.3": 0.15}, "calculator": {"A.2": 0.15}},
    "adk_team": {"coordinator": {"C.2": 0.08}, "research_agent": {"A.2": 0.10}, "budget_agent": {"R.3": 0.10}},
    "workflow_team": {"concierge": {"C.2": 0.15}, "researcher": {"A.2": 0.12}, "booker": {"C.2": 0.15}},
    **NEW_TEAMS_TENDENCIES,
}
# The lessons block as `capture.live_gateway.inject_lessons` appends it to a system message's text.
_BLOCK = re.compile(r"(?:\n\n)?" + re.escape(LESSONS_BEGIN) + r"\n.*?\n" + re.escape(LESSONS_END), re.S)


def without_lessons(request: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(the request exactly as the program sent it, before the gateway added its lessons block; the block's text).

    Exact, not trimmed: the agents' replies (their tool calls' ids) are a function of the request, and a
    re-drawn call must ask what the recorded call asked.
    """
    shown: list[str] = []
    messages = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if message.get("role") in ("system", "developer") and LESSONS_BEGIN in str(content):
            if isinstance(content, list):
                kept = [p for p in content if not (isinstance(p, dict) and _BLOCK.fullmatch(str(p.get("text", ""))))]
                shown += [str(p.get("text", "")) for p in content if p not in kept]
                if not kept:
                    continue
                message = {**message, "content": kept}
            else:
                shown += _BLOCK.findall(str(content))
                rest = _BLOCK.sub("", str(content))
                if not rest:
                    continue  # the gateway added this system message for the block alone
                message = {**message, "content": rest}
        messages.append(message)
    return {**request, "messages": messages}, "\n".join(shown)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def stable_ids(answer: Completion, key: str) -> Completion:
    """`answer` with its id and its tool calls' ids a function of the request's comparable form (`key`).

    A re-run's replayed calls get their recorded replies back as the gateway stored them (the same content, not
    always the same bytes), so a later request can differ in bytes from the recorded one and still ask the same;
    ids drawn from its bytes would then change every call after it.
    """
    out = copy.deepcopy(answer)
    out["id"] = f"chatcmpl-{_digest(key)[:24]}"
    for choice in out.get("choices") or []:
        for i, call in enumerate((choice.get("message") or {}).get("tool_calls") or []):
            call["id"] = f"call_{_digest(f'{key}:{i}')[:20]}"
    return out


def _reply_of(env_name: str) -> Callable[[dict[str, Any], Any], Completion]:
    """How the environment's endpoint turns its policy's answer into a chat completion (as in its `program`)."""
    if env_name == "magentic_team":
        from ..envs.magentic_team.wire import completion_of

        return completion_of
    if env_name in ("ag2_experts", "smol_analyst", "schedule_desk"):
        return text_completion
    from ..envs.agents_desk.wire import completion

    return completion


def program_command(env_name: str, task_id: str, python: str | None = None) -> str:
    """The shell command that runs the team on one task as a separate process (the re-run contract's program).

    By default this interpreter, or, when the team's framework cannot be imported here, the interpreter of the
    virtualenv of its extra (`frameworks2`: frameworks that cannot share this one's resolve).
    """
    return shlex.join([python or team_python(env_name), "-m", "faultlens.injectors.replay_lab.program", env_name, task_id])


def team_python(env_name: str) -> str:
    """The interpreter that can run `env_name`'s framework: this one, else its extra's virtualenv's (as its shard is
    built: `Environment.elsewhere`, whose `ConfigError` says how to make one when neither can)."""
    from ..envs import get as get_env

    return str(get_env(env_name).elsewhere() or sys.executable)


@dataclass
class LabRun:
    """One recorded run of the team: its task and the slips its agents made (the first one is the gold)."""

    run_id: str
    task: Task
    slips: list[Slip] = field(default_factory=list)
    calls: int = 0

    @property
    def gold(self) -> GoldLabel | None:
        return first_slip(self.slips)


def asked(request: dict[str, Any]) -> str:
    """What an agent is asked (its lessons block and transport fields aside), in the form a re-run compares requests in
    (`replay.gateway_calls`): the same for a call as recorded and as drawn anew."""
    plain, _ = without_lessons({k: v for k, v in request.items() if k not in TRANSPORT})
    return canonical(request_key(plain.get("messages"), {k: v for k, v in plain.items() if k != "model"}))


def recorded_asks(store: Any, tasks: list[Task]) -> Iterator[tuple[Task, str, str]]:
    """(task, agent, what it was asked: `asked`) of every call of the recorded runs of `tasks` (a run's id is its task's)."""
    for task in tasks:
        trace = store.get_trace(task.id)
        for i in call_steps(trace):
            yield task, trace.steps[i].agent, asked(request_of(trace.steps[i]))


class SimulatedAgents:
    """`(agent, request) -> completion`: the team's simulated agents, slipping and following lessons (module docstring).

    `record(task, run_id)` starts a recorded run (its slips are kept); `rerun(task)` answers the re-runs of a run
    of `task` (their slips are not the run's). Give it to the gateway as `CallableUpstream(agents)`.
    """

    def __init__(self, env: Any, tendencies: dict[str, dict[str, float]] | None = None, *, seed: int = 0):
        self.env = env
        self.policy = env.policy()
        self.reply = _reply_of(env.name)
        self.tendencies = LAB_TENDENCIES.get(env.name, {}) if tendencies is None else tendencies
        self.seed = seed
        self.sim: dict[str, Any] = {"seed": seed}
        self.task: Task | None = None
        self.run: LabRun | None = None  # the recorded run in progress (None: answering re-runs)
        self.draws: Counter[tuple[str, str, str]] = Counter()
        self.followed = 0  # calls where a tendency was held back by a lesson
        self.slipping = True  # False: no agent slips (`rerun(task, slips=False)`)

    def record(self, task: Task, run_id: str) -> LabRun:
        self.task, self.run, self.slipping = task, LabRun(run_id, task), True
        return self.run

    def rerun(self, task: Task, *, slips: bool = True) -> None:
        """Answer re-runs of a run of `task`; `slips=False`: with no slip at all (the lab's oracle, never a method's)."""
        self.task, self.run, self.slipping = task, None, slips

    def for_recorded(self, store: Any, tasks: list[Task]) -> Callable[[str, dict[str, Any]], Completion]:
        """These agents, answering a recorded call of a run of `tasks` drawn anew outside a re-run (`faultlens adapt`'s
        draws, made before the program runs) for the task whose run asked it."""
        owners = {key: task for task, _, key in recorded_asks(store, tasks)}

        def answer(agent: str, request: dict[str, Any]) -> Completion:
            owner = owners.get(asked(request))
            if owner is not None and self.task is not owner:
                self.rerun(owner)
            return self(agent, request)

        return answer

    def __call__(self, agent: str, request: dict[str, Any]) -> Completion:
        task = self.task
        if task is None:
            raise RuntimeError("SimulatedAgents asked before record(task, run_id) or rerun(task)")
        plain, block = without_lessons({k: v for k, v in request.items() if k not in TRANSPORT})
        key = asked(plain)
        draw = self.draws[task.id or task.query, agent, key]
        self.draws[task.id or task.query, agent, key] += 1
        if self.run is not None:
            self.run.calls += 1
        answer = stable_ids(self.reply(plain, self.policy.respond(agent, plain, dict(self.sim))), key)
        return self._slipped(agent, plain, block, answer, task, key, draw)

    def _slipped(self, agent: str, request: dict[str, Any], block: str, answer: Completion, task: Task, key: str,
                 draw: int) -> Completion:
        for mode in sorted(self.tendencies.get(agent) or {}) if self.slipping else ():
            if block and follows_lesson(block, mode, task.query):
                self.followed += 1
                continue
            rng = random.Random(stable_seed(self.seed, self.env.name, task.id or task.query, agent, key, draw, mode))
            if rng.random() >= self.tendencies[agent][mode]:
                continue
            slipped = slip_completion(self.env, mode, agent, request, answer, task, rng)
            if slipped is None:
                continue
            if self.run is not None:
                self.run.slips.append(Slip(self.run.calls - 1, agent, mode, slipped[1], completion_text(answer)))
            return slipped[0]
        return answer
