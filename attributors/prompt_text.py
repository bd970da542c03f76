"""Traces as prompt text: numbered steps, agents, kinds, tool calls, results and errors.

Long step texts are shortened head-and-tail with a visible marker. A trace is
fitted to a character budget derived from the model's context (litellm model
info, `CHARS_PER_TOKEN` characters per token); a trace that does not fit even
with short steps is cut into overlapping windows (`windows`). Images and video
frames become image parts for vision-capable models and text placeholders
naming the media for the others.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faultlens.middleware.model.trace import Media, Step, Trace
from faultlens.middleware.model.text import compact, shorten

# A deliberately low characters-per-token estimate (English is ~4), so the
# rendered prompt stays under the real token count without tokenizing.
CHARS_PER_TOKEN = 3.0
# Share of the context left for the prompt's instructions, taxonomy and answer.
PROMPT_SHARE = 0.6
# Per-step character limits tried in order until the trace fits.
STEP_LIMITS = (2000, 800, 300, 120)
MIN_STEP_LIMIT = STEP_LIMITS[-1]
MAX_IMAGES = 8  # image parts per message; more are named in text only


def media_placeholder(media: Media) -> str:
    what = "video frame" if media.frame_index is not None or media.kind == "video" else media.kind
    caption = f' caption="{media.caption}"' if media.caption else ""
    return f"[{what} not shown: {media.describe()}{caption}]"


def render_step(step: Step, limit: int = STEP_LIMITS[0], vision: bool = False) -> str:
    """One step as prompt text, `limit` characters per field at most."""
    lines = [f"[step {step.index}] agent={step.agent} kind={step.kind.value}"]
    if step.tool_name:
        args = "" if step.tool_arguments is None else shorten(compact(step.tool_arguments), limit // 2)
        lines.append(f"  tool call: {step.tool_name}({args})")
    if step.content:
        lines.append("  " + shorten(step.content, limit).replace("\n", "\n  "))
    if step.tool_result is not None:
        lines.append("  tool result: " + shorten(compact(step.tool_result), limit // 2).replace("\n", "\n  "))
    if step.error:
        lines.append("  ERROR: " + shorten(step.error, limit // 2))
    for index, media in enumerate(step.media):
        lines.append(f"  [image {step.index}.{index}: {media.describe()}]" if vision and media.kind in ("image", "video") else "  " + media_placeholder(media))
    return "\n".join(lines)


def render_steps(steps: Sequence[Step], limit: int, vision: bool = False) -> str:
    return "\n".join(render_step(s, limit, vision) for s in steps)


def char_budget(context_tokens: int, reserve_tokens: int = 0) -> int:
    """Characters of trace text that fit a model with `context_tokens` of input."""
    return max(2000, int((context_tokens * PROMPT_SHARE - reserve_tokens) * CHARS_PER_TOKEN))


def fit_steps(steps: Sequence[Step], budget_chars: int, vision: bool = False) -> tuple[str, int] | None:
    """Render `steps` with the longest per-step limit that fits, or None if none does."""
    for limit in STEP_LIMITS:
        text = render_steps(steps, limit, vision)
        if len(text) <= budget_chars:
            return text, limit
    return None


def render_prefix(steps: Sequence[Step], budget_chars: int, focus: int | None = None, vision: bool = False) -> str:
    """Render steps so they fit, dropping the earliest ones (with a marker) if they must.

    Used where the question is about the last steps shown (step-by-step,
    binary search): the steps at and after `focus` are kept whole, earlier ones
    are shortened first and then omitted.
    """
    fitted = fit_steps(steps, budget_chars, vision)
    if fitted is not None:
        return fitted[0]
    steps = list(steps)
    focus = steps[-1].index if focus is None else focus
    kept: list[str] = []
    used = 0
    # Walk backwards so the steps nearest the question survive.
    for step in reversed(steps):
        limit = STEP_LIMITS[1] if step.index >= focus else MIN_STEP_LIMIT
        text = render_step(step, limit, vision)
        if used + len(text) > budget_chars and kept:
            omitted = step.index + 1
            return f"[steps {steps[0].index}-{step.index} omitted to fit the context; {omitted} step(s) not shown]\n" + "\n".join(reversed(kept))
        kept.append(text)
        used += len(text) + 1
    return "\n".join(reversed(kept))


def windows(n_steps: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """Overlapping [lo, hi) windows covering 0..n_steps-1; every step is in at least one."""
    if n_steps <= 0:
        return []
    size = max(1, size)
    overlap = min(max(0, overlap), size - 1)
    out, lo = [], 0
    while True:
        hi = min(n_steps, lo + size)
        out.append((lo, hi))
        if hi >= n_steps:
            return out
        lo = hi - overlap


MIN_WINDOW_STEPS = 4


def window_plan(steps: Sequence[Step], budget_chars: int, vision: bool = False) -> tuple[int, int]:
    """(steps per window, per-step character limit): the longest step limit whose
    windows still hold MIN_WINDOW_STEPS steps, else the shortest limit."""
    for limit in STEP_LIMITS:
        size = window_size(steps, budget_chars, vision, limit)
        if size >= min(MIN_WINDOW_STEPS, len(steps)):
            return size, limit
    return window_size(steps, budget_chars, vision, MIN_STEP_LIMIT), MIN_STEP_LIMIT


def window_size(steps: Sequence[Step], budget_chars: int, vision: bool = False, limit: int = MIN_STEP_LIMIT) -> int:
    """How many consecutive steps fit the budget at per-step limit `limit` (at least 1)."""
    lengths = [len(render_step(s, limit, vision)) + 1 for s in steps]
    prefix = [0]
    for n in lengths:
        prefix.append(prefix[-1] + n)

    def fits(size: int) -> bool:
        # A window must fit wherever it starts: size it by the densest stretch.
        return max(prefix[i + size] - prefix[i] for i in range(len(lengths) - size + 1)) <= budget_chars

    lo, hi = 1, len(lengths)
    while lo < hi:  # the largest size that fits; fits() is monotone in size
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _image_url(media: Media) -> str:
    if media.uri:
        return media.uri
    if media.data:
        return f"data:{media.mime_type};base64,{media.data}"
    path = Path(media.path or "")
    mime = media.mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def image_parts(trace: Trace, steps: Sequence[Step]) -> tuple[list[dict[str, Any]], list[str]]:
    """Image parts for the task attachments and the steps' media, and notes on what was left out."""
    parts: list[dict[str, Any]] = []
    notes: list[str] = []
    labelled: list[tuple[str, Media]] = [(f"task attachment {i}", m) for i, m in enumerate(trace.task.attachments)]
    labelled += [(f"image {s.index}.{i} (step {s.index})", m) for s in steps for i, m in enumerate(s.media)]
    for label, media in labelled:
        if media.kind not in ("image", "video") or media.mime_type.startswith("video/"):
            notes.append(f"{label}: {media.describe()} is not an image; named only")
            continue
        if len(parts) // 2 >= MAX_IMAGES:
            notes.append(f"{label}: {media.describe()} not sent (limit {MAX_IMAGES} images)")
            continue
        try:
            url = _image_url(media)
        except OSError as exc:
            notes.append(f"{label}: {media.describe()} unreadable ({exc.strerror})")
            continue
        parts.append({"type": "text", "text": f"{label}:"})
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts, notes


