"""Who&When (ICML 2025) importer.

A dataset folder holds one JSON file per failed run, usually in the sub-folders
`Hand-Crafted/` and `Algorithm-Generated/` (the two subsets). Each file has:

    history          list of messages {content, role, name?}; one message = one step
    question         the task
    ground_truth     the task's reference answer ("groundtruth" in Hand-Crafted files)
    mistake_agent    who made the decisive error
    mistake_step     when: a 0-based index into `history` (a string, or an integer in some files)
    mistake_reason   why, in words
    system_prompt    optional {agent name: prompt}
    level, question_ID   optional

A message's agent is its `name` when present, else its `role` (Hand-Crafted
roles look like "Orchestrator (thought)", "WebSurfer", "human"). Who&When has
no failure-mode labels, so `gold.mode` stays empty.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from faultlens.middleware.errors import InputError, from_validation_error
from faultlens.middleware.model.trace import AgentInfo, GoldLabel, Outcome, Source, Step, StepKind, StepRole, Task, Trace
from faultlens.middleware.model.roles import executor_name

FORMAT = "whowhen"
# The systems that produced each subset, as the Who&When paper reports.
FRAMEWORKS = {"Hand-Crafted": "magentic-one", "Algorithm-Generated": "captainagent"}


def json_files(root: Path, spec: str) -> list[Path]:
    """Every *.json file under `root`, in a stable order."""
    if not root.exists():
        raise InputError(spec, None, None, "no such directory")
    if root.is_file():
        return [root]
    files = sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        raise InputError(spec, None, None, "no .json files in this directory")
    return files


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(str(path), None, None, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), None, None, f"not UTF-8 text ({exc.reason})") from None


def subset_of(path: Path, root: Path) -> str | None:
    """The sub-folder a file sits in, relative to the dataset root ("Hand-Crafted")."""
    if root.is_file():
        return None
    rel = path.parent.relative_to(root)
    return rel.as_posix() if rel.parts else None


def read_whowhen(directory: str | Path) -> Iterator[Trace]:
    """Yield one failed `Trace` with its gold label per Who&When file."""
    root = Path(directory)
    for path in json_files(root, f"whowhen:{directory}"):
        subset = subset_of(path, root)
        if subset is None and path.parent.name in FRAMEWORKS:
            subset = path.parent.name  # DIR is one subset's folder itself
        yield parse_whowhen(read_json(path), path, subset)


def _require(data: dict, key: str, source: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise InputError(source, None, key, "missing")
    value = data[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(source, None, key, f"expected {names}, got {type(value).__name__}")
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def parse_whowhen(data: Any, path: Path, subset: str | None = None) -> Trace:
    source = str(path)
    if not isinstance(data, dict):
        raise InputError(source, None, None, f"expected a JSON object, got {type(data).__name__}")
    history = _require(data, "history", source, list)
    if not history:
        raise InputError(source, None, "history", "is empty")
    steps: list[Step] = []
    for i, message in enumerate(history):
        where = f"history[{i}]"
        if not isinstance(message, dict):
            raise InputError(source, where, None, f"expected a message object, got {type(message).__name__}")
        agent = message.get("name") or message.get("role")
        if not isinstance(agent, str) or not agent.strip():
            raise InputError(source, where, "role", "a message needs a `name` or a `role`")
        if "content" not in message:
            raise InputError(source, where, "content", "missing")
        role = str(message.get("role") or "")
        kind = StepKind.human if role.lower() in ("human", "user") and not message.get("name") else StepKind.message
        # A code executor / terminal participant's messages are its output, evidence about the code it ran.
        step_role = StepRole.executor_output if executor_name(agent) else StepRole.decision
        steps.append(Step(index=i, agent=agent.strip(), kind=kind, role=step_role, content=_text(message["content"]),
                          native_id=str(i), metadata={"role": role} if role else {}))

    raw_step = _require(data, "mistake_step", source, (str, int))
    try:
        step = int(str(raw_step).strip())
    except ValueError:
        raise InputError(source, None, "mistake_step", f"{raw_step!r} is not an integer step index") from None
    if not 0 <= step < len(steps):
        raise InputError(source, None, "mistake_step", f"{step} is outside the history's {len(steps)} messages")
    mistake_agent = _require(data, "mistake_agent", source, str).strip()
    if not mistake_agent:
        raise InputError(source, None, "mistake_agent", "is empty")

    prompts = data.get("system_prompt") or {}
    if not isinstance(prompts, dict):
        raise InputError(source, None, "system_prompt", f"expected an object of agent name to prompt, got {type(prompts).__name__}")
    agents: list[AgentInfo] = [AgentInfo(name=str(n), description=_text(p)) for n, p in prompts.items()]

    question_id = data.get("question_ID")
    metadata = {k: data[k] for k in ("level",) if data.get(k) is not None}
    # The Hand-Crafted files spell it "groundtruth", the Algorithm-Generated ones "ground_truth".
    ground_truth = data.get("ground_truth", data.get("groundtruth"))
    try:
        return Trace(
            id=f"whowhen:{subset + '/' if subset else ''}{path.stem}",
            task=Task(query=_text(_require(data, "question", source, str)),
                      id=str(question_id) if question_id is not None else None,
                      reference_answer=_text(ground_truth) if ground_truth is not None else None,
                      metadata=metadata),
            agents=agents,
            steps=steps,
            outcome=Outcome(success=False, evaluator="whowhen", detail="Who&When runs are failures by construction"),
            source=Source(framework=FRAMEWORKS.get(subset or "", "unknown"),
                          benchmark="whowhen", format=FORMAT, native_id=path.stem, subset=subset),
            gold=GoldLabel(step=step, agent=mistake_agent, native_step=str(step),
                           reason=_text(data.get("mistake_reason")) or None),
        )
    except ValidationError as exc:
        raise from_validation_error(source, None, exc) from None
