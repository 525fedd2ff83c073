"""The pages and event streams of ``tx ui``: plain route handlers over one :class:`UI` (the
backend the pages ask tx through, the templates, the cancel form's CSRF token), which each
handler takes as its first argument, and :data:`ROUTES`, the table :func:`tx_ui.server.create_app`
serves (see :mod:`tx_ui.server` for what each page shows).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import jinja2
import yaml
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from tx.runner import (
    ACTIVE_STATES, RunRef, SweepRef, format_age, format_duration, newest_first, parse_handle, status_text,
    submitted, why)
from tx.specs import AppState, appdef_to_yaml, format_value, is_terminal, parse_app_handle
from tx_ui._backend import PAGE_SIZE, Backend, NoAnswer, describe_problem, record
from tx_ui._logs import log_events
from tx_ui._sweeps import plot_points, plot_svg, trial_metrics
from tx_ui._tracking import run_record, runs, tracker_names

__all__ = ["REFRESH_S", "ROUTES", "UI", "Handler", "timeline"]

#: seconds between two updates of a live page
REFRESH_S = 2.0


class UI:
    """What every handler needs, made once per app by :func:`tx_ui.server.create_app`.

    Args:
        backend: what the pages ask tx through.
        csrf: the cancel form's CSRF token (hex).
    """

    def __init__(self, backend: Backend, csrf: str) -> None:
        self.backend = backend
        self.csrf = csrf
        self.states = list(AppState.__members__)
        self.env = jinja2.Environment(loader=jinja2.PackageLoader("tx_ui", "templates"),
                                      autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True,
                                      lstrip_blocks=True)

    def render(self, name: str, **context: Any) -> str:
        """The template ``name`` rendered with ``context``."""
        return self.env.get_template(name).render(**context)

    def page(self, name: str, **context: Any) -> HTMLResponse:
        """A whole page: the template ``name`` with the schedulers and states its filters list."""
        return HTMLResponse(self.render(name, schedulers=self.backend.schedulers, states=self.states, **context))


def _row(app: Any, now: float) -> Dict[str, Any]:
    """What the apps table shows of one listed app."""
    t0 = submitted(app)
    ended = getattr(app, "ended", None)
    ended = float(ended) if isinstance(ended, (int, float)) else None
    if t0 is None:
        duration = None
    elif ended is not None:
        duration = ended - t0
    else:
        duration = None if is_terminal(app.state) else now - t0
    try:
        scheduler = parse_app_handle(app.app_handle).scheduler_backend
    except Exception:  # noqa: BLE001 - a handle a scheduler set oddly still shows
        scheduler = ""
    # a sweep's row (tx.runner.collapse_sweeps): its handle has a sweep's form
    try:
        sweep = isinstance(parse_handle(app.app_handle), SweepRef)
    except Exception:  # noqa: BLE001 - a handle a scheduler set oddly is an app's row
        sweep = False
    return {"handle": app.app_handle, "state": app.state.name, "name": app.name or app.app_id,
            "page": "/sweep" if sweep else "/app",
            "app_id": app.app_id, "scheduler": scheduler,
            "age": format_age(None if t0 is None else now - t0),
            "duration": format_duration(duration),
            "submitted": "" if t0 is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))}


def _filter(apps: List[Any], state: str, q: str) -> List[Any]:
    if state:
        wanted = ACTIVE_STATES if state.lower() == "active" else {state.upper()}
        apps = [a for a in apps if a.state.name in wanted]
    if q:
        needle = q.lower()
        apps = [a for a in apps if needle in (a.name or "").lower() or needle in a.app_handle.lower()]
    return apps


def _as_yaml(data: Dict[str, Any]) -> str:
    """``data`` as YAML; what YAML cannot represent (a scheduler's own objects) as text."""
    try:
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    except yaml.YAMLError:
        return yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False, default_flow_style=False)


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def timeline(metadata: Dict[str, Any], now: Optional[float] = None) -> List[Dict[str, Any]]:
    """Each replica's attempts as bars on one time axis, from a scheduler's ``attempts``
    metadata (``{"role/k": [{"n", "start", "end", "exit_code"}]}``, epoch seconds; the local
    schedulers keep it); ``[]`` where the scheduler keeps none. Each row is ``{"replica",
    "bars": [{"left", "width" (percent of the axis), "kind" (ok, failed, running), "label"}]}``."""
    attempts = metadata.get("attempts")
    if not isinstance(attempts, dict):
        return []
    now = time.time() if now is None else now
    spans = [(replica, a) for replica, tries in attempts.items() if isinstance(tries, list)
             for a in tries if isinstance(a, dict) and isinstance(a.get("start"), (int, float))]
    if not spans:
        return []
    t0 = min(a["start"] for _, a in spans)
    t1 = max(a["end"] if isinstance(a.get("end"), (int, float)) else now for _, a in spans)
    axis = max(t1 - t0, 1e-3)
    rows: Dict[str, List[Dict[str, Any]]] = {}
    for replica, a in spans:
        end = a["end"] if isinstance(a.get("end"), (int, float)) else None
        code = a.get("exit_code")
        kind = "running" if end is None else ("ok" if code == 0 else "failed")
        label = (f"attempt {a.get('n', 0)}: {_clock(a['start'])} - {_clock(end) if end else 'running'}"
                 + ("" if code is None else f", exit code {code}"))
        rows.setdefault(replica, []).append({
            "left": round(100 * (a["start"] - t0) / axis, 2),
            "width": round(max(100 * ((end or now) - a["start"]) / axis, 0.5), 2), "kind": kind, "label": label})
    return [{"replica": r, "bars": bars} for r, bars in rows.items()]


