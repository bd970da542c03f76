"""`faultlens lessons`: look at the lesson memory, learn from a failed run, see what an agent would be shown."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from faultlens.attributors.registry import DEFAULT_METHOD
from faultlens.middleware.terminal.options import db_option
from faultlens.middleware.store import open_store

from .memory import LessonMemory
from .reflect import ALL_AGENTS

console = Console()

def _memory(db_path: str | None) -> LessonMemory:
    return LessonMemory(open_store(db_path))


@click.group("lessons")
def lessons() -> None:
    """Lessons learnt from failed runs: list them, learn from a run, see what an agent would be shown."""


@lessons.command("list")
@db_option()
@click.option("--agent", default=None, help=f"Only this agent's lessons ('{ALL_AGENTS}' for lessons addressed to every agent).")
@click.option("--all", "include_retired", is_flag=True, help="Include retired lessons.")
def list_lessons(db_path: str | None, agent: str | None, include_retired: bool) -> None:
    """Stored lessons with their counters (shown in / helped / failed runs, merged duplicates)."""
    found = _memory(db_path).lessons(agent, include_retired=include_retired)
    table = Table(title=f"{len(found)} lesson(s)")
    for column in ("id", "agent", "mode", "runs ok/fail", "merged"):
        table.add_column(column, no_wrap=True)
    table.add_column("advice", min_width=20, ratio=1)
    for lesson in found:
        table.add_row(lesson.id[:8] + (" (retired)" if lesson.retired else ""), lesson.agent, lesson.mode or "-",
                      f"{lesson.helped}/{lesson.failed}", str(lesson.merged), lesson.advice)
    console.print(table)


@lessons.command("show")
@db_option()
@click.argument("lesson_id")
def show(db_path: str | None, lesson_id: str) -> None:
    """One lesson in full, as JSON (an id prefix from `lessons list` is enough)."""
    memory = _memory(db_path)
    matches = [lesson for lesson in memory.lessons(include_retired=True) if lesson.id.startswith(lesson_id)]
    if len(matches) != 1:
        raise click.ClickException(f"{len(matches)} lessons have an id starting with {lesson_id!r}; give more of the id")
    console.print_json(matches[0].model_dump_json())


@lessons.command("learn")
@db_option()
@click.argument("trace_id")
@click.option("--method", default=DEFAULT_METHOD, show_default=True, help="Attribution method (see `faultlens attribute --list`).")
@click.option("--model", default=None, help="litellm model for LLM attribution methods.")
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE",
              help="An attribution method option, repeatable, e.g. -O k=5 for counterfactual.")
@click.option("--reflector", default=None, help="offline (default), terminal, or a litellm model for LLM reflection.")
@click.option("--from-label", is_flag=True,
              help="Learn from the run's label (`faultlens traces label`) instead of an attributor: retire the run's "
                   "lessons drawn from another step, reflect on the label unless a kept lesson names its step.")
def learn(db_path: str | None, trace_id: str, method: str, model: str | None, method_options: tuple[str, ...],
          reflector: str | None, from_label: bool) -> None:
    """Attribute a stored failed run, save the attribution, and keep the lessons reflected from it."""
    from faultlens.attributors import build, parse_options

    from .loop import learn_from_label, reflect_on
    from .reflect import get_reflector

    memory = _memory(db_path)
    if from_label:
        if method != DEFAULT_METHOD or model or method_options:
            raise click.UsageError("--from-label takes no --method, --model or --option: the label is the verdict")
        result = learn_from_label(memory.store, trace_id, get_reflector(reflector), memory)
        for lesson in result.retired:
            console.print(f"retired lesson {lesson.id[:12]} for {lesson.agent}: drawn from step {lesson.step}, which the label overrules")
        if result.attribution is None:
            console.print(f"the run's lessons already name the labelled step; kept {len(result.lessons)}")
    else:
        result = reflect_on(memory.store, trace_id, build(method, model, **parse_options(method_options)), get_reflector(reflector), memory)
    a = result.attribution
    if a is not None:
        console.print(f"attribution ({a.method}, {a.status.value}): agent {a.agent}, step {a.step}, mode {a.mode}"
                      + (f" — {a.reason}" if a.reason else "") + (f" [error: {a.error}]" if a.error else ""))
    if result.reflection is not None or not from_label:
        status = result.reflection.status if result.reflection else "error"
        console.print(f"reflection ({result.reflection.method if result.reflection else '-'}): {status}"
                      + (f" — {result.error}" if result.error else ""))
    for lesson in result.lessons:
        merged = f" (merged into an existing lesson, now {lesson.merged} agreement(s))" if lesson.merged else ""
        console.print(f"lesson {lesson.id[:12]} for {lesson.agent} [{lesson.mode or 'general'}]{merged}: {lesson.advice}")
    if not result.lessons:
        raise SystemExit(1)


@lessons.command("for")
@db_option()
@click.argument("agent")
@click.argument("task")
@click.option("-k", default=3, show_default=True, help="How many lessons at most.")
def lessons_for(db_path: str | None, agent: str, task: str, k: int) -> None:
    """What AGENT would be shown working on TASK, with the relevance and track record that ranked each lesson."""
    memory = _memory(db_path)
    table = Table(title=f"lessons for {agent} (relevance threshold {memory.min_relevance})")
    for column in ("id", "mode", "relevance", "track", "score", "shown"):
        table.add_column(column, no_wrap=True)
    table.add_column("advice", min_width=20, ratio=1)
    shown = 0
    for scored in memory.scored(agent, task):
        picked = scored.relevance >= memory.min_relevance and shown < k
        shown += picked
        table.add_row(scored.lesson.id[:8], scored.lesson.mode or "-", f"{scored.relevance:.2f}", f"{scored.track:.2f}",
                      f"{scored.score:.2f}", "yes" if picked else "no", scored.lesson.advice)
    console.print(table)
