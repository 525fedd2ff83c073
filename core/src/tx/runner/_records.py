"""JSON records under tx's state directory, as sweeps (:mod:`tx.runner.sweep`) and runs
with failover (:mod:`tx.runner.failover`) keep them: written whole or not at all, locked
across processes with ``flock``, read back a directory at a time; and the launch context
both keep (:func:`capture_context`) and submit later steps in (:func:`in_context`)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar

T = TypeVar("T")

#: held while a launch context replaces the process's (:func:`in_context`)
_CONTEXT_LOCK = threading.RLock()


def write_json(path: str, data: Any, private: bool = False) -> None:
    """Write ``data`` as JSON to ``path`` (its directory made as needed) through a temporary
    file moved into place, so a reader sees the old record or the new one, never part
    (``private``: readable by this user only, mode 0600)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(data))  # dumps: the C encoder (dump's chunks are Python's; same text)
    os.replace(tmp, path)


@contextlib.contextmanager
def flocked(path: str, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (created as needed; released by the kernel if
    the holder dies). Yields True while held; with ``blocking`` False and another process
    holding it, yields False at once, holding nothing."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as lf:
        try:
            fcntl.flock(lf, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def read_all(directory: str, from_json: Callable[[Mapping[str, Any]], T],
             cache: Optional[Dict[str, Tuple[Tuple[int, int, int], T]]] = None) -> List[T]:
    """Every ``*.json`` record of ``directory`` (none if it does not exist), by file name;
    one that cannot be read or parsed (being replaced, damaged) is left out.

    ``cache``: a dict the caller keeps from call to call (a watcher's): a record whose file
    is the same (inode, modification time, size) as when it was last read is not read
    again, and the same object is returned: the caller must not change the records then.
    """
    out = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if name.endswith(".json"):
            path = os.path.join(directory, name)
            try:
                if cache is None:
                    with open(path, encoding="utf-8") as f:
                        out.append(from_json(json.load(f)))
                    continue
                with open(path, encoding="utf-8") as f:
                    st = os.fstat(f.fileno())
                    version = (st.st_ino, st.st_mtime_ns, st.st_size)
                    hit = cache.get(name)
                    if hit is not None and hit[0] == version:
                        out.append(hit[1])
                        continue
                    rec = from_json(json.load(f))
                cache[name] = (version, rec)
                out.append(rec)
            except (OSError, ValueError, TypeError):
                continue
    if cache is not None and len(cache) > len(out):  # records gone (pruned)
        kept = {id(r) for r in out}
        for name in [n for n, (_v, r) in cache.items() if id(r) not in kept]:
            del cache[name]
    return out


def capture_context() -> Dict[str, Any]:
    """The launch context of a run or sweep created by this process: ``{"env": {...},
    "cwd": "..."}``, this process's environment and working directory
    (:attr:`tx.runner.failover.RunRecord.context`, :attr:`tx.runner.sweep.SweepRecord.context`)."""
    return {"env": dict(os.environ), "cwd": os.getcwd()}


@contextlib.contextmanager
def in_context(rec: Any) -> Iterator[None]:
    """Run the body in the launch context of ``rec`` (a run's or a sweep's record: its
    ``context``, :func:`capture_context`, and its ``handle`` for messages): ``os.environ``
    and the working directory replaced by those it was created with, restored after (a
    record without a context: as it is).

    The environment and the working directory are the process's: the schedulers read them
    where they dry-run and submit (the local ones: ``PATH``, ``TMPDIR``, the directory
    ``local_cwd`` runs in and the environment its supervisor hands the replicas; the
    trackers' ``.txconfig``; a workspace's relative path), through interfaces that take
    neither (TorchX's ``submit_dryrun(app, cfg)`` and ``schedule(info)``). So the swap is
    serialised by one process-wide lock, held for the whole body: two runs stepped by two
    threads of one process (tx-ui's workers) each get their own context, one after the
    other. A thread of the same process that reads ``os.environ`` outside such a step
    meanwhile still sees the swapped one.

    Raises:
        ValueError: the directory the run or sweep was launched in is gone.
    """
    ctx = rec.context
    if not ctx:
        yield
        return
    with _CONTEXT_LOCK:
        with _swapped(rec, ctx):
            yield


@contextlib.contextmanager
def _swapped(rec: Any, ctx: Dict[str, Any]) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        here: Optional[str] = os.getcwd()
    except FileNotFoundError:
        here = None
    try:
        os.chdir(ctx["cwd"])
    except OSError as e:
        raise ValueError(f"the directory {rec.handle} was launched in, {ctx['cwd']}, cannot be entered: "
                         f"{e.strerror}") from None
    os.environ.clear()
    os.environ.update(ctx["env"])
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if here is not None:
            os.chdir(here)
