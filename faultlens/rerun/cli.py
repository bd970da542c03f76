"""`faultlens verify`: confirm a failed run's decisive step by re-running the program with that call corrected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from faultlens.attributors.base import Attributor
from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.middleware.capture.upstream import DEFAULT_TIMEOUT, LiteLLMUpstream
from faultlens.middleware.replay.rerunners import Trial
from faultlens.middleware.store import open_store
from faultlens.middleware.terminal.options import db_option
from .contract import Judge, Program
from .verify import Verifier, dumps, verify

console = Console(stderr=True)


def rerun_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options that make a server's worker verify each verdict by re-running the program (`serve`, `worker`)."""
    for decorator in reversed([
        click.option("--rerun", "rerun_command", default=None, metavar="CMD",
                     help="Verify each failed run's verdict by re-running this program (docs/verify.md); needs --rerun-upstream."),
        click.option("--rerun-upstream", default=None, metavar="MODEL", help="litellm model of the re-runs' live calls ({agent} allowed)."),
        click.option("--rerun-api-base", default=None, metavar="URL", help="Base URL of the re-runs' upstream."),
        click.option("--rerun-judge", default=None, metavar="CMD", help="Judges a re-run (its stdout on stdin, exit 0 = success)."),
    ]):
        command = decorator(command)
    return command


def rerun_wrapper(rerun_command: str | None, rerun_upstream: str | None, rerun_api_base: str | None,
                  rerun_judge: str | None) -> Callable[[Attributor], Attributor] | None:
    """From `rerun_options`: a function that wraps the worker's attributor in a `Verifier`, or None when not asked for."""
    if not rerun_command:
        return None
    if not rerun_upstream:
        raise click.UsageError("--rerun needs --rerun-upstream MODEL: the re-runs' live calls go there")
    upstream = LiteLLMUpstream(rerun_upstream, api_base=rerun_api_base)

    def wrap(base: Attributor) -> Attributor:
        return Verifier(Program(rerun_command), upstream, judge=Judge(rerun_judge), method=base)

    return wrap


@click.command("verify")
@click.argument("run")
@db_option()
@click.option("--rerun", "command", required=True, metavar="CMD",
              help="The command that runs your program (any language); it reads FAULTLENS_GATEWAY or OPENAI_BASE_URL (docs/rerun.md).")
@click.option("--judge", "judge_command", default=None, metavar="CMD",
              help="Judges a re-run: gets the program's stdout on stdin, exit 0 = success. Default: an outcome the program "
                   "posts to $FAULTLENS_OUTCOME_URL, else the run's reference answer in the stdout.")
@click.option("--upstream", metavar="MODEL", required=True, help="litellm model of live calls ({agent} is the calling agent's name), as for `faultlens gateway`.")
@click.option("--api-base", default=None, help="Base URL of the upstream (a local OpenAI-compatible server).")
@click.option("--upstream-timeout", type=click.FloatRange(min=0.1), default=DEFAULT_TIMEOUT, show_default=True, help="Seconds an upstream call may take.")
@click.option("--method", default=DEFAULT_METHOD, show_default=True, help="The base method that ranks the candidate steps.")
@click.option("-k", "k", type=click.IntRange(min=1), default=3, show_default=True, help="Candidates tried, earliest first; a confirmed one is then checked "
              "against the later ones (one new draw each: one that fixes the run overturns it).")
@click.option("--draws", type=click.IntRange(min=1), default=1, show_default=True, help="New draws of a candidate call before moving on.")
@click.option("--controls", type=click.IntRange(min=1), default=1, show_default=True,
              help="Re-runs with a fixing candidate kept as recorded (later calls drawn anew) that must all still fail "
                   "before it is confirmed; 2 guards against later calls that slip again by chance.")
@click.option("--max-reruns", type=click.IntRange(min=0), default=None, help="At most this many re-runs [default: k × draws + controls].")
@click.option("--corrector", default=None, metavar="MODEL", help="Rewrite the candidate call with this litellm model instead of drawing it again with a lesson.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=300.0, show_default=True, help="Seconds one re-run of the program may take.")
@click.option("--judge-timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True, help="Seconds the judge may take.")
@click.option("--mode-from", type=click.Choice(["base", "correction"]), default="base", show_default=True,
              help="The verified verdict's failure mode: the base method's, or read from what the correction changed.")
@click.option("--json", "as_json", is_flag=True, help="Print {verified, agent, step, mode, reruns, trials: [...]} as JSON.")
def verify_command(run, db_path, command, judge_command, upstream, api_base, upstream_timeout, method, k, draws, controls, max_reruns, corrector,
                   timeout, judge_timeout, mode_from, as_json):
    """Verify the decisive step of failed run RUN by re-running your program with that call corrected.

    For the base method's top-k candidate steps, earliest first, the program is
    run again (--rerun) through a gateway that replays the recorded calls
    before the candidate, corrects the candidate (a new draw with the
    verdict's lesson in its system message, or --corrector's rewrite), and
    lets the rest run live. The first candidate whose re-run succeeds is the
    verified decisive step. A re-run that drifts, times out or meets a failing
    upstream is "not verifiable": the verdict stays the base's, unverified.
    The verdict and every trial are stored with the run.
    """
    store = open_store(db_path)
    live = LiteLLMUpstream(upstream, timeout=upstream_timeout, api_base=api_base)

    def said(trial: Trial) -> None:
        mark = {"success": "[green]fixed[/]", "failure": "[yellow]still failed[/]"}.get(trial.outcome or "", f"[red]{trial.outcome}[/]")
        console.print(f"step {trial.step}: {mark} in {trial.seconds:.1f} s — {trial.detail}")

    attribution = verify(store, run, Program(command, timeout=timeout), live, judge=Judge(judge_command, timeout=judge_timeout),
                         method=method, k=k, draws=draws, max_reruns=max_reruns if max_reruns is not None else k * draws + controls,
                         corrector=corrector, on_trial=said, mode_from=mode_from, controls=controls)
    if as_json:
        click.echo(dumps(attribution))
        return
    details = attribution.details
    table = Table(title=f"run {run}: {'verified' if details.get('verified') else 'not verified'}")
    for column in ("step", "outcome", "live calls", "seconds", "what happened"):
        table.add_column(column)
    for trial in details.get("trials", []):
        table.add_row(str(trial.get("step")), str(trial.get("outcome", "")), str(trial.get("live_calls", "")),
                      f"{trial.get('seconds', 0):.1f}", str(trial.get("detail", "")))
    Console().print(table)
    verdict = "verified" if details.get("verified") else f"not verified ({details.get('fallback')})"
    click.echo(f"decisive step {attribution.step} by {attribution.agent} ({attribution.mode or 'mode unknown'}): {verdict}; "
               f"{details.get('reruns', 0)} re-run(s)")
