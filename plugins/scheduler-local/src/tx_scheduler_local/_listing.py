"""``list`` and ``prune`` over the on-disk registry, fast with thousands of apps.

Each app directory holds a small ``summary.json`` written at submit time (id, name,
scheduler, session, submit time in epoch seconds, log directory); the first ``list`` that
sees the app finished adds its final state and end time. So listing reads one small file
per finished app (two for the others: ``state.json`` too) instead of parsing every
``request.json`` (which holds the whole AppDef). The summaries of finished apps are also
kept together in one hidden file, ``.listed.json``, each with its file's modification time
and size: a listing stats each app's summary and reads only those that changed, so 1,000
finished apps cost one file read and 1,000 stats instead of 1,000 file reads (it is only a
cache: a summary that changed, or an index that is missing or damaged, is read as before). Apps submitted before summaries existed
fall back to their ``request.json``. An app whose state is not terminal is listed through
the scheduler's ``describe`` (which notices a supervisor that died), so the listed state is
the one ``tx status`` shows.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List, Optional

import attrs

from tx.schedulers.api import ListAppResponse
from tx.specs.api import AppState
from tx.log import get_logger
from tx.specs.handles import make_app_handle
from tx_scheduler_local import _apps, _procs, _store

log = get_logger(__name__)


def _rmtree(path: str, ignore_errors: bool = True) -> None:
    # shutil loads zlib, bz2 and lzma (~3 ms): only when something is deleted, never on `tx run`
    import shutil

    shutil.rmtree(path, ignore_errors=ignore_errors)

SUMMARY = "summary.json"
#: the cache of finished apps' summaries (hidden: never listed as an app)
INDEX = ".listed.json"
#: what the index keeps of a finished app's summary (what listing it needs)
_LISTED = ("app_id", "app_name", "scheduler", "session", "submitted", "final_state", "ended")


@attrs.define
class LocalListAppResponse(ListAppResponse):
    """A listed local app, with ``ended``: when it ended (epoch seconds; None while it
    runs or when unknown); ``submitted`` is core's :class:`ListAppResponse` field."""

    ended: Optional[float] = None


def summary_of(request: Dict[str, Any]) -> Dict[str, Any]:
    """The ``summary.json`` content of a request (as written by ``schedule``)."""
    return {k: request.get(k) for k in ("app_id", "app_name", "scheduler", "session", "submitted", "log_dir")}


def write_summary(app_dir: str, request: Dict[str, Any]) -> None:
    _store.write_json_atomic(os.path.join(app_dir, SUMMARY), summary_of(request))


def read_summary(app_dir: str) -> Optional[Dict[str, Any]]:
    """The app's summary; for an app without one (or with a damaged one), built from its
    request (None: unknown).

    Raises:
        tx_scheduler_local._store.BadStateFile: the request is damaged too, or the
            directory cannot be read.
    """
    try:
        s = _store.read_json(os.path.join(app_dir, SUMMARY))
    except _store.BadStateFile as e:
        if e.path != os.path.join(app_dir, SUMMARY):  # the directory itself is at fault
            raise
        s = None  # half-written by a crashed writer: rebuild it
    if (s is not None and isinstance(s.get("scheduler"), str) and isinstance(s.get("session"), str)
            and s.get("app_id") == os.path.basename(app_dir)):
        return s
    req = _apps.read_request(app_dir)
    return summary_of(req) if req is not None else None


def _stamp(path: str) -> Optional[List[int]]:
    """``[mtime_ns, size]`` of a file, None where it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def _read_index(apps_dir: str) -> Dict[str, Any]:
    """``{app_id: [stamp, summary]}`` of :data:`INDEX` (empty where it is missing or damaged)."""
    try:
        data = _store.read_json(os.path.join(apps_dir, INDEX))
    except _store.BadStateFile:
        return {}
    finished = data.get("finished") if isinstance(data, dict) and data.get("version") == 1 else None
    return finished if isinstance(finished, dict) else {}


def _entry(apps_dir: str, app_id: str, describe: Callable[[str], Any],
           index: Optional[Dict[str, Any]] = None, kept: Optional[Dict[str, Any]] = None,
           ) -> Optional[LocalListAppResponse]:
    """The listed app ``app_id``. ``index``: the cached summaries of finished apps, used where
    the summary file is unchanged; ``kept``: where the summaries of finished apps go, for the
    next listing's index."""
    app_dir = os.path.join(apps_dir, app_id)
    summary_path = os.path.join(app_dir, SUMMARY)
    stamp = _stamp(summary_path) if kept is not None else None
    cached = (index or {}).get(app_id)
    if (stamp is not None and isinstance(cached, list) and len(cached) == 2 and cached[0] == stamp
            and isinstance(cached[1], dict)):
        summary = cached[1]
    else:
        summary = read_summary(app_dir)
    if summary is None:
        if os.path.isdir(app_dir):
            raise _store.BadStateFile(app_dir, f"holds no {_store.REQUEST}: not an app of tx")
        raise _store.BadStateFile(app_dir, "is not a directory: not an app of tx")
    handle = make_app_handle(summary["scheduler"], summary["session"], app_id)
    final = summary.get("final_state")
    if final in _store.TERMINAL:  # recorded by an earlier list: one file read per app
        if kept is not None and stamp is not None and summary.get("app_id") == app_id:
            kept[app_id] = [stamp, {k: summary.get(k) for k in _LISTED}]
        return LocalListAppResponse(app_id, AppState[final], handle, summary.get("app_name") or "",
                                    submitted=summary.get("submitted"), ended=summary.get("ended"))
    state_path = os.path.join(app_dir, _store.STATE)
    state = _store.read_json(state_path)
    if state is None:
        raise _store.BadStateFile(state_path, "is missing (the app's state was deleted?)")
    _apps.check_state(state, state_path)
    name = state.get("state")
    ended = state.get("ended")
    if name in _store.TERMINAL and summary.get("app_id") == app_id:
        try:  # a finished app's state never changes again: keep it in the summary
            _store.write_json_atomic(os.path.join(app_dir, SUMMARY), {**summary, "final_state": name, "ended": ended})
        except OSError:
            pass
    if name in _store.TERMINAL:
        app_state = AppState[name]
    else:  # running, or a supervisor that died: as describe sees it
        desc = describe(app_id)
        if desc is None:
            return None
        app_state = desc.state
    return LocalListAppResponse(app_id, app_state, handle, summary.get("app_name") or "",
                                submitted=summary.get("submitted"), ended=ended)


