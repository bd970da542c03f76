"""The re-run contract: how a user's program, in any language, is put back on a task, and how its re-run is judged.

A program takes part when it reads its model base URL from the environment.
For each re-run faultlens sets:

- `FAULTLENS_GATEWAY`: a base URL root naming this re-run; the program appends
  `/agent/<name>/v1` for each agent (as with the live gateway);
- `OPENAI_BASE_URL`: that root + `/v1` (single-agent programs; the agent then
  comes from the `X-Faultlens-Agent` header or is `model`);
- `FAULTLENS_TASK`: the run's task text;
- `FAULTLENS_OUTCOME_URL`: where the program may POST `{"success": bool}`.

The re-run's success comes from the first judge that applies: `--judge CMD`
(reads the program's stdout on stdin, with the same environment, so it can
read `FAULTLENS_TASK`; exit 0 = success), else an outcome the
program posted, else the run's reference answer (contained in the program's
stdout). A program that exits non-zero, or runs past its timeout, failed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from faultlens.middleware.errors import ConfigError

__all__ = ["Judge", "Program", "Ran", "Verdict", "contract_env"]

ENV_GATEWAY = "FAULTLENS_GATEWAY"
ENV_TASK = "FAULTLENS_TASK"
ENV_OUTCOME = "FAULTLENS_OUTCOME_URL"
TAIL = 400  # characters of a program's stderr kept in a trial's line

ProgramFn = Callable[[Mapping[str, str]], str]  # (the contract's environment) -> what the program printed


def contract_env(root: str, task: str, outcome_url: str) -> dict[str, str]:
    """The environment variables of the contract for a re-run served at `root`."""
    return {ENV_GATEWAY: root, "OPENAI_BASE_URL": f"{root}/v1", ENV_TASK: task, ENV_OUTCOME: outcome_url,
            # The OpenAI SDK refuses to start without a key; the gateway never forwards it.
            "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY") or "faultlens-rerun"}


@dataclass
class Ran:
    """How one run of the program ended."""

    stdout: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    error: str = ""  # stderr's tail, or the exception a callable raised


@dataclass
class Program:
    """The user's program: a shell command (any language) or a Python callable given the contract's environment."""

    run_with: str | ProgramFn
    timeout: float = 300.0
    cwd: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.run_with, str) and not self.run_with.strip():
            raise ConfigError("the re-run command is empty: give the command that runs your program, e.g. --rerun 'python agents.py'")

    def run(self, env: Mapping[str, str]) -> Ran:
        if not isinstance(self.run_with, str):
            try:
                return Ran(stdout=str(self.run_with(dict(env))))
            except Exception as exc:  # the program failed: a failed run, said in the trial
                return Ran(exit_code=1, error=f"{type(exc).__name__}: {exc}"[:TAIL])
        try:
            done = subprocess.run(self.run_with, shell=True, env={**os.environ, **env}, cwd=self.cwd, capture_output=True,
                                  text=True, timeout=self.timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return Ran(stdout=out, exit_code=None, timed_out=True)
        return Ran(stdout=done.stdout, exit_code=done.returncode, error=done.stderr.strip()[-TAIL:])


@dataclass
class Verdict:
    """What a judge said of one re-run: success, or why not, and whether that can be trusted."""

    success: bool
    how: str  # judge, outcome, reference
    detail: str = ""
    judged: bool = True  # False: no judge could decide (timed out, none configured)


@dataclass
class Judge:
    """Decides whether a re-run succeeded: `command` (stdout on stdin, exit 0 = success), else a posted outcome,
    else `reference` contained in the stdout."""

    command: str | Callable[[str], bool] | None = None
    reference: str | None = None
    timeout: float = 60.0

    def judge(self, stdout: str, posted: bool | None, env: Mapping[str, str] | None = None) -> Verdict:
        """The verdict on one re-run; a judge command gets the stdout on stdin and the contract's environment (`env`)."""
        if callable(self.command):
            return Verdict(bool(self.command(stdout)), "judge")
        if self.command:
            try:
                done = subprocess.run(self.command, shell=True, input=stdout, capture_output=True, text=True, timeout=self.timeout,
                                      env={**os.environ, **(env or {})})
            except subprocess.TimeoutExpired:
                return Verdict(False, "judge", f"the judge did not answer within {self.timeout:g} s", judged=False)
            return Verdict(done.returncode == 0, "judge", f"the judge exited {done.returncode}")
        if posted is not None:
            return Verdict(posted, "outcome", "the program posted its outcome")
        if self.reference:
            found = self.reference.strip().lower() in stdout.lower()
            return Verdict(found, "reference", "the reference answer is in the output" if found else "the reference answer is not in the output")
        return Verdict(False, "none", "no judge: give --judge CMD, post an outcome from the program, or record a reference answer",
                       judged=False)
