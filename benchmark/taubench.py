"""tau-bench conversations with AgentRx's failure labels (Microsoft, 2025).

    taubench:DIR            every failed run of DIR
    taubench:FILE.json      every run of a published runs file, with its outcome (`benchmark.taubench_runs`)
    taubench:DIR:train      a fixed half (by a hash of the trace id, the tasks of
    taubench:DIR:holdout    one tau-bench user together), and the other half
                            (see `trail.realdev_sides`)

DIR holds `tau_dataset_failed.json(.gz)`: a list of runs `{task_id, reward,
info, traj: [{role: system|user|assistant|tool, content, tool_calls?, name?,
tool_call_id?}], trial}`; and `tau_ground_truth.json(.gz)`: per run
`{trajectory_id (= task_id), failures: [{failure_id, step_number,
step_reason, failure_category, category_reason, failed_agent}], root_cause:
{failure_id, reason_for_root_cause}, failure_summary}`.

One message of `traj` is one step, in order. Agents: `System` (the policy
prompt; a control step), `User` (tau-bench's simulated user, a decision step:
AgentRx blames it in some runs), `Assistant` (the retail agent; a message with
`tool_calls` is a tool call), and tool messages, which are the environment's
answers (agent `Tool`, role tool_result).

Gold: the root cause's failure. `step_number` counts the messages of `traj`
from 1, system prompt included, so gold.step = step_number - 1; gold.agent is
its `failed_agent` (`Assistant` or `User`, as AgentRx writes it, even where it
names a step of the other speaker); gold.reason its step reason; `gold.mode`
stays empty (AgentRx's categories are kept in `metadata`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from faultlens.middleware.errors import InputError, from_validation_error
from faultlens.middleware.model.trace import AgentInfo, GoldLabel, Outcome, Source, Task, Trace

from .taubench_messages import message_text, trajectory_steps
from .trail import read_json_file, realdev_sides, scenario_id, split_spec_arg

FORMAT = "taubench"
RUNS = "tau_dataset_failed"
LABELS = "tau_ground_truth"


def _file(root: Path, stem: str) -> Path:
    for name in (f"{stem}.json", f"{stem}.json.gz"):
        if (root / name).exists():
            return root / name
    raise InputError(str(root / f"{stem}.json"), None, None, "missing (also looked for .json.gz)")


def _label(labels: dict[Any, Any], task_id: Any, source: str, n_steps: int) -> tuple[GoldLabel, dict[str, Any]]:
    record = f"trajectory_id {task_id}"
    if task_id not in labels:
        raise InputError(source, record, "trajectory_id", "no ground truth for this run")
    label = labels[task_id]
    failures = label.get("failures")
    if not isinstance(failures, list) or not failures:
        raise InputError(source, record, "failures", "missing, empty or not a list")
    root = label.get("root_cause")
    if not isinstance(root, dict) or "failure_id" not in root:
        raise InputError(source, record, "root_cause.failure_id", "missing")
    chosen = [f for f in failures if isinstance(f, dict) and f.get("failure_id") == root["failure_id"]]
    if len(chosen) != 1:
        raise InputError(source, record, "root_cause.failure_id", f"{root['failure_id']!r} names {len(chosen)} of the failures, not one")
    failure = chosen[0]
    number = failure.get("step_number")
    if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= n_steps:
        raise InputError(source, record, "failures.step_number", f"{number!r} is not a message number 1..{n_steps}")
    agent = failure.get("failed_agent")
    if agent not in ("Assistant", "User"):
        raise InputError(source, record, "failures.failed_agent", f"{agent!r} is not Assistant or User")
    gold = GoldLabel(step=number - 1, agent=agent, native_step=str(number), reason=message_text(failure.get("step_reason")) or None)
    meta = {"failure_category": failure.get("failure_category"), "failure_summary": label.get("failure_summary"),
            "failure_steps": sorted({f["step_number"] - 1 for f in failures if isinstance(f, dict) and isinstance(f.get("step_number"), int)})}
    return gold, meta


def _task(run: dict) -> dict:
    """The run's tau-bench task (`info.task`: instruction, user_id, ...), or {} when it has none."""
    info = run.get("info")
    task = info.get("task") if isinstance(info, dict) else None
    return task if isinstance(task, dict) else {}


