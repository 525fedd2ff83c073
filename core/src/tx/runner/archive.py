"""The log archive: copies of every replica's log that outlive the backend (docs/recovery.md).

While tx follows an app (:meth:`tx.runner.Runner.wait`), and when a later tx command finds
it finished (:meth:`tx.runner.Runner.status`), the Runner copies each replica's log, as the
scheduler's ``log_iter_blocks`` gives it (bytes, unfiltered, the default stream), into the
archive; ``tx log`` reads it there when the backend no longer has the log. The archive is
any fsspec filesystem (https://filesystem-spec.readthedocs.io/): a local directory, ``s3://``,
``gs://``, ``memory://`` ... Layout under its root::

    <scheduler>/<session>/<app_id>/app.json               handle and replicas
    <scheduler>/<session>/<app_id>/<role>/<k>/part-000000 the log's first bytes ...
    <scheduler>/<session>/<app_id>/<role>/<k>/part-000001 ... the bytes that came next
    <scheduler>/<session>/<app_id>/complete               written once the app ended and
                                                          every log was copied to its end

A replica's log is the concatenation of its parts. Each copy reads the backend's log,
skips the bytes already archived (the sum of the parts' sizes) and writes what follows as
the next part: under a temporary name first, then moved into place, so that a reader never
sees half a part and no filesystem needs append. Two processes copying at once write parts
that both start where the archive ended, so whichever lands is a correct continuation.
A log whose backend now holds fewer bytes than the archive (the backend restarted it) is
left as archived. Role names and app ids are percent-encoded in paths.
"""
from __future__ import annotations

import json
import posixpath
import time
import uuid
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import quote

import fsspec

from tx.config.recovery import archive_url
from tx.log import get_logger
from tx.specs.handles import parse_app_handle

__all__ = ["BackendReadError", "LogArchive", "PART_PREFIX", "default_archive"]

log = get_logger(__name__)

#: the name of every part of an archived log: ``part-`` and a 6-digit sequence number
PART_PREFIX = "part-"
_COMPLETE = "complete"
_APP = "app.json"

#: ``(role, replica id)`` of one replica
Replica = Tuple[str, int]
#: ``(role, k) -> the backend's log of that replica, as byte blocks`` (read once, not followed)
BlockReader = Callable[[str, int], Iterable[bytes]]


class BackendReadError(Exception):
    """The backend could not give a replica's log (raised by a :data:`BlockReader`): the
    replica is skipped and the app is not marked complete."""


def _q(text: str) -> str:
    return quote(text, safe="")


