"""The `faultlens` command.

The root group and the `traces` commands live here. First-party commands are
named in `COMMANDS` and imported when first used (so `faultlens --help` does
not import litellm); third-party packages add theirs through the
`faultlens.cli` entry-point group.
"""

from __future__ import annotations

import json
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from faultlens.middleware.errors import FaultlensError, extra_needed
from faultlens.middleware.terminal.options import db_option

if TYPE_CHECKING:
    from collections.abc import Iterable

    from faultlens.middleware.model.trace import Trace
    from faultlens.middleware.store import Store

console = Console()


def get_store(db_path: str | None) -> Store:
    from faultlens.middleware.store import open_store  # the store's dependencies load only for a command that opens it

    return open_store(db_path)


class PluginGroup(click.Group):
    """A click group that also lists the commands other packages register."""

    def _plugins(self) -> dict:
        return {ep.name: ep for ep in entry_points(group="faultlens.cli") if ep.name not in COMMANDS}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS) | set(self._plugins()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is not None:
            return command
        if name in COMMANDS:
            module, _, attr = COMMANDS[name].partition(":")
            with extra_needed(f"`faultlens {name}`"):
                return getattr(import_module(module), attr)
        ep = self._plugins().get(name)
        if ep is None:
            return None
        try:
            return ep.load()
        except (ImportError, AttributeError) as exc:
            # A plugin that fails to import must not break every other command.
            return _unavailable(name, str(exc))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # First-party commands are listed from COMMAND_HELP: importing them for a line of help
        # would import litellm, scikit-learn and FastAPI just to print the list.
        limit = formatter.width - 6 - max((len(name) for name in self.list_commands(ctx)), default=0)
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            if name in COMMAND_HELP and super().get_command(ctx, name) is None:
                rows.append((name, click.Command(name, help=COMMAND_HELP[name]).get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        # Our own errors already say what is wrong and what to do: print them
        # as one line, not a traceback.
        try:
            return super().invoke(ctx)
        except FaultlensError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            # A file we could not open or read (permissions, a directory, a device): name it.
            raise click.ClickException(f"{exc.filename or 'input'}: {exc.strerror or exc}") from None


def _unavailable(name: str, why: str) -> click.Command:
    def fail() -> None:
        raise click.ClickException(f"`faultlens {name}` is unavailable: {why}")

    return click.Command(name, help=f"(unavailable: {why})", callback=fail)


# First-party commands: "module:attribute", imported on first use.
COMMANDS = {
    "attribute": "faultlens.attributors.cli:attribute",
    "bench": "faultlens.benchmark.cli:bench",
    "train": "faultlens.benchmark.cli:train",
    "inject": "faultlens.injectors.cli:inject",
    "serve": "faultlens.serve:serve",
    "worker": "faultlens.worker:worker",
    "lessons": "faultlens.feedback.cli:lessons",
    "demo": "faultlens.demo:demo",
    "proxy": "faultlens.proxy:proxy",
    "gateway": "faultlens.gateway_cli:gateway",
    "phoenix": "faultlens.phoenix.cli:phoenix",
    "verify": "faultlens.rerun.cli:verify_command",
    "detect": "faultlens.detect_cli:detect",
    "adapt": "faultlens.rerun.adapt_cli:adapt_command",
    "patterns": "faultlens.feedback.patterns_cli:patterns",
}
# Their short help, for `faultlens --help` without importing them (tests/faultlens/test_cli.py keeps it equal).
COMMAND_HELP = {
    "attribute": "Say who (agent), when (step) and why (failure mode) a run failed.",
    "bench": "Score attributors on benchmark datasets and compare them.",
    "train": "Train the `learned` attributor's model on DATASET (never on a test trace); see benchmark/train.py.",
    "inject": "Make failure traces with exact labels by warm-start error injection.",
    "serve": "Run the faultlens service: OTLP/HTTP ingest, background attribution, REST API and web UI.",
    "worker": "Attribute failed runs queued in the store, until interrupted (Ctrl-C or SIGTERM finish the job in hand).",
    "lessons": "Lessons learnt from failed runs: list them, learn from a run, see what an agent would be shown.",
    "demo": "Run a small multi-agent team offline, store its traces, and show the failed one.",
    "proxy": "Serve an OpenAI-compatible endpoint that records, replays or injects errors into any agent's model calls.",
    "gateway": "Forward every model call of any framework upstream, record it as a step, and show each agent its lessons.",
    "phoenix": "Attribute the failed runs of an Arize Phoenix project and write the verdicts back to it.",
    "verify": "Verify the decisive step of failed run RUN by re-running your program with that call corrected.",
    "detect": "Score finished runs with the offline failure detector: p_failed, the probability a run failed.",
    "adapt": "Learn your system from its own successful runs: inject errors by re-running it, keep the failures with exact labels.",
    "patterns": "What keeps failing: attributed failed runs grouped into recurring patterns (agent, mode, evidence).",
}


@click.group(cls=PluginGroup)
@click.version_option(package_name="faultlens")
def cli() -> None:
    """faultlens: find which agent and which step made a run fail, and why.

    Capture runs with the tracer, attribute failures, validate attributors on
    benchmarks, and feed lessons back into your agents.
    """


@cli.group()
def traces() -> None:
    """List, show, import and export stored traces."""


@traces.command("list")
@db_option()
@click.option("--status", type=click.Choice(["failed", "succeeded", "unknown"]), help="Only traces with this outcome.")
@click.option("--agent", help="Only traces with a step by this agent.")
@click.option("--labelled/--unlabelled", "labelled", default=None,
              help="Only runs with a person's label (`traces label`), or only runs without one.")
@click.option("--limit", default=50, show_default=True, help="How many traces to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
def list_traces(db_path, status, agent, labelled, limit, as_json):
    """List stored traces, newest first."""
    store = get_store(db_path)
    summaries = store.list_traces(status=status, agent=agent, labelled=labelled, limit=limit)
    if as_json:
        for s in summaries:
            click.echo(json.dumps(s.__dict__))
        return
    table = Table(title=f"{len(summaries)} trace(s) in {store.location}")
    for column in ("id", "outcome", "label", "steps", "agents", "source", "task"):
        table.add_column(column, overflow="fold")
    for s in summaries:
        outcome = {None: "[yellow]?[/]", True: "[green]ok[/]", False: "[red]failed[/]"}[s.success]
        table.add_row(s.id, outcome, "✓" if s.labelled else "", str(s.n_steps), ", ".join(s.agents[:4]),
                      s.benchmark or s.framework or "", s.query[:80])
    console.print(table)


@traces.command("show")
@db_option()
@click.argument("trace_id")
@click.option("--step", type=int, default=None, help="Highlight this step.")
def show_trace(db_path, trace_id, step):
    """Show a stored trace as a timeline, failed steps marked ✗."""
    from faultlens.middleware.terminal.timeline import attribution_panel, print_trace

    store = get_store(db_path)
    trace = store.get_trace(trace_id)
    print_trace(trace, console, highlight=step)
    for attribution in store.attributions(trace_id)[-1:]:
        console.print(attribution_panel(attribution))


@traces.command("export")
@db_option()
@click.argument("trace_id")
@click.option("--format", "fmt", type=click.Choice(["json", "otlp"]), default="json", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout.")
def export_trace(db_path, trace_id, fmt, output):
    """Export a stored trace as native JSON or OTLP JSON."""
    trace = get_store(db_path).get_trace(trace_id)
    if fmt == "json":
        text = trace.model_dump_json(indent=2)
    else:
        from faultlens.middleware.otlp.convert import trace_to_otlp

        text = json.dumps(trace_to_otlp(trace), indent=2)
    if output:
        output.write_text(text + "\n", encoding="utf-8")
        console.print(f"wrote {output}")
    else:
        click.echo(text)


@traces.command("label")
@db_option()
@click.argument("trace_id", required=False)
@click.option("--step", type=int, help="The decisive step (its index, as `faultlens traces show` numbers them).")
@click.option("--agent", help="Who is to blame, if not the step's own agent.")
@click.option("--mode", help="The failure mode's code, e.g. A.2 (--modes lists them).")
@click.option("--reason", help="Why, in a sentence.")
@click.option("--clear", is_flag=True, help="Remove the run's label instead.")
@click.option("--modes", "list_modes", is_flag=True, help="List the failure modes and exit.")
def label_trace(db_path, trace_id, step, agent, mode, reason, clear, list_modes):
    """Label a stored run's decisive step, for `learned` to train on.

    `learned` judges a system well only after it has seen labelled runs of
    that system (docs/real-traces.md). Label some failed runs, then train on
    them beside the bundled data and use the model:

    \b
      faultlens traces label TRACE_ID --step 4 --mode C.2 --reason "dropped the city whose lookup failed"
      faultlens train --dataset bundled:dev --dataset store:faultlens.db --out my-model.joblib
      faultlens attribute TRACE_ID -m learned -O model_path=my-model.joblib
    """
    from faultlens.middleware.model.labels import decision_behind, label_for

    if list_modes:
        from faultlens.middleware.model.taxonomy import taxonomy_text

        click.echo(taxonomy_text())
        return
    if not trace_id:
        raise click.UsageError("give a stored trace id (or --modes)")
    store = get_store(db_path)
    if clear:
        if any(v is not None for v in (step, agent, mode, reason)):
            raise click.UsageError("--clear takes no --step, --agent, --mode or --reason")
        store.set_gold(trace_id, None)
        console.print(f"removed the label of {trace_id}")
        return
    if step is None:
        raise click.UsageError("give --step (or --clear)")
    trace = store.get_trace(trace_id)
    gold = label_for(trace, step, agent=agent, mode=mode, reason=reason)
    store.set_gold(trace_id, gold)
    console.print(f"labelled {trace_id}: step {gold.step} by {gold.agent}" + (f", {gold.mode}" if gold.mode else ""))
    cause = decision_behind(trace, step)
    if cause is not None:
        console.print(f"[yellow]note:[/] step {step} is a {trace.steps[step].role.value.replace('_', ' ')}; learned ranks decisions only, "
                      f"so this label teaches it the mode but not the step: to teach the step, label step {cause}, the decision it is about")


@traces.command("import")
@db_option()
@click.argument("spec")
@click.option("--media-root", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Also look up relative image/frame paths here (whowhenpro: specs; after the trace's folder and its parents).")
def import_traces(db_path, spec, media_root):
    """Import traces from SPEC into the store.

    SPEC is a file (runs.jsonl, spans.json) or FORMAT:ARG, e.g. jsonl:runs.jsonl,
    otlp:spans.json, whowhen:DIR, whowhenpro:DIR, bundled:test. Nothing is
    stored unless every record is valid.
    """
    from faultlens.middleware.sources import load_traces

    traces: Iterable[Trace]  # a Dataset (with --media-root) or the records as read
    if media_root is not None:
        from faultlens.benchmark.datasets import load_dataset

        traces = load_dataset(spec, media_root=media_root)
    else:
        traces = load_traces(spec)
    store = get_store(db_path)
    count = store.save_traces(traces)
    if count == 0:
        raise click.ClickException(f"{spec}: holds no traces; nothing imported")
    console.print(f"imported {count} trace(s) from {spec} into {store.location}")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
