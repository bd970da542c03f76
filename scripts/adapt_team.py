"""`faultlens adapt`, the command itself, end to end offline on one replay-lab team: its successful runs, then adapt.

    .venv/bin/python scripts/adapt_team.py TEAM --out DIR [--runs 50] [--seed 35000] [--draws 1] [--per-run 1]
        [--interrupt-after SECONDS]

1. Runs the team's tasks (`--seed`) through a live gateway into `DIR/runs.db` until `--runs` of them succeeded
   (`replay_lab_eval.record_team`: each run its framework's real orchestration, a separate process); a `DIR` that
   holds them already is read back.
2. Serves the team's simulated agents as an OpenAI-compatible provider on loopback (the model name is the agent).
3. Runs `faultlens adapt --db DIR/runs.db --rerun CMD --judge CMD --upstream 'openai/{agent}' --api-base URL
   --out DIR/adapted --runs N` as a subprocess, as a user would, with its progress bar. With `--interrupt-after`, it is
   interrupted (Ctrl-C) after that many seconds, then run again with the same arguments: it resumes.

The re-run command and the judge are this script's `program` and `judge` modes: the program tells the provider
which task it answers (its task id, from `FAULTLENS_TASK`) and runs the team; the judge is the environment's
evaluator on the program's stdout. A re-run of a run never sees the run's slips: adapt reads successful runs only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASK_ROUTE = "/task"


def _task_of(tasks_file: Path) -> str:
    """The id of the task whose text is `FAULTLENS_TASK` (the re-run contract), among the recorded ones."""
    by_query = json.loads(tasks_file.read_text())
    query = os.environ.get("FAULTLENS_TASK", "")
    if query not in by_query:
        raise SystemExit(f"FAULTLENS_TASK is not one of the tasks in {tasks_file}: {query[:80]!r}")
    return by_query[query]


def program(team: str, tasks_file: Path, provider: str) -> int:
    """The re-run contract's program: tell the provider the task, then run the team on it."""
    from faultlens.injectors.replay_lab.program import main

    httpx.post(f"{provider}{TASK_ROUTE}", json={"task": _task_of(tasks_file)}, timeout=30).raise_for_status()
    return main([team, _task_of(tasks_file)])


def judge(team: str, tasks_file: Path) -> int:
    """The judge: exit 0 when the environment's evaluator accepts the program's stdout for the task."""
    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.replay_lab.program import find_task

    env = get_env(team)
    answer = sys.stdin.read().strip()
    return 0 if env.evaluate(find_task(env, _task_of(tasks_file)), answer or None).success else 1


def provider_app(agents: Any, store: Any, tasks: list[Any]) -> Any:
    """The simulated agents as an OpenAI-compatible chat completions route; `/task` says which task a re-run answers.
    A call drawn anew outside a re-run (adapt's draws) is answered for the task whose recorded run asked it."""
    from fastapi import FastAPI

    answer, by_id = agents.for_recorded(store, tasks), {t.id: t for t in tasks}
    app = FastAPI()

    @app.post(TASK_ROUTE)
    def task(body: dict[str, str]) -> dict[str, str]:
        agents.rerun(by_id[body["task"]])
        return {"task": body["task"]}

    @app.post("/v1/chat/completions")
    def complete(body: dict[str, Any]) -> dict[str, Any]:
        return answer(str(body.get("model")), {k: v for k, v in body.items() if k not in ("model", "stream", "stream_options")})

    return app