class LogArchive:
    """An archive of app logs at ``url`` (an fsspec URL or a local path).

    Args:
        url: the archive's root; created on first write.
        storage_options: keyword arguments of the fsspec filesystem.
    """

    def __init__(self, url: str, **storage_options: Any) -> None:
        self.url = url
        self.fs, self.root = fsspec.core.url_to_fs(url, **storage_options)

    # -- paths ---------------------------------------------------------------------------
    def app_dir(self, handle: str) -> str:
        """The directory of the app with ``handle`` (``scheduler://session/app_id``).

        Raises:
            MalformedAppHandleException: not an app handle.
        """
        scheduler, session, app_id = parse_app_handle(handle)
        return posixpath.join(self.root, _q(scheduler), _q(session or "_"), _q(app_id))

    def _replica_dir(self, handle: str, role: str, k: int) -> str:
        return posixpath.join(self.app_dir(handle), _q(role), str(int(k)))

    def _parts(self, handle: str, role: str, k: int) -> List[Tuple[str, int]]:
        """``(path, size)`` of the replica's parts, in order; none when nothing is archived."""
        d = self._replica_dir(handle, role, k)
        try:
            entries = self.fs.ls(d, detail=True)
        except FileNotFoundError:
            return []
        parts = [(e["name"], int(e.get("size") or 0)) for e in entries
                 if posixpath.basename(e["name"].rstrip("/")).startswith(PART_PREFIX)]
        return sorted(parts, key=lambda p: posixpath.basename(p[0]))

    # -- reading -------------------------------------------------------------------------
    def is_complete(self, handle: str) -> bool:
        """Whether the app ended and every replica's log was copied to its end."""
        return bool(self.fs.exists(posixpath.join(self.app_dir(handle), _COMPLETE)))

    def replicas(self, handle: str) -> Optional[List[Replica]]:
        """The replicas the archive knows of the app, or None when it has no such app."""
        try:
            with self.fs.open(posixpath.join(self.app_dir(handle), _APP), "rb") as f:
                data = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            return None
        return [(str(r), int(k)) for r, k in data["replicas"]]

    def has(self, handle: str, role: str, k: int) -> bool:
        """Whether the archive holds the replica's log: some of it, or all of it once the
        app is complete (then possibly empty: the replica wrote nothing)."""
        known = self.replicas(handle)
        if known is None or (role, int(k)) not in known:
            return False
        return bool(self._parts(handle, role, k)) or self.is_complete(handle)

    def size(self, handle: str, role: str, k: int) -> int:
        """Bytes of the replica's log archived so far."""
        return sum(size for _path, size in self._parts(handle, role, k))

    def read_blocks(self, handle: str, role: str, k: int) -> Iterator[bytes]:
        """The archived log of one replica, one block per part (bytes as the backend gave them)."""
        for path, _size in self._parts(handle, role, k):
            yield self.fs.cat_file(path)

    # -- writing -------------------------------------------------------------------------
    def _write_atomic(self, path: str, data: bytes) -> None:
        tmp = posixpath.join(posixpath.dirname(path), f".tmp-{uuid.uuid4().hex}")
        with self.fs.open(tmp, "wb") as f:
            f.write(data)
        try:
            self.fs.mv(tmp, path)
        except BaseException:
            try:
                self.fs.rm(tmp)
            except OSError:
                pass
            raise

    def _ensure_dir(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def copy(self, handle: str, replicas: Sequence[Replica], read: BlockReader,
             ended: Optional[str] = None) -> int:
        """Copy what is new in each replica's log; with ``ended`` (the app's terminal state),
        then mark the app complete.

        Args:
            handle: the app's handle.
            replicas: its replicas.
            read: reads one replica's log from the backend, once (not followed).
            ended: the app's terminal state's name, or None while it runs.

        Returns:
            the bytes written.

        Raises:
            OSError: the archive cannot be written (full, unwritable ...).
            BackendReadError: ``read`` failed for a replica (the others were copied).
        """
        app_dir = self.app_dir(handle)
        self._ensure_dir(app_dir)
        known = self.replicas(handle) or []
        wanted = sorted(set(known) | {(str(r), int(k)) for r, k in replicas})
        if wanted != known:
            self._write_atomic(posixpath.join(app_dir, _APP), json.dumps(
                {"handle": handle, "replicas": [list(r) for r in wanted]}).encode("utf-8"))
        written = 0
        failed: Optional[BackendReadError] = None
        for role, k in replicas:
            try:
                written += self._copy_one(handle, role, k, read)
            except BackendReadError as e:
                failed = failed or e
        if failed is not None:
            raise failed
        if ended is not None:
            self._write_atomic(posixpath.join(app_dir, _COMPLETE), json.dumps(
                {"state": ended, "ended": time.time()}).encode("utf-8"))
        return written

    def _copy_one(self, handle: str, role: str, k: int, read: BlockReader) -> int:
        parts = self._parts(handle, role, k)
        have = sum(size for _path, size in parts)
        pos = 0
        new: List[bytes] = []
        for block in read(role, k):
            end = pos + len(block)
            if end > have:
                new.append(block[max(0, have - pos):])
            pos = end
        if pos < have:
            log.warning("the backend's log is shorter than the archived one: keeping the archive",
                        handle=handle, role=role, replica=k, archived=have, backend=pos)
            return 0
        data = b"".join(new)
        if not data:
            return 0
        d = self._replica_dir(handle, role, k)
        self._ensure_dir(d)
        seq = int(posixpath.basename(parts[-1][0])[len(PART_PREFIX):]) + 1 if parts else 0
        self._write_atomic(posixpath.join(d, f"{PART_PREFIX}{seq:06d}"), data)
        return len(data)

    # -- pruning -------------------------------------------------------------------------
    def prune(self, keep: float, dry_run: bool = False, now: Optional[float] = None,
              schedulers: Optional[Sequence[str]] = None) -> List[str]:
        """Delete the archives of apps that ended more than ``keep`` seconds ago (only
        complete ones: an app still followed is never pruned), of every scheduler or of
        ``schedulers``.

        Returns:
            the handles of the deleted (``dry_run``: deletable) archives.
        """
        now = time.time() if now is None else now
        gone: List[str] = []
        try:
            marks = self.fs.glob(posixpath.join(self.root, "*", "*", "*", _COMPLETE))
        except FileNotFoundError:
            return gone
        for mark in sorted(marks):
            if schedulers is not None and posixpath.basename(
                    posixpath.dirname(posixpath.dirname(posixpath.dirname(mark)))) not in {_q(n) for n in schedulers}:
                continue
            try:
                with self.fs.open(mark, "rb") as f:
                    ended = float(json.loads(f.read().decode("utf-8"))["ended"])
            except (OSError, ValueError, KeyError):
                continue
            if now - ended <= keep:
                continue
            app_dir = posixpath.dirname(mark)
            handle = app_dir
            try:
                with self.fs.open(posixpath.join(app_dir, _APP), "rb") as f:
                    handle = json.loads(f.read().decode("utf-8"))["handle"]
            except (OSError, ValueError, KeyError):
                pass
            if not dry_run:
                self.fs.rm(app_dir, recursive=True)
            gone.append(handle)
        return gone


def default_archive() -> Optional[LogArchive]:
    """The archive of the settings (:func:`tx.config.recovery.archive_url`), or None when
    it is off."""
    url = archive_url()
    return None if url is None else LogArchive(url)