def scenario(run: dict, trace_id: str) -> str:
    """A run's scenario key: the tau-bench user its task is built on (`info.task.user_id`), else its trace id.

    tau-bench writes several tasks per user, variants of one request on one account (tasks 2, 3 and 4 ask
    the same question); they fail alike, so they go to the same side of the split.
    """
    user = _task(run).get("user_id")
    return f"tau-bench user {user}" if isinstance(user, str) and user else trace_id


def read_taubench(directory: str | Path, split: str | None = None) -> Iterator[Trace]:
    """Yield one failed `Trace` with its gold label per run (see the module docstring)."""
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"taubench:{directory}", None, None, "no such directory")
    runs_path, labels_path = _file(root, RUNS), _file(root, LABELS)
    runs, labels_raw = read_json_file(runs_path), read_json_file(labels_path)
    if not isinstance(runs, list):
        raise InputError(str(runs_path), None, None, f"expected a list of runs, got {type(runs).__name__}")
    if not isinstance(labels_raw, list):
        raise InputError(str(labels_path), None, None, f"expected a list of labels, got {type(labels_raw).__name__}")
    labels = {}
    for i, label in enumerate(labels_raw):
        if not isinstance(label, dict) or "trajectory_id" not in label:
            raise InputError(str(labels_path), f"[{i}]", "trajectory_id", "missing")
        if isinstance(label["trajectory_id"], bool) or not isinstance(label["trajectory_id"], (int, str)):
            raise InputError(str(labels_path), f"[{i}]", "trajectory_id", f"expected a task id, got {type(label['trajectory_id']).__name__}")
        labels[label["trajectory_id"]] = label
    ids = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict) or "task_id" not in run:
            raise InputError(str(runs_path), f"[{i}]", "task_id", "missing")
        if isinstance(run["task_id"], bool) or not isinstance(run["task_id"], (int, str)):
            raise InputError(str(runs_path), f"[{i}]", "task_id", f"expected a task id, got {type(run['task_id']).__name__}")
        trial = run.get("trial")
        ids.append(f"taubench:{run['task_id']}" + (f"/trial-{trial}" if trial is not None else ""))
    keys = {trace_id: scenario(run, trace_id) for trace_id, run in zip(ids, runs)}
    sides = realdev_sides(keys)
    for i, (trace_id, run) in enumerate(zip(ids, runs)):
        task_id = run["task_id"]
        if split is not None and sides[trace_id] != split:
            continue
        record = f"[{i}] (task_id {task_id})"
        steps = trajectory_steps(run.get("traj"), str(runs_path), record)
        gold, label_meta = _label(labels, task_id, str(labels_path), len(steps))
        instruction = _task(run).get("instruction")
        first_user = next((s.content for s in steps if s.agent == "User"), "")
        reward = run.get("reward")
        try:
            yield Trace(
                id=trace_id,
                task=Task(query=message_text(instruction) or first_user, id=str(task_id)),
                agents=[AgentInfo(name="System", role="policy prompt"), AgentInfo(name="User", role="simulated customer"),
                        AgentInfo(name="Assistant", role="retail agent"), AgentInfo(name="Tool", role="retail environment")],
                steps=steps,
                outcome=Outcome(success=False, score=float(reward) if isinstance(reward, (int, float)) else None,
                                evaluator="tau-bench reward", detail="failed run (AgentRx)"),
                source=Source(framework="tau-bench", benchmark="taubench-retail", format=FORMAT, native_id=str(task_id)),
                gold=gold,
                metadata={"agentrx": label_meta, "scenario": scenario_id(keys[trace_id]), "split": sides[trace_id]},
            )
        except ValidationError as exc:
            raise from_validation_error(str(runs_path), record, exc) from None


def load_taubench_spec(arg: str) -> Iterator[Trace]:
    from .taubench_runs import is_runs_file, read_taubench_runs  # a published runs file, not an AgentRx folder

    if is_runs_file(Path(arg)):
        return read_taubench_runs(arg)
    root, split = split_spec_arg(arg, f"taubench:{arg}")
    return read_taubench(root, split)