def user_content(text: str, trace: Trace, steps: Sequence[Step], vision: bool) -> str | list[dict[str, Any]]:
    """The user message content: plain text, or text plus image parts for a vision model."""
    if not vision:
        return text
    parts, notes = image_parts(trace, steps)
    if not parts:
        return text
    if notes:
        text += "\n\nMedia not sent as images:\n" + "\n".join(notes)
    return [{"type": "text", "text": text}, *parts]


def task_text(trace: Trace, with_reference: bool, vision: bool = False) -> str:
    """The task block of a prompt: query, options, attachments, and the reference answer if asked."""
    task = trace.task
    lines = ["TASK:", shorten(task.query, 4000)]
    if task.options:
        lines.append("Options: " + "; ".join(task.options))
    for i, media in enumerate(task.attachments):
        lines.append(f"[task attachment {i}: {media.describe()}]" if vision else media_placeholder(media))
    if with_reference:
        if task.reference_answer is not None:
            lines.append(f"REFERENCE ANSWER (the correct final answer): {shorten(task.reference_answer, 1000)}")
        else:
            lines.append("REFERENCE ANSWER: not available for this task.")
        if trace.outcome is not None and trace.outcome.detail:
            lines.append(f"Evaluator's note on the outcome: {shorten(trace.outcome.detail, 500)}")
    lines.append("OUTCOME: the run FAILED.")
    agents = [a for a in trace.agents]
    if agents:
        lines.append("AGENTS: " + "; ".join(a.name + (f" ({a.role})" if a.role else "") + (f": {a.description}" if a.description else "") for a in agents))
    return "\n".join(lines)
