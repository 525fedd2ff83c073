"""What tx shows of apps, the same in the ``tx`` CLI and in ``tx ui``: the text of ``tx
status``, the one line of why an app waits or failed, the apps newest first, tables and
colored state names (durations and ages: :mod:`tx.durations`).

Both ``tx.cli`` (``tx status``, ``tx list``) and the ``tx ui`` plugin import it, so that the
two never drift apart. It stands on the runner's floor (docs/architecture.md) and imports
only the model and the standard library.
"""
from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

from tx.durations import format_age, format_duration
from tx.specs.api import NONE, AppState
from tx.specs.status import AppStatus, _render_error

__all__ = ["ACTIVE_STATES", "STATE_COLORS", "color_state", "newest_first", "run_summary", "status_text", "submitted",
           "table", "why"]

#: the state names ``active`` stands for (``tx list --state active``, the UI's filter): not finished
ACTIVE_STATES = frozenset({"UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING"})

#: ANSI colors of the app states on a terminal
STATE_COLORS = {"SUCCEEDED": "32", "FAILED": "31", "CANCELLED": "33", "RUNNING": "36",
                "PENDING": "35", "SUBMITTED": "35", "UNSUBMITTED": "35", "UNKNOWN": "2"}


def color_state(name: str, color: bool) -> str:
    """``name`` (an app state's name) in its color from :data:`STATE_COLORS` when ``color``."""
    code = STATE_COLORS.get(name)
    return f"\x1b[{code}m{name}\x1b[0m" if color and code else name


def table(headers: Any, rows: Any, paint: Any = None) -> str:
    """Columns padded to their widest cell, two spaces apart, headers underlined with
    dashes (the look of ``tabulate``'s "simple" format, without its cost on thousands of rows).
    ``paint(column, text)``, where given, wraps a body cell's text (colors) after padding."""
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(str(c))) for w, c in zip(widths, r)]

    def line(cells: Any, body: bool = False) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            text = str(c)
            out.append(paint(i, text) + " " * (w - len(text)) if body and paint else text.ljust(w))
        return "  ".join(out).rstrip() + "\n"

    return line(headers) + line("-" * w for w in widths) + "".join(line(r, True) for r in rows)


def submitted(app: Any) -> Optional[float]:
    """When a listed app was submitted (epoch seconds), where its scheduler says; else None."""
    t = getattr(app, "submitted", None)
    return float(t) if isinstance(t, (int, float)) else None


def newest_first(apps: Any) -> Tuple[List[Any], bool]:
    """``(apps, ordered)``: apps newest first by submit time where the scheduler gives one,
    else by numeric id (Slurm, batch systems); else in the scheduler's order, with
    ``ordered`` False."""
    apps = list(apps)
    if any(submitted(a) is not None for a in apps):
        return sorted(apps, key=lambda a: submitted(a) or 0.0, reverse=True), True
    if apps and all(str(a.app_id).isdigit() for a in apps):
        return sorted(apps, key=lambda a: int(a.app_id), reverse=True), True
    return apps, False


def _filled(text: Any) -> str:
    """``text`` unless it is a placeholder (``<NONE>``, None, blank)."""
    s = "" if text is None else str(text)
    return "" if s.strip() in ("", "<NONE>", "None") else s


def _field(label: str, text: str) -> str:
    """``  Label: first line`` with the other lines indented under the first."""
    lines = text.rstrip("\n").splitlines() or [""]
    pad = " " * (len(label) + 4)
    return f"  {label}: {lines[0]}\n" + "".join(f"{pad}{ln}\n" if ln.strip() else "\n" for ln in lines[1:])


def _duration_line(started: Optional[float], ended: Optional[float], now: float) -> str:
    if started is None:
        return ""
    if ended is None:
        return f"running for {format_duration(now - started)}"
    return f"{format_duration(ended - started)} (ended {format_age(now - ended)} ago)"


def status_text(status: AppStatus, roles: Optional[List[str]] = None, started: Optional[float] = None,
                ended: Optional[float] = None, color: bool = False, now: Optional[float] = None) -> str:
    """The text of ``tx status`` (and of the status on ``tx ui``'s page of an app): TorchX's
    labels, no placeholders, indented messages, colored states.

    Args:
        status: the app's status.
        roles: only these roles' replicas (None: all).
        started: when the app started (epoch seconds); with it, a ``Duration:`` line.
        ended: when it ended (epoch seconds; None: still running).
        color: the state names in their ANSI colors (:data:`STATE_COLORS`).
        now: the time the duration runs to (epoch seconds; default: now).
    """
    out = "AppStatus:\n" + f"  State: {color_state(status.state.name, color)}\n"
    if status.num_restarts >= 0:
        out += f"  Num Restarts: {status.num_restarts}\n"
    duration = _duration_line(started, ended, time.time() if now is None else now)
    if duration:
        out += f"  Duration: {duration}\n"
    out += "  Roles:\n"
    for rs in status.roles:
        if roles and rs.role not in roles:
            continue
        for r in sorted(rs.replicas, key=lambda x: x.id):
            out += status._format_replica(r, lambda name: color_state(name, color)) + "\n"
    msg = _filled(status.msg)
    if msg:
        out += _field("Msg", msg)
    err = _filled(status.structured_error_msg)
    if err:
        out += _field("Structured Error Msg", _render_error(err))
    if status.ui_url:
        out += f"  UI URL: {status.ui_url}\n"
    return out + status._attempts_block()


def why(status: AppStatus) -> str:
    """Why the app waits or failed, in one line, as ``tx status`` says it: the root cause of
    the failed replica that is the app's cause (the first that failed, unless it only lost
    a peer: :func:`tx.schedulers.why.first_cause`), else the scheduler's error (at most 500
    characters), else its message; "" when there is nothing to say."""
    if status.root_cause is not None:
        return status.root_cause.text
    if status.state == AppState.FAILED and status.structured_error_msg not in ("", "<NONE>"):
        return " ".join(status.structured_error_msg.split())[:500]
    if status.msg and status.msg != "<NONE>":
        return " ".join(status.msg.split())
    return ""


def run_summary(handle: str, status: AppStatus, seconds: float, logs_shown: bool) -> str:
    """What ``tx run`` prints (to stderr) when a waited-for app ends: one line with the final
    state, how long it ran, the handle and where its logs are; for an app that did not
    succeed, the reason in that line, and before it, once, the failed replica's last
    stderr lines unless they were relayed already (``logs_shown``). ``seconds``: how long it
    ran. The notebook's ``%tx run`` prints the same."""
    state = status.state.name
    url = status.ui_url or ""
    logs = url[len("file://"):] if url.startswith("file://") else f"`tx log {handle}`"
    out = ""
    reason = ""
    if state != "SUCCEEDED":
        err = status.structured_error_msg if status.structured_error_msg not in (NONE, None) else ""
        msg = status.msg if status.msg not in (NONE, None) else ""
        err_lines = [ln for ln in str(err).splitlines() if ln.strip()]
        msg_lines = [ln for ln in str(msg).splitlines() if ln.strip()]
        first = (err_lines or msg_lines or [""])[0]
        if first:
            reason = f" ({first if len(first) <= 160 else first[:157] + '...'})"
        if not logs_shown:  # the failed replica's last stderr lines, once
            tail = err_lines[1:] or msg_lines[1:]
            out += "".join(f"  {ln}\n" for ln in tail)
    out += f"tx run: {state} after {format_duration(seconds)}: {handle}{reason}; logs: {logs}\n"
    return out