def _page_number(text: str) -> int:
    """The 1-based page number of ``?page=`` (1 when absent).

    Raises:
        ValueError: not a whole number >= 1.
    """
    n = int(text) if text.strip().isdigit() else 0
    if n < 1:
        raise ValueError(f"page must be a whole number >= 1, got {text!r}")
    return n


def _link(filters: Dict[str, str], page: int) -> str:
    return "/?" + urlencode({**{k: v for k, v in filters.items() if v}, "page": page})


async def apps_view(ui: UI, request: Request) -> Dict[str, Any]:
    """What the apps table shows for the request's filters (``scheduler``, ``state``, ``q``
    or ``name``: part of the name or handle) and page (``page``, 1-based, :data:`PAGE_SIZE`
    apps each), filtered and paged on the server: where no sweep or run needs the whole list,
    each scheduler is asked for its first ``page * PAGE_SIZE`` matching apps only.

    Raises:
        ValueError: ``page`` is not a whole number >= 1.
    """
    p = request.query_params
    scheduler, state, q = p.get("scheduler", ""), p.get("state", ""), p.get("q", "") or p.get("name", "")
    page = _page_number(p.get("page", "1"))
    wanted = [scheduler] if scheduler else None
    states = None if not state else (ACTIVE_STATES if state.lower() == "active" else {state.upper()})
    paged = await ui.backend.page(wanted, states, q, page * PAGE_SIZE)
    if paged is not None:
        apps, total = paged
        problems: List[str] = []
    else:
        everything, problems = await ui.backend.apps(wanted)
        apps, _ordered = newest_first(_filter(everything, state, q))
        total = len(apps)
    first = (page - 1) * PAGE_SIZE
    apps = apps[first:first + PAGE_SIZE]
    now = time.time()
    filters = {"scheduler": scheduler, "state": state, "q": q}
    label = f"{first + 1}-{first + len(apps)} of {total} apps" if apps else f"0 of {total} apps"
    return {"rows": [_row(a, now) for a in apps], "problems": problems, "total": total, "label": label,
            "filters": filters, "page": page,
            "newer": _link(filters, page - 1) if page > 1 else "",
            "older": _link(filters, page + 1) if first + len(apps) < total else ""}


async def apps_page(ui: UI, request: Request) -> Response:
    """``/``: the apps of every scheduler, newest first, filtered, a page at a time."""
    try:
        view = await apps_view(ui, request)
    except ValueError as e:
        return PlainTextResponse(f"tx ui: {e}\n", status_code=400)
    # rendering a thousand rows takes tens of ms: off the event loop, which serves the streams
    body = await asyncio.to_thread(ui.render, "apps.html", schedulers=ui.backend.schedulers, states=ui.states, **view,
                                   events_url="/events/apps?" + request.url.query)
    return HTMLResponse(body)


