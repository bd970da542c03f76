"""tau-bench's chat messages (a run's `traj`) as steps: one step per message, its speaker the agent.

Shared by the AgentRx importer (`taubench`) and the published runs files (`taubench_runs`).
"""

from __future__ import annotations

import json
from typing import Any

from faultlens.middleware.errors import InputError
from faultlens.middleware.model.trace import Step, StepKind, StepRole

__all__ = ["AGENTS", "ROLES", "message_text", "trajectory_steps"]

AGENTS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}
ROLES = {"system": StepRole.control, "user": StepRole.decision, "assistant": StepRole.decision, "tool": StepRole.tool_result}


def message_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def trajectory_steps(traj: Any, source: str, record: str) -> list[Step]:
    """The steps of a run's messages; an InputError names the message and field that cannot be read."""
    if not isinstance(traj, list) or not traj:
        raise InputError(source, record, "traj", "missing, empty or not a list")
    steps = []
    for i, message in enumerate(traj):
        where = f"{record}, traj[{i}]"
        if not isinstance(message, dict):
            raise InputError(source, where, None, f"expected a message object, got {type(message).__name__}")
        role = message.get("role")
        if not isinstance(role, str) or role not in AGENTS:
            raise InputError(source, where, "role", f"{role!r} is not one of {', '.join(AGENTS)}")
        content = message_text(message.get("content"))
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise InputError(source, where, "tool_calls", "must be a list")
        tool_name = arguments = result = None
        kind = {"system": StepKind.message, "user": StepKind.human, "assistant": StepKind.message, "tool": StepKind.tool_result}[role]
        if role == "assistant" and calls:
            kind = StepKind.tool_call
            fns = []
            for j, call in enumerate(calls):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise InputError(source, where, f"tool_calls[{j}].function.name", "missing or not a string")
                args = fn.get("arguments")
                try:
                    args = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    pass  # kept as the text the model wrote: a malformed call is evidence, not an import error
                fns.append((fn["name"], args))
            tool_name = fns[0][0] if len(fns) == 1 else ",".join(n for n, _ in fns)
            arguments = fns[0][1] if len(fns) == 1 else [{"name": n, "arguments": a} for n, a in fns]
            content = "\n".join([content] + [f"[tool_call] {n}({json.dumps(a, ensure_ascii=False, sort_keys=True)})" for n, a in fns]).strip()
        elif role == "tool":
            tool_name = str(message.get("name") or "") or None
            result = content
        metadata = {"role": role}
        if message.get("tool_call_id"):
            metadata["tool_call_id"] = message["tool_call_id"]
        steps.append(Step(index=i, agent=AGENTS[role], kind=kind, role=ROLES[role], content=content, tool_name=tool_name,
                          tool_arguments=arguments, tool_result=result, native_id=str(i + 1), metadata=metadata))
    return steps