def recorded(team: str, out: Path, runs: int, seed: int) -> tuple[Any, Any, list[Any]]:
    """(the team's simulated agents, the store, its successful runs' tasks): recorded now, or read back from `out`."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from replay_lab_eval import record_team

    from faultlens.injectors.envs import get as get_env
    from faultlens.injectors.replay_lab import SimulatedAgents
    from faultlens.injectors.replay_lab.agents import recorded_asks
    from faultlens.injectors.replay_lab.program import find_task
    from faultlens.middleware.store.sqlite import open_store

    store, tasks_file = open_store(out / "runs.db"), out / "tasks.json"
    if tasks_file.exists():  # recorded by an earlier run of this script
        env, agents = get_env(team), SimulatedAgents(get_env(team))
        tasks = [find_task(env, task_id) for task_id in json.loads(tasks_file.read_text()).values()]
        for task, agent, key in recorded_asks(store, tasks):  # each was its agent's first draw: asked again is a new one
            agents.draws[task.id, agent, key] += 1
        return agents, store, tasks
    started = time.monotonic()
    rec = record_team(team, runs, store, seed=seed, min_succeeded=runs, max_tasks=runs * 4)
    print(f"{team}: {rec.runs} runs recorded in {time.monotonic() - started:.0f} s, {len(rec.succeeded)} succeeded", flush=True)
    tasks_file.write_text(json.dumps({t.query: t.id for t in rec.succeeded}))
    return rec.agents, store, rec.succeeded


def run(team: str, out: Path, *, runs: int, seed: int, draws: int, per_run: int, interrupt_after: float | None) -> int:
    from faultlens.server.run import ServerThread

    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    agents, store, succeeded = recorded(team, out, runs, seed)
    tasks_file = out / "tasks.json"
    me = f"{sys.executable} {Path(__file__).resolve()}"
    with ServerThread(provider_app(agents, store, succeeded)) as provider:
        command = [str(Path(sys.executable).with_name("faultlens")), "adapt", "--db", str(out / "runs.db"), "--out", str(out / "adapted"),
                   "--runs", str(runs), "--draws", str(draws), "--per-run", str(per_run), "--upstream", "openai/{agent}",
                   "--api-base", f"{provider.url}/v1",
                   "--rerun", f"{me} program {team} --tasks {tasks_file} --provider {provider.url}",
                   "--judge", f"{me} judge {team} --tasks {tasks_file}"]
        env = {**os.environ, "OPENAI_API_KEY": "sk-simulated-agents"}
        if interrupt_after is not None:
            # As Ctrl-C in a terminal: to the whole process group (adapt and the program it runs), with SIGINT's default
            # action restored (a shell starts a background job with SIGINT ignored, and its children inherit that).
            first = subprocess.Popen(command, env=env, cwd=ROOT, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            time.sleep(interrupt_after)
            os.killpg(first.pid, signal.SIGINT)
            first.wait(timeout=300)
            tried = (out / "adapted" / "attempts.jsonl").read_text().count("\n")
            print(f"interrupted after {interrupt_after:g} s (exit {first.returncode}) with {tried} attempts written; resuming", flush=True)
        done = subprocess.run(command, env=env, cwd=ROOT)
    print(f"adapt exited {done.returncode}; {time.monotonic() - started:.0f} s in all", flush=True)
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    import argparse

    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("program", "judge"):  # run by `faultlens adapt` for each re-run
        mode = argparse.ArgumentParser(prog=f"adapt_team.py {args[0]}")
        mode.add_argument("team")
        mode.add_argument("--tasks", type=Path, required=True)
        mode.add_argument("--provider", default="")
        given = mode.parse_args(args[1:])
        return program(given.team, given.tasks, given.provider) if args[0] == "program" else judge(given.team, given.tasks)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("team", help="A replay-lab team (scripts/replay_lab_eval.py's TEAMS).")
    parser.add_argument("--out", type=Path, required=True, help="Where runs.db, tasks.json and adapted/ go.")
    parser.add_argument("--runs", type=int, default=50, help="Successful runs to adapt on.")
    parser.add_argument("--seed", type=int, default=35_000, help="The tasks' seed.")
    parser.add_argument("--draws", type=int, default=1, help="`faultlens adapt --draws`.")
    parser.add_argument("--per-run", type=int, default=1, help="`faultlens adapt --per-run`.")
    parser.add_argument("--interrupt-after", type=float, default=None, metavar="SECONDS",
                        help="Interrupt the first adapt after this long, then run it again (it resumes).")
    given = parser.parse_args(args)
    return run(given.team, given.out, runs=given.runs, seed=given.seed, draws=given.draws, per_run=given.per_run,
               interrupt_after=given.interrupt_after)


if __name__ == "__main__":
    sys.exit(main())