async def apps_events(ui: UI, request: Request) -> Response:
    """``/events/apps``: the apps table again every :data:`REFRESH_S` seconds, when it changed."""
    async def events() -> AsyncIterator[Dict[str, Any]]:
        last = ""
        while True:
            # the page was rendered just now: the first update comes one period later
            await asyncio.sleep(REFRESH_S)
            try:
                view = await apps_view(ui, request)
            except ValueError:  # a bad page number: its page said so, nothing to update
                return
            data = await asyncio.to_thread(lambda: json.dumps({
                "rows": ui.render("_rows.html", rows=view["rows"]),
                "problems": ui.render("_problems.html", problems=view["problems"]),
                "count": len(view["rows"]), "total": view["total"], "label": view["label"]}))
            if data != last:  # nothing changed (ages included): nothing sent
                last = data
                yield {"event": "apps", "data": data}

    return EventSourceResponse(events(), ping=15)


async def app_view(ui: UI, handle: str) -> Dict[str, Any]:
    """Status and AppDef of one app; ``problem`` is one line where they cannot be read."""
    view: Dict[str, Any] = {"handle": handle, "problem": "", "status": None, "appdef": None}
    try:
        ref = parse_handle(handle)  # the kind follows from the syntax: no record is read to learn it
    except Exception as e:  # noqa: BLE001 - a malformed handle is one line on the page
        view["problem"] = describe_problem(e)
        return view
    if isinstance(ref, SweepRef):  # never looked up as an app of that id
        view["problem"] = f"{handle} is a sweep: its page is /sweep?handle={quote(handle, safe='')}"
        return view
    try:
        status = await ui.backend.call(("status", handle), lambda r, h: r.status(h), handle)
    except Exception as e:  # noqa: BLE001 - the backend's failure is one line on the page
        view["problem"] = describe_problem(e)
        return view
    if status is None:
        view["problem"] = f"no app {handle}: its scheduler does not know it"
        return view
    if isinstance(ref, RunRef):  # a run with failover: its own hops only
        try:
            run = await ui.backend.call(("run", handle), lambda r, h: r.run_status(h), handle)
            view["run"] = {"chain": run.chain, "hops": [
                {"handle": h.handle(parse_app_handle(handle).session_name) or "", "scheduler": h.scheduler,
                 "state": h.state, "why": h.why} for h in run.hops]}
        except Exception as e:  # noqa: BLE001 - the status above still shows
            view["problem"] = f"cannot read the run's hops: {describe_problem(e)}"
    view["status"] = status
    view["why"] = why(status)
    # `tx status`'s text (its Duration line aside: the page shows age and duration itself)
    view["status_text"] = status_text(status)
    view["terminal"] = is_terminal(status.state)
    return view


async def app_page(ui: UI, request: Request) -> Response:
    """``/app?handle=H``: an app's state, replicas, why it waits or failed, run options, AppDef, logs."""
    handle = request.query_params.get("handle", "")
    view = await app_view(ui, handle)
    appdef_yaml, replicas, problem = "", [], view["problem"]
    if view["status"] is not None:
        try:
            appdef = await ui.backend.call(("describe", handle), lambda r, h: r.describe(h), handle)
            if appdef is not None:
                appdef_yaml = appdef_to_yaml(appdef)
                replicas = [(role.name, k) for role in appdef.roles for k in range(role.num_replicas)]
        except Exception as e:  # noqa: BLE001 - the rest of the page still shows
            problem = f"cannot read its AppDef: {describe_problem(e)}"
        if not replicas:
            replicas = [(rs.role, r.id) for rs in view["status"].roles for r in rs.replicas]
    code = 404 if view["status"] is None else 200
    if view["status"] is not None:
        try:
            described = await ui.backend.call(("record", handle), lambda _r, h: record(ui.backend, h), handle)
            metadata = dict(described.metadata) if described is not None else {}
        except Exception:  # noqa: BLE001 - the status above already says what is wrong
            metadata = {}
        view["timeline"] = timeline(metadata)
        # the run options it was submitted with, where the scheduler keeps them (every one that keeps the AppDef; None for apps submitted before)
        options = metadata.get("run_options")
        view["run_options_yaml"] = _as_yaml(options) if isinstance(options, dict) else ""
        rest = {k: v for k, v in metadata.items() if k not in ("attempts", "run_options")}
        view["record_yaml"] = _as_yaml(rest) if rest else ""
    view["problem"] = problem
    response = ui.page("app.html", **view, appdef_yaml=appdef_yaml, replicas=replicas,
                       csrf=ui.csrf, message=request.query_params.get("msg", ""),
                       events_url=f"/events/app?handle={quote(handle, safe='')}",
                       handle_q=quote(handle, safe=""))
    response.status_code = code
    return response


