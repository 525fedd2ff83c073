"""``list`` and ``prune`` over the on-disk registry, fast with 10,000 apps, and a page of
them (:func:`list_page`) in memory bounded by the page.

Each app directory holds a small ``summary.json`` written at submit time (id, name,
scheduler, session, submit time in epoch seconds, log directory); the first ``list`` that
sees the app finished adds its final state and end time. So listing reads one small file
per finished app (two for the others: ``state.json`` too) instead of parsing every
``request.json`` (which holds the whole AppDef). The summaries of finished apps are also
kept together in one hidden file, ``.listed.jsonl``: a header line, then one JSON line per
finished app (:data:`ROW`: its id, its summary file's modification time and size, and what
listing it needs). A listing reads that file one line at a time, stats each app's summary
and reads only those that changed, so 10,000 finished apps cost one streamed file read and
10,000 stats, and a page keeps only its own apps (a heap of ``offset + limit``), not every
app (it is only a cache: a summary that changed, or an index that is missing or damaged,
is read as before; it is rewritten, through a temporary file, only when apps finished or
went). Apps submitted before summaries existed fall back to their ``request.json``. An app
whose state is not terminal is listed through the scheduler's ``describe`` (which notices a
supervisor that died), so the listed state is the one ``tx status`` shows.
"""
from __future__ import annotations

import heapq
import itertools
import json
import os
import threading
import time
from typing import AbstractSet, Any, Callable, Dict, Iterator, List, Optional, Tuple

import attrs

from tx.schedulers import ListAppResponse, ListPage
from tx.specs import AppState, make_app_handle
from tx import get_logger
from tx_scheduler_local import _apps, _procs, _store

log = get_logger(__name__)


def _rmtree(path: str, ignore_errors: bool = True) -> None:
    # shutil loads zlib, bz2 and lzma (~3 ms): only when something is deleted, never on `tx run`
    import shutil

    shutil.rmtree(path, ignore_errors=ignore_errors)

SUMMARY = "summary.json"
#: the cache of finished apps' summaries (hidden: never listed as an app), one JSON line each
INDEX = ".listed.jsonl"
#: the index's first line
_HEADER = {"version": 2}
#: the index before version 2 (one JSON object): removed when the new one is written
_OLD_INDEX = ".listed.json"
#: what one line of the index holds, in order (``mtime_ns`` and ``size``: of ``summary.json``)
ROW = ("app_id", "mtime_ns", "size", "submitted", "final_state", "app_name", "scheduler", "session", "ended")
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


#: index lines parsed at once (memory: this many rows)
_CHUNK = 1000


