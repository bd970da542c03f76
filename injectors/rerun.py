"""Re-run a failed environment trace with one step regenerated (the counterfactual attributor's trials).

`EnvironmentRerunner` is registered in the `faultlens.rerunners` entry-point
group. It can re-run any trace of a bundled environment that records its agents:
`Environment.run` puts the agent model and the simulated agents' settings in
the trace's metadata, so injected traces, the bundled benchmark and the runs
of the feedback loop can all be re-run.

A trial for step t:

1. *Reconstruct* the recording: run the environment's program on the trace's
   task with every call answered by the trace's own step (call i is step i),
   which recovers what each call asked. The run must reproduce the trace step
   for step and still fail; otherwise the trace is `NotRerunnable`.
2. Replay calls 0..t-1 exactly, make call t live (the agent is re-sampled) or
   answer it with a given replacement, and from call t+1 on reuse the recorded
   answer of every call whose request did not change (`Session(...,
   reuse_unchanged_from=t+1)`). Only what the change at t touches runs anew,
   so a success is owed to the change, not to chance elsewhere.
3. Evaluate the task: success or not.

Lessons: a run of the feedback loop showed its agents lessons (each step
names the ids of those its agent was shown). A rerun shows them again, so it
is the same team: give the rerunner a look-up, `EnvironmentRerunner(lessons=
store.get_lesson)`; without one such a trace is `NotRerunnable`.

How step t is regenerated when no replacement is given (`resample`):

- "recorded" (the default): the agent is asked again exactly what it was
  asked. The simulated agents are deterministic (their randomness is a
  function of their seed and the conversation), so a step an injection put
  there comes back as the agent's own answer, and every other step comes back
  as it was: only the injected step can change the outcome.
- "fresh": a new draw from the same agent. A simulated agent answers with a
  seed derived from its own, the step and the trial; a real model is asked at
  temperature 1. This is what re-sampling means for a team whose failures are
  its own slips (the feedback example's), where asking again the same way
  would slip again. Only the regenerated call is drawn anew; what it changes
  downstream runs live, as with "recorded".

The task is evaluated as the environment knows it (`world_task`: regenerated
from the seed and index in its id, with its reference answer), not as the
trace shows it: a benchmark runner hides the reference answer from
attributors, and the attributor never needs it; only the world judging the
rerun does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultlens.middleware.replay.rerunners import REGENERATED_KEPT, NotRerunnable, Trial
from faultlens.middleware.model.trace import Lesson, Task, Trace
from faultlens.middleware.replay.session import Drift, Recording, Session

from . import envs
from .envs.base import SIM_PREFIX, stable_seed

__all__ = ["EnvironmentRerunner"]


def _answer(record: Any, content: str) -> dict[str, Any]:
    return {"output": content} if record.kind == "tool" else {"content": content}


_TASK_ID = re.compile(r"-(\d+)-(\d+)$")
_TASKS: dict[tuple[str, int], list[Task]] = {}
MAX_TASKS = 4096


def world_task(env: envs.Environment, trace: Trace) -> Task:
    """The trace's task as `env` generates it, reference answer included (ids end in -SEED-INDEX)."""
    task_id = trace.task.id or ""
    match = _TASK_ID.search(task_id)
    if match is None:
        raise NotRerunnable(f"task id {task_id!r} does not name a generated task of {env.name} (…-SEED-INDEX)")
    seed, index = int(match.group(1)), int(match.group(2))
    n = index + 1
    while True:
        tasks = _TASKS.get((env.name, seed), [])
        if len(tasks) < n:
            tasks = _TASKS[(env.name, seed)] = env.tasks(seed, n)
        found = next((t for t in tasks if t.id == task_id), None)
        if found is not None:
            if found.query != trace.task.query:
                raise NotRerunnable(f"{env.name} task {task_id} asks something else than the trace's task")
            return found
        if n >= MAX_TASKS:
            raise NotRerunnable(f"{env.name} generates no task {task_id} from seed {seed}")
        n = min(2 * n, MAX_TASKS)  # ids may skip draws that were rejected: look further


@dataclass
class _Prepared:
    """What every trial of one trace needs, worked out once: the environment, its agents, the task, the recording."""

    env: envs.Environment
    model: str | None
    sim: dict[str, Any] | None
    task: Task
    recording: Recording
    lessons: dict[str, list[Lesson]] | None


def _fresh_draw(request: dict[str, Any], salt: str) -> dict[str, Any]:
    """Ask the agent of a recorded request again, as a new sample (see "fresh" in the module docstring)."""
    import litellm

    from . import sim as _sim

    kwargs: dict[str, Any] = {}
    if "sim" in request:
        _sim.ensure_registered()
        settings = dict(request["sim"])
        settings["seed"] = stable_seed(settings.get("seed", 0), "fresh draw", salt)
        kwargs["metadata"] = {"faultlens_sim": settings}
        temperature = request.get("temperature", 0)
    else:
        kwargs["num_retries"] = 2
        temperature = 1.0
    response = litellm.completion(model=request["model"], messages=request["messages"], temperature=temperature, **kwargs)
    return {"content": response.choices[0].message.content or ""}


RESAMPLE = ("recorded", "fresh")