async def app_events(ui: UI, request: Request) -> Response:
    """``/events/app?handle=H``: the app's status until it ends."""
    handle = request.query_params.get("handle", "")

    async def events() -> AsyncIterator[Dict[str, Any]]:
        while True:
            view = await app_view(ui, handle)
            yield {"event": "status", "data": json.dumps({
                "html": ui.render("_status.html", **view), "terminal": bool(view.get("terminal")),
                "state": view["status"].state.name if view["status"] is not None else ""})}
            if view.get("terminal") or view["status"] is None and not view["problem"].startswith("no answer"):
                yield {"event": "end", "data": "{}"}
                return
            await asyncio.sleep(REFRESH_S)

    return EventSourceResponse(events(), ping=15)


async def sweep_view(ui: UI, handle: str) -> Dict[str, Any]:
    """A sweep's trial table (``tx status SWEEP``); ``problem`` is one line where it cannot
    be read."""
    view: Dict[str, Any] = {"handle": handle, "problem": "", "sweep": None}
    try:
        if not isinstance(parse_handle(handle), SweepRef):  # never read as a sweep of another kind's id
            raise ValueError(f"{handle} is not a sweep's handle (see /app?handle={quote(handle, safe='')})")
        status = await ui.backend.call(("sweep", handle), lambda r, h: r.sweep_status(h), handle)
    except Exception as e:  # noqa: BLE001 - an unknown sweep or the backend's failure is one line
        view["problem"] = describe_problem(e)
        return view
    view.update(sweep=status, state=status.state.name, terminal=is_terminal(status.state),
                counts=", ".join(f"{n} {s.lower()}" for s, n in status.counts().items()),
                rows=[{"index": t.index, "state": t.state.name, "attempts": t.attempts, "why": t.why,
                       "params": " ".join(f"{k}={format_value(v)}" for k, v in t.params.items()),
                       "duration": format_duration(t.duration), "app_handle": t.app_handle or ""}
                      for t in status.trials])
    return view


async def sweep_plot(ui: UI, view: Dict[str, Any], metric: str, param: str) -> Dict[str, Any]:
    """The plot of ``metric`` (default: the first recorded) against ``param`` (default: the
    first parameter), the choices, and the plotted values; ``problem`` says why there is
    no plot."""
    trials = view["sweep"].trials
    params = list(trials[0].params) if trials else []
    plot: Dict[str, Any] = {"metrics": [], "params": params, "metric": "", "param": "", "svg": "",
                            "points": [], "problem": ""}
    try:
        got = await ui.backend.call(("metrics", view["handle"]), trial_metrics, view["handle"])
    except Exception as e:  # noqa: BLE001 - the tracker's failure is one line; the table still shows
        plot["problem"] = f"cannot read the trials' metrics: {describe_problem(e)}"
        return plot
    names = sorted({m for recorded in got["metrics"].values() for m in recorded})
    plot["metrics"] = names
    if not got["tracker"]:
        plot["problem"] = ("no tracker is configured, so no metric to plot: the trials record their metrics "
                           "in the first tracker of [tx:tracker] in .txconfig, or of TX_TRACKERS (docs/sweeps.md)")
        return plot
    if not names:
        plot["problem"] = (f"no trial has recorded a metric in tracker {got['tracker']} yet "
                           "(tx.tracker.app_run_from_env().add_metadata(loss=...) in the trial)")
        return plot
    plot["metric"] = metric if metric in names else names[0]
    plot["param"] = param if param in params else (params[0] if params else "")
    points = plot_points(trials, got["metrics"], plot["param"], plot["metric"])
    plot["points"] = [{"index": i, "x": format_value(x), "y": f"{y:g}"} for i, x, y in points]
    if points:
        plot["svg"] = await asyncio.to_thread(plot_svg, points, plot["param"], plot["metric"])
    return plot