def _loads(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _valid(row: Any) -> bool:
    """Whether ``row`` is an index line this version wrote (anything else is read from its files)."""
    return (isinstance(row, list) and len(row) == len(ROW) and all(isinstance(row[i], str) for i in (0, 6, 7))
            and isinstance(row[1], int) and isinstance(row[2], int) and row[4] in _store.TERMINAL
            and isinstance(row[5], (str, type(None))))


def _index_rows(apps_dir: str) -> Iterator[List[Any]]:
    """The rows of :data:`INDEX`, one line at a time (none where it is missing or its header
    is not this version's; a damaged line is skipped: its app is read from its files)."""
    try:
        f = open(os.path.join(apps_dir, INDEX), encoding="utf-8")
    except OSError:
        return
    with f:
        try:
            if json.loads(f.readline() or "null") != _HEADER:
                return
            while True:
                lines = list(itertools.islice(f, _CHUNK))
                if not lines:
                    return
                try:  # one parse for a chunk of lines; line by line where one is damaged
                    rows = json.loads("[" + ",".join(lines) + "]")
                except ValueError:
                    rows = [_loads(line) for line in lines]
                yield from filter(_valid, rows)
        except (OSError, ValueError):  # unreadable, not UTF-8: the rest is read from the apps
            return


def _row(app_id: str, stamp: List[int], summary: Dict[str, Any]) -> List[Any]:
    """The index line of a finished app."""
    return [app_id, stamp[0], stamp[1], summary.get("submitted"), summary.get("final_state"),
            summary.get("app_name"), summary.get("scheduler"), summary.get("session"), summary.get("ended")]


def _from_row(row: List[Any]) -> LocalListAppResponse:
    app_id, _, _, submitted, final, app_name, scheduler, session, ended = row
    return LocalListAppResponse(app_id, AppState[final], make_app_handle(scheduler, session, app_id),
                                app_name or "", submitted=submitted, ended=ended)


def _write_index(apps_dir: str, gone: AbstractSet[str], new_rows: List[List[Any]]) -> None:
    """Rewrite :data:`INDEX` without the apps in ``gone`` and with ``new_rows`` (streamed
    through a temporary file: two listings at once each leave a whole index)."""
    path = os.path.join(apps_dir, INDEX)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"  # tx ui lists on several threads
    replaced = {r[0] for r in new_rows}
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(json.dumps(_HEADER) + "\n")
            for row in _index_rows(apps_dir):
                if row[0] not in gone and row[0] not in replaced:
                    out.write(json.dumps(row, separators=(",", ":")) + "\n")
            for row in new_rows:
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
        os.replace(tmp, path)
        if os.path.exists(os.path.join(apps_dir, _OLD_INDEX)):
            os.unlink(os.path.join(apps_dir, _OLD_INDEX))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


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
            done = {**summary, "final_state": name, "ended": ended}
            _store.write_json_atomic(summary_path, done)
            stamp = _stamp(summary_path) if kept is not None else None
            if kept is not None and stamp is not None:
                kept[app_id] = [stamp, {k: done.get(k) for k in _LISTED}]
        except OSError:
            pass
    if name in _store.TERMINAL:
        app_state = AppState[name]
    elif _apps.is_running(state) and os.path.exists(os.path.join(app_dir, _store.REQUEST)):
        # its supervisor runs (or runs where this process cannot check it): describe would
        # answer the state it recorded, after building the whole description (a watcher
        # following 2,000 running apps lists them every second)
        app_state = AppState[name or "SUBMITTED"]
    else:  # a supervisor that died: as describe sees it (it records the end, or restarts the app)
        desc = describe(app_id)
        if desc is None:
            return None
        app_state = desc.state
    return LocalListAppResponse(app_id, app_state, handle, summary.get("app_name") or "",
                                submitted=summary.get("submitted"), ended=ended)


def _warn(text: str) -> None:
    log.warning(text)


def _scan(apps_dir: str, describe: Callable[[str], Any], warn: Callable[[str], None],
          scheduler: Optional[str]) -> Iterator[Tuple[Any, ...]]:
    """Every app under ``apps_dir`` (of ``scheduler`` if given), in no order, as
    ``(submitted, state name, app name, handle or None, row or None, entry or None)``: an
    unchanged finished app as its index row (its handle is made only when asked for), any
    other as its :class:`LocalListAppResponse`. Rewrites the index at the end when apps
    finished or went."""
    try:
        with os.scandir(apps_dir) as it:
            listed = {e.name: False for e in it if not e.name.startswith(".")}  # True: from the index
    except FileNotFoundError:
        return
    gone: set = set()
    new_rows: List[List[Any]] = []
    prefix = apps_dir + os.sep
    for row in _index_rows(apps_dir):
        app_id = row[0]
        seen = listed.get(app_id)
        if seen is None:
            gone.add(app_id)
        elif seen:  # a second line for one app: the first counts
            continue
        elif _stamp(prefix + app_id + os.sep + SUMMARY) == [row[1], row[2]]:
            listed[app_id] = True
            if scheduler is None or row[6] == scheduler:
                yield row[3], row[4], row[5] or "", None, row, None
        else:  # changed: read again below, as an app the index does not know
            gone.add(app_id)
    for app_id in [a for a, seen in listed.items() if not seen]:
        if not _store.valid_app_id(app_id):
            warn(f"skipped {os.path.join(apps_dir, app_id)}: not an app of tx (app ids are letters, "
                 "digits, '_', '.', '-')")
            continue
        kept: Dict[str, Any] = {}
        try:
            e = _entry(apps_dir, app_id, describe, None, kept)
        except _store.BadStateFile as err:
            warn(f"skipped app {app_id}: {err}")
            continue
        if app_id in kept:
            new_rows.append(_row(app_id, kept[app_id][0], kept[app_id][1]))
        if e is not None and (scheduler is None or e.app_handle.startswith(f"{scheduler}://")):
            yield e.submitted, e.state.name, e.name, e.app_handle, None, e
    if gone or new_rows:  # the next listing reads one line for each
        _write_index(apps_dir, gone, new_rows)


def list_page(apps_dir: str, describe: Callable[[str], Any], limit: Optional[int] = None, offset: int = 0,
              states: Optional[AbstractSet[str]] = None, name: Optional[str] = None,
              warn: Callable[[str], None] = _warn, scheduler: Optional[str] = None) -> ListPage:
    """A page of the apps under ``apps_dir`` (of ``scheduler`` if given), newest first by
    submit time: ``limit`` (None: all) after the first ``offset`` of those whose state name
    is in ``states`` (None: any) and whose name or handle holds ``name`` (any case), and
    how many match in all (see :func:`tx.schedulers.paging.list_page`). Memory: the apps'
    ids, and ``offset + limit`` apps. Unreadable entries: as :func:`list_apps`.

    Raises:
        ValueError: ``limit`` or ``offset`` < 0.
    """
    if (limit is not None and limit < 0) or offset < 0:
        raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
    needle = (name or "").lower()
    total = 0
    seq = itertools.count()  # ties keep the scan's order, never compare rows

    def matching() -> Iterator[Tuple[float, int, Tuple[Any, ...]]]:
        nonlocal total
        for item in _scan(apps_dir, describe, warn, scheduler):
            submitted, state, app_name, handle, row, _ = item
            if states is not None and state not in states:
                continue
            if needle and needle not in app_name.lower():
                if handle is None:
                    handle = make_app_handle(row[6], row[7], row[0])
                if needle not in handle.lower():
                    continue
            total += 1
            yield (submitted if isinstance(submitted, (int, float)) else 0.0), -next(seq), item

    if limit is None:
        top = sorted(matching(), reverse=True)[offset:]
    else:
        top = heapq.nlargest(offset + limit, matching())[offset:]
    apps = [item[5] if item[5] is not None else _from_row(item[4]) for _, _, item in top]
    return ListPage(apps=list(apps), total=total, ordered=True)


def list_apps(apps_dir: str, describe: Callable[[str], Any],
              warn: Callable[[str], None] = _warn, scheduler: Optional[str] = None) -> List[LocalListAppResponse]:
    """Every app under ``apps_dir`` (made by ``scheduler``, its summary's ``scheduler``, if
    given: local_cwd and local_dir share the directory), newest first (by submit time). An
    entry that is not a
    readable app of tx (an empty or truncated state file, a ``{}`` request, a stray file,
    a directory this user cannot read) is skipped with one ``warn(text)`` naming the file
    and what is wrong; names starting with ``.`` (tx's own work directories) are skipped
    silently."""
    return list_page(apps_dir, describe, warn=warn, scheduler=scheduler).apps  # type: ignore[return-value]


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
