"""`faultlens attribute`: who, when and why for one failed trace."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from faultlens.middleware.model.answer_key import attributor_view
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.trace import Trace
from faultlens.middleware.terminal.options import db_option
from faultlens.middleware.store import open_store

from . import llm  # noqa: F401  (sets litellm's offline price map before litellm is imported)
from .registry import DEFAULT_METHOD, build, factory, names, parse_options, uses_model


def _load(source: str, db_path: str | None) -> tuple[Trace, bool]:
    """The trace named by SOURCE: a file (JSON or JSONL with one trace) or a stored trace id. True if it came from a file."""
    path = Path(source)
    if path.is_dir():
        raise InputError(str(path), None, None, "is a directory; give one trace file (JSON, or JSONL holding one trace) or a stored trace id")
    if path.is_file():
        from faultlens.middleware.jsonl import load_jsonl, parse_trace, read_utf8

        if path.suffix in (".jsonl", ".gz"):
            traces = load_jsonl(path)
            if len(traces) != 1:
                raise InputError(str(path), None, None, f"holds {len(traces)} traces; attribute one at a time (store them with `faultlens traces import` and pass an id)")
            return traces[0], True
        return parse_trace(read_utf8(path), str(path)), True
    return open_store(db_path).get_trace(source), False


def _summary(factory: object) -> str:
    """One line about a method: a baseline's rule, else its module's first paragraph."""
    import inspect
    import sys

    rule = getattr(factory, "rule", "")
    if rule:
        return rule
    module = sys.modules.get(getattr(factory, "__module__", ""), None)
    doc = inspect.getdoc(module) or inspect.getdoc(factory) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _list_methods(console: Console) -> None:
    from rich.table import Table

    table = Table(title="attribution methods")
    table.add_column("method", no_wrap=True)
    table.add_column("model")
    table.add_column("what it does", overflow="fold")
    for name in names():
        table.add_row(name, "yes" if uses_model(name) else "no", _summary(factory(name)))
    console.print(table)


@click.command("attribute")
@click.argument("source", required=False)
@click.option("--method", "-m", default=DEFAULT_METHOD, show_default=True, help="Attribution method (see --list).")
@click.option("--model", help="Any litellm model string, e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, ollama/llama3, "
                               "local/smollm2, or openai/NAME with --api-base. Default: $FAULTLENS_MODEL.")
@click.option("--api-base", help="URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, ...), e.g. http://127.0.0.1:8080/v1.")
@click.option("--with-reference", is_flag=True, help="Show the task's reference answer to the method (the 'with ground truth' setting).")
@click.option("--budget-usd", type=float, help="Stop (status error) before spending more than this.")
@click.option("--max-calls", type=int, help="Stop (status error) before making more model calls than this.")
@click.option("--structured", type=click.Choice(["auto", "schema", "json_object", "text"]), default="auto", show_default=True,
              help="How the answer's JSON schema is sent: schema (OpenAI json_schema), json_object (llama.cpp server), text (in the prompt); auto asks litellm.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the response cache.")
@click.option("--context", "context", type=int, default=3, show_default=True, help="Steps shown around the blamed step.")
@db_option()
@click.option("--option", "-O", "method_options", multiple=True, metavar="KEY=VALUE",
              help="A method option, repeatable, e.g. -O base=heuristic -O k=5 for counterfactual.")
@click.option("--json", "as_json", is_flag=True, help="Print the attribution as JSON instead of the panel.")
@click.option("--list", "list_methods", is_flag=True, help="List the attribution methods and exit.")
def attribute(source, method, model, api_base, with_reference, budget_usd, max_calls, structured, no_cache, context, db_path,
              method_options, as_json, list_methods):
    """Say who (agent), when (step) and why (failure mode) a run failed.

    SOURCE is a stored trace id or a trace file (one JSON trace, or a JSONL
    file holding one). The attribution is stored; a trace read from a file is
    stored too, unless the attribution failed (then nothing is). Offline methods (blend, heuristic, learned, baseline:*)
    need no model or key. The default, blend, is the one with the best mean step accuracy on systems it never saw
    (leave-one-system-out, `faultlens train --loso`: 31.6% against 25.4% for the heuristic and 17.9% for random
    choice; the README has the table); it blends learned's step scores with the heuristic's signals. On your own
    system, labelled runs buy far more: label failed runs (`faultlens traces label`), train on them
    (`faultlens train --dataset bundled:dev --dataset store:PATH --out M`) and pass -O model_path=M.

    \b
    Examples:
      faultlens attribute run.json
      faultlens attribute run.json --method learned
      faultlens attribute TRACE_ID --method all_at_once --model openai/gpt-4o-mini
      faultlens attribute TRACE_ID -m binary_search --model openai/smollm2 \\
          --api-base http://127.0.0.1:8080/v1 --structured json_object
      faultlens attribute TRACE_ID -m counterfactual -O base=learned -O k=5
    """
    from faultlens.middleware.terminal.timeline import attribution_panel, print_trace

    console = Console()
    if list_methods:
        _list_methods(console)
        return
    if not source:
        raise click.UsageError("give a trace id or a trace file (or --list)")
    options: dict = {"with_reference": with_reference or None}
    if uses_model(method):
        options.update(api_base=api_base, budget_usd=budget_usd, max_calls=max_calls, cache=not no_cache, structured=structured)
    elif any(v is not None for v in (model, api_base, budget_usd, max_calls)):
        raise click.UsageError(f"--model, --api-base, --budget-usd and --max-calls apply to LLM methods, not {method}")
    attributor = build(method, model, **options, **parse_options(method_options))
    trace, from_file = _load(source, db_path)
    result = attributor.attribute(attributor_view(trace))  # never the gold label or an answer key the trace keeps
    failed = result.status.value == "error"
    # A failed attribution of a file stores nothing (neither the run nor the error: fix the file and run
    # again); of a stored run it is kept beside the run, with what the attempt cost.
    store = open_store(db_path) if not (failed and from_file) else None
    if store is not None:
        if from_file:
            store.save_trace(trace)
        store.save_attribution(result)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
    else:
        if result.step is not None:
            print_trace(trace, console, highlight=result.step, context=context)
        console.print(attribution_panel(result))
        if store is not None:
            console.print(f"[dim]stored attribution {result.id} for trace {trace.id} in {store.location}[/]")
        else:
            console.print(f"[dim]attribution failed: nothing stored from {source}[/]")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    attribute()