async def sweep_page(ui: UI, request: Request) -> Response:
    """``/sweep?handle=H&metric=M&param=P``: a sweep's trials and the plot of M against P."""
    p = request.query_params
    handle = p.get("handle", "")
    view = await sweep_view(ui, handle)
    plot = await sweep_plot(ui, view, p.get("metric", ""), p.get("param", "")) if view["sweep"] else None
    q = {"handle": handle, "metric": p.get("metric", ""), "param": p.get("param", ""),
         "plot": _digest(ui.render("_plot.html", plot=plot, handle=handle))}  # the plot this page shows
    response = ui.page("sweep.html", **view, plot=plot, csrf=ui.csrf, message=p.get("msg", ""),
                       events_url="/events/sweep?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in q.items()))
    response.status_code = 404 if view["sweep"] is None else 200
    return response


def _digest(html: str) -> str:
    """A short digest of a rendered fragment (which one a page shows)."""
    return hashlib.sha256(html.encode("utf-8")).hexdigest()[:16]


async def sweep_events(ui: UI, request: Request) -> Response:
    """``/events/sweep?handle=H&plot=D``: the trials until the sweep ends, and the plot
    whenever it differs from the one the page shows (``D``: its digest, then the last one
    sent): the plot's metric and parameter choices are replaced only by a new plot, never
    under a person choosing one."""
    p = request.query_params
    handle = p.get("handle", "")

    async def events() -> AsyncIterator[Dict[str, Any]]:
        last, states, plotted, shown = "", None, 0.0, p.get("plot", "")
        while True:
            await asyncio.sleep(REFRESH_S)  # the page was rendered just now
            view = await sweep_view(ui, handle)
            data: Dict[str, Any] = {"html": ui.render("_sweep.html", **view), "terminal": bool(view.get("terminal"))}
            now_states = [r["state"] for r in view.get("rows", [])]
            # the metrics are read again when a trial changed state (it may have recorded
            # its result), else at most every 15 s
            if view["sweep"] is not None and (now_states != states or time.monotonic() - plotted > 15):
                states, plotted = now_states, time.monotonic()
                plot = await sweep_plot(ui, view, p.get("metric", ""), p.get("param", ""))
                html = ui.render("_plot.html", plot=plot, handle=handle)
                if _digest(html) != shown:
                    shown, data["plot"] = _digest(html), html
            text = json.dumps(data)
            if text != last:
                last = text
                yield {"event": "sweep", "data": text}
            if view.get("terminal") or view["sweep"] is None and not view["problem"].startswith("no answer"):
                yield {"event": "end", "data": "{}"}
                return

    return EventSourceResponse(events(), ping=15)


async def log_stream(ui: UI, request: Request) -> Response:
    """``/events/log?handle=H&role=R&replica=K``: a replica's log (followed unless ``follow=0``)."""
    p = request.query_params
    handle, role = p.get("handle", ""), p.get("role", "")
    try:
        parse_handle(handle)
        replica = int(p.get("replica", "0"))
        skip = int(request.headers.get("last-event-id") or p.get("from") or 0)
    except Exception as e:  # noqa: BLE001 - bad parameters are one line
        return PlainTextResponse(f"tx ui: bad log request: {describe_problem(e)}\n", status_code=400)
    streams = p.get("streams") or None
    if streams not in (None, "stdout", "stderr", "combined"):
        return PlainTextResponse(f"tx ui: unknown stream {streams!r}\n", status_code=400)
    return EventSourceResponse(log_events(handle, role, replica, follow=p.get("follow", "1") == "1",
                                          streams=streams, skip=skip), ping=15)


async def cancel(ui: UI, request: Request) -> Response:
    """``POST /cancel``: cancel an app, or every trial of a sweep (same site, CSRF token checked)."""
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        host = request.headers.get("host", "")
        if urlsplit(origin).netloc != host:
            return PlainTextResponse("tx ui: cancel refused: the request came from another site\n",
                                     status_code=403)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    given = (form.get("csrf") or [""])[0]
    handle = (form.get("handle") or [""])[0]
    if not hmac.compare_digest(given.encode(), ui.csrf.encode()):
        return PlainTextResponse("tx ui: cancel refused: the form's CSRF token is missing or wrong\n",
                                 status_code=403)
    try:
        sweep = isinstance(parse_handle(handle), SweepRef)  # by the handle's syntax
    except Exception:  # noqa: BLE001 - the cancel below says it is malformed
        sweep = False
    try:
        parse_handle(handle)
        if sweep:
            await ui.backend.call(("cancel", handle), lambda r, h: r.cancel_sweep(h), handle)
            msg = f"asked every trial of {handle} to cancel"
        else:
            await ui.backend.call(("cancel", handle), lambda r, h: r.cancel(h), handle)
            msg = f"asked {handle} to cancel"
    except NoAnswer as e:
        msg = f"cancel of {handle} sent; its scheduler gave {e}"
    except Exception as e:  # noqa: BLE001 - the failure is one line on the page
        msg = f"cannot cancel {handle}: {describe_problem(e)}"
    where = "/sweep" if sweep else "/app"
    return RedirectResponse(f"{where}?handle={quote(handle, safe='')}&msg={quote(msg, safe='')}",
                            status_code=303)


async def tracking_page(ui: UI, request: Request) -> Response:
    """``/tracking``: the runs of a tracker."""
    name = request.query_params.get("tracker") or None
    context: Dict[str, Any] = {"tracker": name or "", "trackers": [], "run_ids": None, "problem": ""}
    try:
        context["trackers"] = await ui.backend.call(("trackers",), lambda _r: tracker_names())
        got = await ui.backend.call(("runs", name), runs, name)
        context.update(tracker=got["tracker"], run_ids=got["runs"])
    except Exception as e:  # noqa: BLE001 - the tracker's failure is one line on the page
        context["problem"] = describe_problem(e)
    return ui.page("tracking.html", **context)


async def tracking_run_page(ui: UI, request: Request) -> Response:
    """``/tracking/run?run=ID``: one tracked run, its lineage and metadata."""
    name = request.query_params.get("tracker") or None
    run_id = request.query_params.get("run", "")
    context: Dict[str, Any] = {"tracker": name or "", "run_id": run_id, "lineage": None, "metadata": {},
                               "problem": ""}
    try:
        got = await ui.backend.call(("run", name, run_id), run_record, name, run_id)
        context.update(tracker=got["tracker"], lineage=got["lineage"], metadata=got["metadata"])
    except Exception as e:  # noqa: BLE001 - the tracker's failure is one line on the page
        context["problem"] = describe_problem(e)
    return ui.page("tracking_run.html", **context)


async def health(ui: UI, request: Request) -> Response:
    """``/health``: ``ok``."""
    return PlainTextResponse("ok\n")


#: a route handler: ``handler(ui, request)``
Handler = Callable[[UI, Request], Awaitable[Response]]

#: the routes of ``tx ui``: ``(path, handler, methods)``
ROUTES: List[Tuple[str, Handler, Tuple[str, ...]]] = [
    ("/", apps_page, ("GET",)),
    ("/app", app_page, ("GET",)),
    ("/sweep", sweep_page, ("GET",)),
    ("/cancel", cancel, ("POST",)),
    ("/events/apps", apps_events, ("GET",)),
    ("/events/app", app_events, ("GET",)),
    ("/events/sweep", sweep_events, ("GET",)),
    ("/events/log", log_stream, ("GET",)),
    ("/tracking", tracking_page, ("GET",)),
    ("/tracking/run", tracking_run_page, ("GET",)),
    ("/health", health, ("GET",)),
]
