"""The web UI: server-rendered pages (Jinja2) over the same store, no front-end build step.

Pages: runs list (failed first), one run's trace (timeline by agent, media,
the blamed step highlighted with mode and reason, the other candidates),
lessons with their track record, and the benchmark reports directory.
"""

from __future__ import annotations

import json
import mimetypes
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from faultlens.feedback.patterns import find_patterns
from faultlens.middleware.errors import InputError
from faultlens.middleware.model.trace import Attribution, Media, Trace
from faultlens.middleware.store import Store, TraceNotFound
from faultlens.middleware.model.taxonomy import MODES, get_mode, is_mode
from .auth import TOKEN_COOKIE, token_matches
from .deps import get_services, get_store, get_worker, trace_or_404
from .report_view import report_sections
from .security import MEDIA_CSP, client_of, too_many
from .services import Services, parse_since
from .failed_runs import FailureWorker

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
# Order of the runs list: failed, then not yet judged, then succeeded.
_STATUS_RANK = {False: 0, None: 1, True: 2}  # a suspected run ranks between the failed and the unknown (runs_page)
# What /media may serve: pictures and video, never a type a browser would run
# (text/html, SVG with its scripts, ...), whatever the span claims.
_MEDIA_PREFIXES = ("image/", "video/")
_MEDIA_REFUSED = {"image/svg+xml"}
_PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac", "#e15759"]


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        # A time no datetime holds (a file import or an older store may carry one): show it, do not fail the page.
        return f"{ts!r} (not a date)"


def _mode_label(code: str | None) -> str:
    if not code:
        return ""
    return f"{code} {get_mode(code).name}" if is_mode(code) else code


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _sparkline(per_day: dict[str, int], days: int = 30) -> Markup:
    """Runs per day as a small bar chart (inline SVG), the last `days` days up to the last day seen."""
    if not per_day:
        return Markup("")
    last = datetime.strptime(max(per_day), "%Y-%m-%d")
    span = [(last - timedelta(days=d)).strftime("%Y-%m-%d") for d in range(days - 1, -1, -1)]
    counts = [int(per_day.get(day, 0)) for day in span]
    top = max(counts) or 1
    bars = "".join(f'<rect x="{i * 4}" y="{20 - 20 * c / top:.1f}" width="3" height="{20 * c / top:.1f}"><title>{day}: {c}</title></rect>'
                   for i, (day, c) in enumerate(zip(span, counts)) if c)
    return Markup(f'<svg class="sparkline" width="{days * 4}" height="20" viewBox="0 0 {days * 4} 20" role="img" '
                  f'aria-label="runs per day, last {days} days">{bars}</svg>')


templates.env.filters["when"] = _when
templates.env.filters["sparkline"] = _sparkline
templates.env.filters["mode_label"] = _mode_label
templates.env.filters["pretty"] = _pretty


def servable_media_type(mime_type: str | None) -> bool:
    kind = (mime_type or "").split(";", 1)[0].strip().lower()
    return kind.startswith(_MEDIA_PREFIXES) and kind not in _MEDIA_REFUSED


def media_src(media_root: Path | None, trace: Trace, step_index: int, position: int, media: Media) -> str | None:
    """Where the browser can load a media item from, or None if it must not (not a picture or video, a path outside media_root)."""
    if not servable_media_type(media.mime_type):
        return None
    if media.data is not None:
        return f"data:{media.mime_type};base64,{media.data}"
    if media.uri is not None:
        return media.uri if media.uri.startswith(("http://", "https://", "data:")) else None
    if media_root is None or media.path is None:
        return None
    if not _inside(Path(media.path), media_root):
        return None
    return f"/media/{quote(trace.id)}/{step_index}/{position}"


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def _latest(attributions: list[Attribution]) -> Attribution | None:
    return attributions[-1] if attributions else None


def page(request: Request, name: str, **context: Any) -> HTMLResponse:
    context.setdefault("nav", name.split(".")[0])
    return templates.TemplateResponse(request, name, context)


router = APIRouter(include_in_schema=False)


_LABELLED = {"": None, "yes": True, "no": False}


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request, status: str = "", agent: str = "", since: str = "", labelled: str = "", pattern: str = "",
              store: Store = Depends(get_store), worker: FailureWorker = Depends(get_worker)):
    if labelled not in _LABELLED:
        raise HTTPException(400, f"labelled must be yes, no or empty, not {labelled!r}")
    try:
        summaries = store.list_traces(status=status or None, agent=agent or None, since=parse_since(since),
                                      labelled=_LABELLED[labelled], limit=None if pattern else 500)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    if pattern:
        members = next((set(p.runs) for p in find_patterns(store) if p.key == pattern), set())
        summaries = [s for s in summaries if s.id in members][:500]
    summaries.sort(key=lambda s: (_STATUS_RANK[s.success] - (0.5 if s.success is None and s.suspected else 0), -s.created_at))
    jobs = {s.id: worker.status(s.id) for s in summaries}
    blames = {s.id: _latest(store.attributions(s.id)) for s in summaries if s.success is False or (s.success is None and s.suspected)}
    return page(request, "runs.html", runs=summaries, jobs=jobs, blames=blames, status=status, agent=agent, since=since,
                labelled=labelled, pattern=pattern)


