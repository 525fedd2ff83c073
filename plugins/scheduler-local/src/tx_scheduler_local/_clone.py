"""Helpers for tests and benches of the local schedulers: many finished (or running) apps
in a state directory, and many runs with failover following them, made quickly from one
real app or run (the files tx wrote, with new ids), never from a format written by hand.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Callable, Dict, List, Optional

from tx_scheduler_local import _store

__all__ = ["clone_finished_app", "clone_run_record", "clone_running_app"]

#: the files of an app directory that name its id (rewritten in each copy)
_ID_FILES = ("request.json", "state.json", "summary.json", "environ.json")



def _read_id_files(src: str) -> Dict[str, str]:
    """The texts of the app directory ``src``'s files that name its app id (:data:`_ID_FILES`),
    by file name; a file it lacks is left out.

    Raises:
        OSError: a file exists but cannot be read.
    """
    texts = {}
    for name in _ID_FILES:
        try:
            with open(os.path.join(src, name)) as f:
                texts[name] = f.read()
        except FileNotFoundError:
            continue
    return texts

def clone_finished_app(apps_dir: str, app_id: str, n: int, prefix: str = "clone",
                       submitted: Optional[Callable[[int], float]] = None,
                       state: Optional[Callable[[int], str]] = None) -> List[str]:
    """Copy the finished app ``app_id`` of ``apps_dir`` (a local scheduler's ``apps``
    directory, e.g. ``$TX_STATE_DIR/local/apps``) ``n`` times, as the scheduler would have
    written ``n`` more apps like it: each copy's files name its new id
    (``f"{prefix}-{i:06d}"``), its ``submitted`` (summary and request) is ``submitted(i)``
    (epoch seconds; default: the original's), its state ``state(i)`` (a terminal state name;
    default: the original's) and its ``ended`` a second after its submit time.

    Returns:
        the new app ids, in order of ``i``.

    Raises:
        ValueError: ``app_id`` is not finished (its state is not terminal), ``n`` < 0, or
            ``state(i)`` gives a state that is not terminal.
        OSError: the directory cannot be read or written.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    src = os.path.join(apps_dir, app_id)
    texts = _read_id_files(src)
    first = json.loads(texts["state.json"])
    if first.get("state") not in _store.TERMINAL:
        raise ValueError(f"app {app_id} is {first.get('state')}, not finished: clone a finished app")
    others = [name for name in os.listdir(src) if name not in texts]
    made = []
    for i in range(n):
        new_id = f"{prefix}-{i:06d}"
        dst = os.path.join(apps_dir, new_id)
        os.mkdir(dst)
        for name in others:
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
        docs = {name: json.loads(text.replace(app_id, new_id)) for name, text in texts.items()}
        if submitted is not None:
            t = submitted(i)
            for name in ("summary.json", "request.json"):
                if name in docs:
                    docs[name]["submitted"] = t
            docs["state.json"]["started"] = t
            docs["state.json"]["ended"] = t + 1.0
            if "ended" in docs["summary.json"]:  # recorded by a listing of the original
                docs["summary.json"]["ended"] = t + 1.0
        if state is not None:
            final = state(i)
            if final not in _store.TERMINAL:
                raise ValueError(f"state({i}) is {final!r}, not a terminal state")
            docs["state.json"]["state"] = final
            if "final_state" in docs["summary.json"]:  # recorded by a listing of the original
                docs["summary.json"]["final_state"] = final
        for name, doc in docs.items():
            with open(os.path.join(dst, name), "w") as f:
                json.dump(doc, f, separators=(",", ":"))
        made.append(new_id)
    return made


def clone_running_app(apps_dir: str, app_id: str, n: int, prefix: str = "live") -> List[str]:
    """Copy the running app ``app_id`` of ``apps_dir`` ``n`` times (each copy's files name
    its new id, ``f"{prefix}-{i:06d}"``): every copy records the original's supervisor, so
    each is seen RUNNING while that one runs (many apps followed without a process each).
    When the original's supervisor ends, a look at a copy finds it gone and records the
    copy's end as the scheduler does for any app whose supervisor died.

    Returns:
        the new app ids, in order of ``i``.

    Raises:
        ValueError: ``app_id`` has ended, or ``n`` < 0.
        OSError: the directory cannot be read or written.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    src = os.path.join(apps_dir, app_id)
    texts = _read_id_files(src)
    if json.loads(texts["state.json"]).get("state") in _store.TERMINAL:
        raise ValueError(f"app {app_id} has ended: clone a running app")
    others = [name for name in os.listdir(src) if name not in texts and os.path.isfile(os.path.join(src, name))]
    made = []
    for i in range(n):
        new_id = f"{prefix}-{i:06d}"
        dst = os.path.join(apps_dir, new_id)
        os.mkdir(dst)
        for name in others:
            shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
        for name, text in texts.items():
            with open(os.path.join(dst, name), "w") as f:
                f.write(text.replace(app_id, new_id))
        made.append(new_id)
    return made


def clone_run_record(run_handle: str, app_ids: List[str], watch: Optional[bool] = None) -> List[str]:
    """Copy the record of the run with failover ``run_handle`` (its live hop on a local
    scheduler) once per app id of ``app_ids``, each copy a run of its own (a new run id,
    as :func:`tx.runner.new_run_id` makes them) whose live hop is that app;
    ``watch``: whether a watcher follows the copies (default: as the original).

    Returns:
        the new run handles, in the order of ``app_ids``.

    Raises:
        tx.runner.UnknownRunError: no such run.
    """
    from tx.runner import RunRecord, load_run, new_run_id, run_record_path

    rec = load_run(run_handle)
    out = []
    for app_id in app_ids:
        data = rec.to_json()
        data["run_id"] = new_run_id(rec.name)
        data["hops"][-1]["app_id"] = app_id
        if watch is not None:
            data["watch"] = watch
        copy = RunRecord.from_json(data)
        # as tx writes a record: mode 0600 (it holds the launch context's environment)
        fd = os.open(run_record_path(copy.run_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(copy.to_json(), f)
        out.append(copy.handle)
    return out
