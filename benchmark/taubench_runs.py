"""tau-bench's published runs: one JSON file of trajectories, every run with its outcome.

    taubench:FILE.json      (or FILE.json.gz) every run of FILE

FILE is a list of runs in the format of tau-bench's released historical
trajectories: `{task_id, reward, traj, trial, info?}`, `traj` a list of
OpenAI-style chat messages (role system, user, assistant or tool; an
assistant message may carry `tool_calls`). One message is one step, as in
`benchmark.taubench` (the AgentRx folder importer, whose step rules this
shares). The outcome is the reward: success when reward is 1 (>= 0.999),
evaluator "tau-bench reward". The trace id is `taubench:<task_id>/trial-<trial>`.

`info` is tau-bench's grading record (the task's expected actions and outputs,
the user simulator's instruction): it gives the answer away, so it is kept only
under the trace's answer key (`metadata["answer_key"]["info"]`), which
`attributor_view` strips before any attributor or detector sees the trace. The
task's query is the first user message, what the agent itself was told.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from faultlens.middleware.errors import InputError, from_validation_error
from faultlens.middleware.model.answer_key import ANSWER_KEY
from faultlens.middleware.model.trace import AgentInfo, Outcome, Source, Task, Trace

from .taubench_messages import trajectory_steps
from .trail import read_json_file

FORMAT = "taubench-runs"
SUCCESS_REWARD = 0.999  # tau-bench's reward is 1.0 for a solved task, 0.0 otherwise; allow float noise
AGENTS = [AgentInfo(name="System", role="policy prompt"), AgentInfo(name="User", role="simulated customer"),
          AgentInfo(name="Assistant", role="customer service agent"), AgentInfo(name="Tool", role="environment")]


def is_runs_file(path: Path) -> bool:
    """Whether a `taubench:` argument names one published runs file (not an AgentRx folder)."""
    return path.is_file() and path.name.endswith((".json", ".json.gz"))


def _task_id(run: Any, source: str, record: str) -> str:
    if not isinstance(run, dict):
        raise InputError(source, record, None, f"expected a run object, got {type(run).__name__}")
    task_id = run.get("task_id")
    if isinstance(task_id, bool) or not isinstance(task_id, (int, str)) or task_id == "":
        raise InputError(source, record, "task_id", f"expected a task id (integer or string), got {task_id!r}")
    return str(task_id)


def _trial(run: dict, source: str, record: str) -> int | str:
    trial = run.get("trial")
    if isinstance(trial, bool) or not isinstance(trial, (int, str)) or trial == "":
        raise InputError(source, record, "trial", f"expected a trial number, got {trial!r}")
    return trial


def _reward(run: dict, source: str, record: str) -> float:
    reward = run.get("reward")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) or reward != reward:
        raise InputError(source, record, "reward", f"expected a number, got {reward!r}")
    return float(reward)


def _trace(run: dict, i: int, source: str, seen: set[str]) -> Trace:
    record = f"[{i}]"
    task_id = _task_id(run, source, record)
    record = f"[{i}] (task_id {task_id})"
    trial, reward = _trial(run, source, record), _reward(run, source, record)
    trace_id = f"taubench:{task_id}/trial-{trial}"
    if trace_id in seen:
        raise InputError(source, record, "trial", f"{trace_id} appears twice")
    seen.add(trace_id)
    info = run.get("info")
    if info is not None and not isinstance(info, dict):
        raise InputError(source, record, "info", f"expected an object, got {type(info).__name__}")
    steps = trajectory_steps(run.get("traj"), source, record)
    first_user = next((s.content for s in steps if s.agent == "User"), "")
    success = reward >= SUCCESS_REWARD
    try:
        return Trace(
            id=trace_id,
            task=Task(query=first_user, id=task_id),
            agents=[a.model_copy() for a in AGENTS],
            steps=steps,
            outcome=Outcome(success=success, score=reward, evaluator="tau-bench reward",
                            detail=f"reward {reward:g}"),
            source=Source(framework="tau-bench", benchmark="taubench", format=FORMAT, native_id=trace_id),
            metadata={"trial": trial, **({ANSWER_KEY: {"info": info}} if info is not None else {})},
        )
    except ValidationError as exc:
        raise from_validation_error(source, record, exc) from None


def read_taubench_runs(path: str | Path) -> Iterator[Trace]:
    """Yield one `Trace` per run of a published tau-bench trajectories file, with its outcome."""
    file = Path(path)
    runs = read_json_file(file)
    if not isinstance(runs, list):
        raise InputError(str(file), None, None, f"expected a list of runs, got {type(runs).__name__}")
    seen: set[str] = set()
    for i, run in enumerate(runs):
        yield _trace(run, i, str(file), seen)
