"""Show a trace as a readable timeline in the terminal (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..model.trace import Attribution, Step, Trace
from ..model.text import compact, shorten

_KIND_STYLE = {
    "llm_call": "cyan",
    "tool_call": "magenta",
    "tool_result": "magenta",
    "plan": "blue",
    "final_answer": "bold green",
    "human": "yellow",
    "message": "white",
}


def step_text(step: Step, width: int = 400) -> Text:
    """The body of one step: content, tool call, result, error and media."""
    out = Text()
    if step.tool_name:
        out.append(f"{step.tool_name}", style="magenta bold")
        if step.tool_arguments is not None:
            out.append(f"({shorten(compact(step.tool_arguments), width // 2)})", style="magenta")
        out.append("\n")
    if step.content:
        out.append(shorten(step.content, width) + "\n")
    if step.tool_result is not None:
        out.append("→ " + shorten(compact(step.tool_result), width // 2) + "\n", style="dim")
    if step.error:
        out.append("✗ " + shorten(step.error, width // 2) + "\n", style="bold red")
    for media in step.media:
        out.append(f"[{media.describe()}]\n", style="italic yellow")
    if step.lessons:
        out.append(f"lessons shown: {', '.join(step.lessons)}\n", style="dim green")
    out.rstrip()
    return out


def trace_header(trace: Trace) -> Panel:
    lines = Text()
    lines.append("task: ", style="bold")
    lines.append(shorten(trace.task.query, 500) + "\n")
    if trace.task.reference_answer is not None:
        lines.append("reference answer: ", style="bold")
        lines.append(shorten(trace.task.reference_answer, 200) + "\n")
    for media in trace.task.attachments:
        lines.append(f"[{media.describe()}]\n", style="italic yellow")
    lines.append("agents: ", style="bold")
    lines.append(", ".join(a.name + (f" ({a.role})" if a.role else "") for a in trace.agents) or "-")
    lines.append("\noutcome: ", style="bold")
    if trace.outcome is None:
        lines.append("unknown", style="yellow")
    else:
        o = trace.outcome
        lines.append("success" if o.success else "failure", style="green" if o.success else "bold red")
        if o.score is not None:
            lines.append(f"  score={o.score:g}")
        if o.detail:
            lines.append(f"  {shorten(o.detail, 200)}")
    src = trace.source
    lines.append(f"\nsource: {src.format} · {src.framework} · {src.modality}" + (f" · {src.benchmark}" if src.benchmark else ""), style="dim")
    if trace.gold is not None:
        g = trace.gold
        lines.append(f"\ngold: agent={g.agent} step={g.step} mode={g.mode}" + (f" — {shorten(g.reason, 200)}" if g.reason else ""),
                     style="bold yellow")
    return Panel(lines, title=f"trace {trace.id}", expand=True)


def timeline(trace: Trace, highlight: int | None = None, window: tuple[int, int] | None = None, width: int = 400) -> Table:
    """One row per step; failed steps marked ✗, the highlighted step in reverse video."""
    table = Table(show_header=True, header_style="bold", expand=True, show_lines=False)
    table.add_column("#", justify="right", width=4)
    table.add_column("agent", overflow="fold", max_width=22)
    table.add_column("kind", max_width=12)
    table.add_column("content", ratio=1, overflow="fold")
    lo, hi = window if window else (0, len(trace.steps))
    gold_step = trace.gold.step if trace.gold else None
    for step in trace.steps[lo:hi]:
        mark = "✗" if step.failed else ""
        if step.index == highlight:
            mark = "▶"
        style = "reverse" if step.index == highlight else ("red" if step.failed else None)
        index = Text(f"{mark}{step.index}", style="bold red" if step.failed else "")
        if step.index == gold_step:
            index.append("★", style="yellow")
        table.add_row(index, step.agent, Text(step.kind.value, style=_KIND_STYLE.get(step.kind.value, "")), step_text(step, width), style=style)
    if lo > 0 or hi < len(trace.steps):
        table.caption = f"steps {lo}–{hi - 1} of {len(trace.steps)}"
    return table


def attribution_panel(attribution: Attribution) -> Panel:
    a = attribution
    body = Text()
    status_style = {"ok": "green", "unparsed": "yellow", "error": "red"}[a.status.value]
    body.append("status: ", style="bold")
    body.append(a.status.value, style=status_style)
    body.append(f"    method: {a.method}" + (f" ({a.model})" if a.model else "") + (f" via {a.backend}" if a.backend else ""))
    body.append("\nwho:  ", style="bold")
    body.append(str(a.agent))
    body.append("\nwhen: ", style="bold")
    body.append(f"step {a.step}" if a.step is not None else "-")
    body.append("\nwhy:  ", style="bold")
    body.append(f"{a.mode or '-'}" + (f" — {a.reason}" if a.reason else ""))
    if a.confidence is not None:
        body.append(f"\nconfidence: {a.confidence:.2f}")
    if a.error:
        body.append(f"\nerror: {a.error}", style="red")
    if a.ranking:
        body.append("\nother candidates: " + ", ".join(f"step {c.step} ({c.score:.2f})" for c in a.ranking[:5]), style="dim")
    c = a.cost
    body.append(f"\ncost: {c.calls} calls, {c.input_tokens}+{c.output_tokens} tokens, ${c.usd:.4f}, {c.seconds:.2f}s", style="dim")
    return Panel(body, title="attribution", border_style=status_style)


def print_trace(trace: Trace, console: Console | None = None, highlight: int | None = None, context: int | None = None) -> None:
    """Print header and timeline; with `context`, only the steps around `highlight`."""
    console = console or Console()
    window = None
    if context is not None and highlight is not None:
        window = (max(0, highlight - context), min(len(trace.steps), highlight + context + 1))
    console.print(Group(trace_header(trace), timeline(trace, highlight=highlight, window=window)))