def _warn(text: str) -> None:
    log.warning(text)


def list_apps(apps_dir: str, describe: Callable[[str], Any],
              warn: Callable[[str], None] = _warn, scheduler: Optional[str] = None) -> List[LocalListAppResponse]:
    """Every app under ``apps_dir`` (made by ``scheduler``, its summary's ``scheduler``, if
    given: local_cwd and local_dir share the directory), newest first (by submit time). An
    entry that is not a
    readable app of tx (an empty or truncated state file, a ``{}`` request, a stray file,
    a directory this user cannot read) is skipped with one ``warn(text)`` naming the file
    and what is wrong; names starting with ``.`` (tx's own work directories) are skipped
    silently."""
    try:
        names = os.listdir(apps_dir)
    except FileNotFoundError:
        return []
    index = _read_index(apps_dir)
    kept: Dict[str, Any] = {}
    found = []
    for app_id in names:
        if app_id.startswith("."):
            continue
        if not _store.valid_app_id(app_id):
            warn(f"skipped {os.path.join(apps_dir, app_id)}: not an app of tx (app ids are letters, "
                 "digits, '_', '.', '-')")
            continue
        try:
            e = _entry(apps_dir, app_id, describe, index, kept)
        except _store.BadStateFile as err:
            warn(f"skipped app {app_id}: {err}")
            continue
        if e is not None and (scheduler is None or e.app_handle.startswith(f"{scheduler}://")):
            found.append(e)
    if kept != index:  # new finished apps, or apps gone: the next listing reads one file for them
        try:
            _store.write_json_atomic(os.path.join(apps_dir, INDEX), {"version": 1, "finished": kept})
        except OSError:
            pass
    found.sort(key=lambda a: a.submitted or 0.0, reverse=True)
    return found


def _finished_at(app_dir: str, entry: LocalListAppResponse) -> float:
    if entry.ended:
        return float(entry.ended)
    try:
        return os.path.getmtime(os.path.join(app_dir, _store.STATE))
    except OSError:
        return time.time()


def _safe_log_dir(path: Any, app_id: str) -> Optional[str]:
    """The app's log directory if it is one tx made for it (``<log_dir>/<session>/<app_id>``)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    path = os.path.normpath(path)
    return path if os.path.basename(path) == app_id and os.path.isdir(path) else None


def prune(apps_dir: str, keep: float, describe: Callable[[str], Any], dry_run: bool = False,
          now: Optional[float] = None, scheduler: Optional[str] = None) -> List[LocalListAppResponse]:
    """Delete the state and logs of apps (of ``scheduler`` if given, as :func:`list_apps`)
    that ended more than ``keep`` seconds ago (never an app that is not in a terminal
    state). Returns the apps deleted (or, with ``dry_run``, that would be), oldest first."""
    now = time.time() if now is None else now
    if not dry_run:
        remove_stale_work_dirs(apps_dir, now)
    gone = []
    for entry in reversed(list_apps(apps_dir, describe, scheduler=scheduler)):
        if entry.state not in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED):
            continue
        app_dir = os.path.join(apps_dir, entry.app_id)
        if now - _finished_at(app_dir, entry) < keep:
            continue
        gone.append(entry)
        if dry_run:
            continue
        summary = read_summary(app_dir) or {}
        log_dir = _safe_log_dir(summary.get("log_dir"), entry.app_id)
        if log_dir:
            _rmtree(log_dir, ignore_errors=True)
        # the registry entry last: until it goes, the app is still listed and can be pruned again
        trash = os.path.join(apps_dir, f".gc-{entry.app_id}-{os.getpid()}")
        try:
            os.rename(app_dir, trash)
        except OSError:
            continue
        _rmtree(trash, ignore_errors=True)
    return gone


#: work directories younger than this (seconds) are never removed: their writer may still run
STALE_AFTER = 60.0


def remove_stale_work_dirs(apps_dir: str, now: Optional[float] = None) -> List[str]:
    """Remove the hidden work directories a killed process left in ``apps_dir``: a
    launcher's ``.new-<app_id>-<pid>`` (killed while writing the app's entry) and a
    ``gc``'s ``.gc-<app_id>-<pid>``, once older than :data:`STALE_AFTER` seconds and their
    process is gone. Returns the paths removed."""
    now = time.time() if now is None else now
    try:
        names = os.listdir(apps_dir)
    except OSError:
        return []
    removed = []
    for name in names:
        if not name.startswith((".new-", ".gc-")):
            continue
        pid = name.rsplit("-", 1)[-1]
        path = os.path.join(apps_dir, name)
        try:
            if now - os.lstat(path).st_mtime < STALE_AFTER:
                continue
        except OSError:
            continue
        if pid.isdigit() and _procs.is_alive(int(pid)):
            continue
        _rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed
