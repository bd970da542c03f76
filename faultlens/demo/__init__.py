"""`faultlens demo`: run the bundled team offline on two tasks and show the failed run.

    faultlens demo                # stores into $FAULTLENS_DB or .faultlens/faultlens.db
    faultlens demo --db demo.db

It ends the way faultlens is meant to be used: the failed run is attributed
offline by the default method (who, when, why: the evidence in words), and
turned into a lesson for the agent that erred.
"""

from __future__ import annotations

import os

import click
from rich.console import Console

from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.demo import sim_llm
from faultlens.demo.team import TASKS, CityTeam
from faultlens.middleware import Trace, Tracer
from faultlens.feedback.loop import attribute_and_reflect
from faultlens.middleware.terminal.timeline import attribution_panel, print_trace
from faultlens.middleware.terminal.options import db_option


def run_team(tracer: Tracer) -> list[Trace]:
    """Run the demo team on its tasks (one succeeds, one fails); returns the stored traces."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sim_llm.register()
    tracer.instrument_litellm()
    team = CityTeam(tracer)
    return [team.solve(task) for task in TASKS]


@click.command("demo")
@db_option()
@click.option("--method", default=DEFAULT_METHOD, show_default=True,
              help="Attribution method for the failed run (default: the default offline method, no key or network).")
def demo(db_path: str | None, method: str) -> None:
    """Run a small multi-agent team offline, store its traces, and show the failed one.

    The team (planner → researcher with a lookup tool → analyst) calls its
    models through litellm; offline they are the deterministic `faultlens-demo`
    provider, so no key or network is needed. One task succeeds, one fails.
    """
    console = Console()
    tracer = Tracer(db=db_path)
    try:
        traces = run_team(tracer)
    finally:
        tracer.shutdown()
    for trace in traces:
        verdict = "[green]succeeded[/]" if trace.outcome and trace.outcome.success else "[red]failed[/]"
        console.print(f"{verdict}  {trace.id}  {len(trace.steps)} steps  {trace.task.query}")
    console.print(f"stored {len(traces)} traces in {tracer.store.location}\n")
    db_flag = f" --db {db_path}" if db_path else ""
    for trace in traces:
        if not trace.failed:
            continue
        attribution, lessons = attribute_and_reflect(tracer.store, trace.id, method, "offline")
        print_trace(trace, console, highlight=attribution.step if attribution else None)
        if attribution is not None:
            console.print(attribution_panel(attribution))
        for lesson in lessons:
            console.print(f"[bold green]lesson for {lesson.agent}[/] ({lesson.mode}, from {lesson.method}): {lesson.advice}")
        console.print(f"\nsee it again with: faultlens traces show {trace.id}{db_flag}")
        console.print(f"lessons the {lessons[0].agent if lessons else 'team'} would be shown: faultlens lessons list{db_flag}")