@router.get("/runs/{trace_id:run_id}", response_class=HTMLResponse)
def trace_page(request: Request, trace_id: str, services: Services = Depends(get_services)):
    store, worker = services.store, services.worker
    trace = trace_or_404(store, trace_id)
    attributions = store.attributions(trace_id)
    blame = _latest(attributions)
    agents = sorted({s.agent for s in trace.steps}, key=lambda a: min(s.index for s in trace.steps if s.agent == a))
    colors = {a: _PALETTE[i % len(_PALETTE)] for i, a in enumerate(agents)}
    candidates = {c.step: c for c in (blame.ranking if blame else [])}
    media = {
        step.index: [(m, media_src(services.media_root, trace, step.index, i, m)) for i, m in enumerate(step.media)] for step in trace.steps
    }
    job = worker.status(trace_id)
    p_failed, suspected = store.detection(trace_id)
    return page(
        request,
        "trace.html",
        p_failed=p_failed,
        suspected=suspected and trace.outcome is None,
        nav="runs",
        trace=trace,
        blame=blame,
        attributions=attributions,
        agents=agents,
        colors=colors,
        candidates=candidates,
        media=media,
        job=job,
        pending=job is not None and job.state in ("waiting", "queued", "running"),
        modes=MODES,
    )


@router.post("/runs/{trace_id:run_id}/label")
async def label_run(request: Request, trace_id: str, services: Services = Depends(get_services)):
    """The trace page's label form: the decisive step, and optionally its mode and a reason."""
    trace = trace_or_404(services.store, trace_id)
    form = parse_qs((await request.body()).decode("utf-8", errors="replace"))

    def field(name: str) -> str | None:
        return (form.get(name) or [""])[0].strip() or None

    step = field("step")
    if step is None or not step.lstrip("-").isdigit():
        raise HTTPException(422, str(InputError(f"trace {trace.id}", None, "step", "choose the decisive step")))
    services.record_label(trace, int(step), mode=field("mode"), reason=field("reason"))
    return RedirectResponse(f"/runs/{quote(trace.id)}#label", status_code=303)


@router.post("/runs/{trace_id:run_id}/suspicion")
async def suspicion_form(request: Request, trace_id: str, services: Services = Depends(get_services)):
    """The run page's buttons: confirm (failed=1) or dismiss (failed=0) the detector's suspicion."""
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    choice = (form.get("failed") or [""])[0]
    if choice not in ("0", "1"):
        raise HTTPException(400, "failed must be 1 (confirm) or 0 (dismiss)")
    trace = trace_or_404(services.store, trace_id)
    services.decide_suspicion(trace.id, choice == "1")
    return RedirectResponse(f"/runs/{quote(trace.id)}", status_code=303)


@router.get("/media/{trace_id:run_id}/{step}/{position}")
def media_file(trace_id: str, step: int, position: int, services: Services = Depends(get_services)):
    root = services.media_root
    try:
        item = services.store.get_trace(trace_id).steps[step].media[position]
    except (TraceNotFound, IndexError):
        raise HTTPException(404, "no such media") from None
    if root is None or item.path is None or not _inside(Path(item.path), root) or not Path(item.path).is_file():
        raise HTTPException(404, "media is not under the server's media root")
    if not servable_media_type(item.mime_type):
        raise HTTPException(415, f"media of type {item.mime_type!r} is not served; only image and video types are")
    return FileResponse(item.path, media_type=item.mime_type, headers={"Content-Security-Policy": MEDIA_CSP, "X-Content-Type-Options": "nosniff"})


@router.get("/lessons", response_class=HTMLResponse)
def lessons_page(request: Request, agent: str = "", task: str = "", retired: str = "", services: Services = Depends(get_services)):
    if agent and task:
        lessons = services.lessons_for(agent, task, 20)
    else:
        lessons = services.store.lessons(agent=agent or None, include_retired=bool(retired))
    rows = []
    for lesson in lessons:
        shown_outcomes = lesson.helped + lesson.failed
        rows.append((lesson, f"{lesson.helped / shown_outcomes:.0%}" if shown_outcomes else "–"))
    return page(request, "lessons.html", rows=rows, agent=agent, task=task, retired=retired)


@router.get("/patterns", response_class=HTMLResponse)
def patterns_page(request: Request, since: str = "", store: Store = Depends(get_store)):
    try:
        found = find_patterns(store, since=parse_since(since))
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    return page(request, "patterns.html", patterns=found, since=since, considered=sum(p.count for p in found))


@router.get("/reports", response_class=HTMLResponse)
def reports_page(request: Request, services: Services = Depends(get_services)):
    root = services.reports_dir
    sections = report_sections(root) if root is not None and root.is_dir() else []
    return page(request, "reports.html", root=root, sections=sections)


@router.get("/reports/files/{name:path}")
def report_file(name: str, services: Services = Depends(get_services)):
    root = services.reports_dir
    if root is None:
        raise HTTPException(404, "no reports directory configured (faultlens serve --reports DIR)")
    path = root / name
    if not _inside(path, root.resolve()) or not path.is_file():
        raise HTTPException(404, f"no report file {name!r}")
    kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    # A report's HTML is shown as text: it came from a file, not from us.
    return FileResponse(path, media_type="text/plain" if kind == "text/html" else kind)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/"):
    return page(request, "login.html", next=next if next.startswith("/") and not next.startswith("//") else "/", error="")


@router.post("/login")
async def login(request: Request, services: Services = Depends(get_services)):
    form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
    given = (form.get("token") or [""])[0]
    target = (form.get("next") or ["/"])[0]
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    expected = services.token
    if expected:
        logins = request.app.state.failed_logins
        if not token_matches(expected, f"Bearer {given}"):  # the right token is never refused (security.refusal)
            wait = logins.retry_after(client_of(request))
            if wait:
                return too_many(wait)
            logins.failed(client_of(request))
            return page(request, "login.html", next=target, error="wrong token")
    response = RedirectResponse(target, status_code=303)
    if expected:
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
    return response


def add_ui(app: FastAPI) -> None:
    """Mount the static files and the pages."""
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.include_router(router)
