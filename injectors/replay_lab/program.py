"""A framework team as a program under the re-run contract: `python -m faultlens.injectors.replay_lab.program ENV TASK_ID`.

The environment's real framework orchestration runs here, in its own
process; every model call it makes is sent over HTTP to
`$FAULTLENS_GATEWAY/agent/<agent>/v1/chat/completions` (the contract of
`faultlens verify`, docs/rerun.md), whose upstream answers as the team's
simulated agents. The team's final answer is printed on stdout (anything the
framework prints goes to stderr), and nothing else: a judge reads it.

TASK_ID is one of the environment's generated tasks, `<env>-<seed>-<i>` (`Environment.tasks(seed, n)`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from faultlens.middleware.errors import ConfigError
from faultlens.middleware.replay.gateway_calls import TRANSPORT

from ..envs import get as get_env
from ..envs.framework import routed_through

__all__ = ["find_task", "main", "over_http"]

ENV_GATEWAY = "FAULTLENS_GATEWAY"
Call = Callable[[str, dict[str, Any]], dict[str, Any]]


class GatewayCallError(ConfigError):
    """The gateway refused a call (a re-run's drift is a 409): the run cannot go on."""


def find_task(env: Any, task_id: str) -> Any:
    """Task `<env>-<seed>-<i>` of `env`, generated as `env.tasks(seed, i + 1)` generates it."""
    prefix = f"{env.name}-"
    try:
        seed, index = (int(part) for part in task_id[len(prefix):].split("-")) if task_id.startswith(prefix) else (None, None)
    except ValueError:
        seed = index = None
    if seed is None or index is None or index < 0:
        raise ConfigError(f"task id {task_id!r} is not '{env.name}-<seed>-<index>'")
    task = env.tasks(seed, index + 1)[index]
    if task.id != task_id:
        raise ConfigError(f"{env.name} generated task {task.id!r} for {task_id!r}")
    return task


def over_http(root: str, client: httpx.Client) -> Callable[[Call], Call]:
    """A `routed_through` wrap: each call of the run goes to the gateway at `root` instead of the in-process agents."""

    def wrap(_inner: Call) -> Call:
        def call(agent: str, request: dict[str, Any]) -> dict[str, Any]:
            # The endpoint answers in one piece; the framework's client reads either.
            body = {k: v for k, v in request.items() if k not in TRANSPORT}
            answer = client.post(f"{root}/agent/{agent}/v1/chat/completions", json=body)
            if answer.status_code != 200:
                raise GatewayCallError(f"the gateway answered {answer.status_code} to {agent}'s call: {answer.text[:300]}")
            return answer.json()

        return call

    return wrap


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Within the block, whatever writes to stdout (Python or a child process) writes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m faultlens.injectors.replay_lab.program ENV TASK_ID", file=sys.stderr)
        return 2
    root = os.environ.get(ENV_GATEWAY)
    if not root:
        print(f"{ENV_GATEWAY} is not set: run this program through `faultlens verify --rerun` or the replay lab", file=sys.stderr)
        return 2
    env = get_env(args[0])
    task = find_task(env, args[1])
    with httpx.Client(timeout=120.0) as client, stdout_to_stderr(), routed_through(over_http(root.rstrip("/"), client)):
        result = env.run(task, sim={"seed": 0}, trace_id=f"{env.name}-{task.id}")
    print(result.answer or "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