class EnvironmentRerunner:
    """Rerunner for the bundled environments (see the module docstring)."""

    name = "environments"

    def __init__(self, resample: str = "recorded", lessons: Callable[[str], Lesson] | None = None) -> None:
        if resample not in RESAMPLE:
            raise ValueError(f"resample must be one of {', '.join(RESAMPLE)}, not {resample!r}")
        self.resample = resample
        self.lessons = lessons
        self._draws: dict[tuple[str, int], int] = {}
        self._last: tuple[str, str, _Prepared] | None = None  # (trace id, content fingerprint, what its trials need)

    @staticmethod
    def settings(trace: Trace) -> tuple[str | None, dict[str, Any]] | None:
        """(agent model, or None for the simulated agents; their settings), or None when unknown.

        `Environment.run` records both in the trace's metadata ("model", and "sim" for simulated agents).
        """
        model = str(trace.metadata.get("model") or "")
        if not model:
            return None
        if model.startswith(SIM_PREFIX + "/"):
            sim = trace.metadata.get("sim")
            # simulated agents whose seed we do not know would not be the same agents
            return (None, dict(sim)) if isinstance(sim, dict) else None
        return model, {}

    def can_rerun(self, trace: Trace) -> bool:
        return trace.source.benchmark in envs.names() and self.settings(trace) is not None

    def _shown(self, trace: Trace) -> dict[str, list[Lesson]] | None:
        """The lessons each agent was shown in the run (its steps name their ids), looked up with `self.lessons`."""
        ids: dict[str, list[str]] = {}
        for step in trace.steps:
            known = ids.setdefault(step.agent, [])
            known += [i for i in step.lessons if i not in known]
        if not any(ids.values()):
            return None
        if self.lessons is None:
            raise NotRerunnable("the run showed its agents lessons, and this rerunner has no `lessons` look-up to show them again")
        shown: dict[str, list[Lesson]] = {}
        for agent, wanted in ids.items():
            try:
                shown[agent] = [self.lessons(i) for i in wanted]
            except Exception as exc:
                raise NotRerunnable(f"a lesson shown to {agent} cannot be found: {type(exc).__name__}: {exc}") from exc
        return shown

    def _prepare(self, trace: Trace) -> _Prepared:
        """Reconstruct the recording from the trace's own steps (once per trace: its trials share it)."""
        key = "\x00".join(s.content for s in trace.steps)
        if self._last is not None and self._last[0] == trace.id and self._last[1] == key:
            return self._last[2]
        env = envs.get(trace.source.benchmark or "")
        model, sim = self.settings(trace) or (None, None)
        answers = {i: (lambda record, text=s.content: _answer(record, text)) for i, s in enumerate(trace.steps)}
        session = Session(overrides=answers)
        task = world_task(env, trace)
        shown = self._shown(trace)
        try:
            again = env.run(task, model=model, session=session, sim=sim, lessons=shown, trace_id=trace.id).trace
        except Exception as exc:
            raise NotRerunnable(f"the trace's steps do not drive {env.name}'s program: {type(exc).__name__}: {exc}") from exc
        if len(again.steps) != len(trace.steps):
            raise NotRerunnable(f"replaying the trace's steps gives {len(again.steps)} steps, not {len(trace.steps)}")
        for old, new in zip(trace.steps, again.steps):
            if (old.agent, old.kind, old.content) != (new.agent, new.kind, new.content):
                raise NotRerunnable(f"replaying the trace's steps differs at step {old.index} (agent {old.agent})")
        if again.outcome is not None and again.outcome.success:
            raise NotRerunnable("replaying the trace's steps makes the task succeed; the trace is not a failure of this task")
        prepared = _Prepared(env, model, sim, task, session.recorded, shown)
        self._last = (trace.id, key, prepared)
        return prepared

    def rerun(self, trace: Trace, step: int, replacement: str | None = None) -> Trial:
        if not 0 <= step < len(trace.steps):
            raise NotRerunnable(f"step {step} is not a step of trace {trace.id} ({len(trace.steps)} steps)")
        started = time.monotonic()
        prep = self._prepare(trace)
        overrides: dict[int, Any] = {}
        if replacement is not None:
            overrides[step] = lambda record: _answer(record, replacement)
        elif self.resample == "fresh" and prep.recording[step].kind == "model":
            # Each rerun of a step is a new draw: the n-th rerun of (trace, step) in this rerunner gets the n-th salt.
            draw = self._draws[trace.id, step] = self._draws.get((trace.id, step), -1) + 1
            overrides[step] = lambda record: _fresh_draw(record.request, f"{trace.id}/{step}/{draw}")
        session = Session(prep.recording, replay_until=step, overrides=overrides, reuse_unchanged_from=step + 1)
        try:
            result = prep.env.run(prep.task, model=prep.model, session=session, sim=prep.sim, lessons=prep.lessons,
                                  trace_id=f"{trace.id}-rerun{step}").trace
        except Drift as drift:  # cannot happen for a reconstructed recording unless the program is not deterministic
            raise NotRerunnable(f"the program is not deterministic: {drift}") from drift
        except Exception as exc:  # the team's program broke on the changed step: the run did not succeed
            return Trial(step=step, success=False, seconds=round(time.monotonic() - started, 4),
                         detail=f"the rerun crashed: {type(exc).__name__}: {exc}")
        new = result.steps[step].content if step < len(result.steps) else ""
        return Trial(step=step, success=bool(result.outcome and result.outcome.success),
                     changed=new != trace.steps[step].content, regenerated=new[:REGENERATED_KEPT],
                     live_calls=session.live + len(overrides), seconds=round(time.monotonic() - started, 4),
                     detail=(result.outcome.detail or "") if result.outcome else "")
