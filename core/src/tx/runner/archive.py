"""The log archive: copies of every replica's log that outlive the backend (docs/recovery.md).

While tx follows an app (:meth:`tx.runner.Runner.wait`), and when a later tx command finds
it finished (:meth:`tx.runner.Runner.status`), the Runner copies each replica's log, as the
scheduler's ``log_iter_blocks`` gives it (bytes, unfiltered, the default stream), into the
archive; ``tx log`` reads it there when the backend no longer has the log. The archive is
any fsspec filesystem (https://filesystem-spec.readthedocs.io/): a local directory, ``s3://``,
``gs://``, ``memory://`` ... A local directory given as a path (no ``:`` in it, no storage
options: the default archive under tx's state directory) is written with the standard
library alone (:class:`_LocalFS`, what fsspec's local filesystem does for these calls):
fsspec's import (asyncio, ssl, zipfile...) cost more than all of the runner in the detached
copier. Layout under its root::

    <scheduler>/<session>/<app_id>/app.json               handle and replicas
    <scheduler>/<session>/<app_id>/<role>/<k>/part-000000 the log's first bytes ...
    <scheduler>/<session>/<app_id>/<role>/<k>/part-000001-c... the bytes that came next
    <scheduler>/<session>/<app_id>/complete               written once the app ended and
                                                          every log was copied to its end

A replica's log is the concatenation of its parts. Each copy reads the backend's log,
skips the bytes already archived and writes what follows as the next part: under a
temporary name first, then moved into place, so that a reader never sees half a part and
no filesystem needs append. Two processes copying at once write parts that both start where
the archive ended, under the same name: the first to land stays (a part is never replaced)
and is a correct continuation; what the other had beyond it is copied next time.

**Attempts.** A backend may start a replica's log again from zero: on Kubernetes a retry
(Volcano RestartJob, a JobSet restart, an MCAD requeue) recreates the pod under the same
name. The archive then keeps every attempt: the bytes archived stay as they are and the new
log is archived after them as a new *segment*, so reading gives attempt 1's bytes, then
attempt 2's, never a mix. A part's name says where it stands::

    part-000000                 the first attempt's first bytes
    part-000001-c<16 hex>       ... what followed; hex: sha256 of the segment's bytes before it
    part-001-000000             the second attempt's (segment 1's) first bytes
    part-001-000001-c<16 hex>   ... and so on

A copy finds that the backend's log restarted when it is shorter than the archived
segment, or when its bytes differ from the archived ones: the sha256 of the backend's
bytes before the segment's last part must match the last part's name, and the last part's
final (at most :data:`_TAIL`) bytes must match the backend's at the same offset. The cost
per replica and copy: one sha256 pass over the backend's bytes up to the archived size
(bytes the copy reads anyway) and one ranged read of at most 4 KiB from the archive; on a
restart, one more read of the backend's log, whole. A restart whose output repeats the
archived bytes exactly is not told apart (the archive then reads as the new attempt's log).
Copiers racing on a restart both begin the same next segment: one part lands and the other
is dropped. A part is created with a hard link on a local filesystem (atomic: an existing
name fails); elsewhere after a check that it does not exist (a narrow window in which a
racing copier's shorter part could replace it). Parts without a hash (older tx) continue segment 0. Role names and app ids
are percent-encoded in paths.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import shutil
import time
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import quote

from tx.config.recovery import archive_url
from tx.log import get_logger
from tx.specs.handles import parse_app_handle

__all__ = ["BackendReadError", "LogArchive", "PART_PREFIX", "default_archive"]

log = get_logger(__name__)

#: the name of every part of an archived log: ``part-`` and a 6-digit sequence number
PART_PREFIX = "part-"
#: a part that continues one: this, then 16 hex digits of the sha256 of the segment before it
_CONT = "-c"
#: the archived bytes at a segment's end compared with the backend's, at most
_TAIL = 4096
_COMPLETE = "complete"
#: why a failed app failed, one file per rank of how much it says (:meth:`LogArchive.record_why`)
_WHY = "why-{rank}.json"
_TOP_RANK = 3
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


def _part_key(path: str) -> Optional[Tuple[int, int]]:
    """``(segment, number)`` of a part's path, or None: not a part."""
    name = posixpath.basename(path.rstrip("/"))
    if not name.startswith(PART_PREFIX):
        return None
    nums = [int(t) for t in name[len(PART_PREFIX):].split("-") if t.isdigit()]
    if len(nums) == 1:
        return 0, nums[0]
    return (nums[0], nums[1]) if len(nums) == 2 else None


def _part_name(segment: int, number: int, tag: str) -> str:
    return (f"{PART_PREFIX}{number:06d}{tag}" if segment == 0
            else f"{PART_PREFIX}{segment:03d}-{number:06d}{tag}")


def _segment(parts: List[Tuple[str, int]]) -> List[Tuple[str, int]]:
    """The parts of the last segment."""
    if not parts:
        return []
    last = _part_key(parts[-1][0])[0]  # type: ignore[index]
    return [p for p in parts if _part_key(p[0])[0] == last]  # type: ignore[index]


class _LocalFS:
    """The calls :class:`LogArchive` makes, on a local directory, as fsspec's
    ``LocalFileSystem`` makes them, with the standard library (no fsspec import)."""

    protocol = ("file", "local")

    @staticmethod
    def root(url: str) -> str:
        """The absolute path of ``url`` (a path without ``:``) as fsspec's local filesystem
        makes it: ``~`` expanded, a relative path under the working directory, no trailing
        ``/``."""
        if url.startswith("~"):
            path = os.path.expanduser(url)
        elif url.startswith("/"):
            path = url
        else:
            rel = url[2:] if url.startswith("./") else ("" if url == "." else url)
            path = f"{os.getcwd()}/{rel}"
        return path.rstrip("/") or "/"

    def ls(self, path: str, detail: bool = True) -> List[Any]:
        with os.scandir(path) as entries:  # FileNotFoundError for a missing directory, as fsspec
            found = [(posixpath.join(path, e.name), e.stat().st_size, e.is_dir()) for e in entries]
        return [{"name": n, "size": size, "type": "directory" if d else "file"} for n, size, d in found]

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def open(self, path: str, mode: str = "rb") -> Any:
        return open(path, mode)

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None) -> bytes:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if start is not None:
                f.seek(start if start >= 0 else max(0, size + start))
            if end is None:
                return f.read()
            if end < 0:
                end = size + end
            return f.read(max(0, end - f.tell()))

    def mv(self, path1: str, path2: str) -> None:
        shutil.move(path1, path2)

    def rm(self, path: str, recursive: bool = False) -> None:
        if recursive and os.path.isdir(path):
            if os.path.abspath(path) == os.getcwd():
                raise ValueError("Cannot delete current working directory")
            shutil.rmtree(path)
        else:
            os.remove(path)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def glob(self, pattern: str) -> List[str]:
        """Paths matching ``pattern`` (``*`` within one name, hidden names included, as
        fsspec), sorted."""
        parts = pattern.strip("/").split("/")
        found = ["/"]
        for part in parts:
            nxt = []
            for d in found:
                if not any(c in part for c in "*?["):
                    p = posixpath.join(d, part)
                    if os.path.lexists(p):
                        nxt.append(p)
                    continue
                try:
                    names = os.listdir(d)
                except OSError:  # not a directory, gone, unreadable
                    continue
                nxt.extend(posixpath.join(d, n) for n in names if fnmatch.fnmatchcase(n, part))
            found = nxt
        return sorted(found)


def _is_local(fs: Any) -> bool:
    """Whether ``fs`` (:class:`_LocalFS` or an fsspec filesystem) is this host's files."""
    protocol = getattr(fs, "protocol", ())
    return "file" in ((protocol,) if isinstance(protocol, str) else tuple(protocol))


class LogArchive:
    """An archive of app logs at ``url`` (an fsspec URL or a local path).

    Args:
        url: the archive's root; created on first write.
        storage_options: keyword arguments of the fsspec filesystem.
    """

    def __init__(self, url: str, **storage_options: Any) -> None:
        self.url = url
        self.fs: Any
        if url and ":" not in url and not storage_options:
            self.fs, self.root = _LocalFS(), _LocalFS.root(url)
        else:
            import fsspec  # only for an archive that is not a local directory (~100 ms of imports)

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
                 if _part_key(e["name"]) is not None]
        return sorted(parts, key=lambda p: _part_key(p[0]))  # type: ignore[arg-type,return-value]

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

    def read_blocks(self, handle: str, role: str, k: int, start: int = 0,
                    stop: Optional[int] = None) -> Iterator[bytes]:
        """The archived log of one replica, one block per part (bytes as the backend gave them).

        Args:
            start: the first segment (attempt) read, from 0.
            stop: the segment before which reading stops; None: to the end.
        """
        for path, _size in self._parts(handle, role, k):
            segment = _part_key(path)[0]  # type: ignore[index]
            if stop is not None and segment >= stop:
                break
            if segment >= start:
                yield self.fs.cat_file(path)

    def segments(self, handle: str, role: str, k: int) -> int:
        """How many segments (attempts whose log the backend started again) the archive
        holds of the replica's log: 0 when nothing is archived."""
        parts = self._parts(handle, role, k)
        return _part_key(parts[-1][0])[0] + 1 if parts else 0  # type: ignore[index]

    def earlier_segments(self, handle: str, role: str, k: int, read: BlockReader) -> int:
        """How many of the replica's archived segments come before the attempt whose log the
        backend gives now: copies what is new first (unless the app is complete), so that
        the archive's last segment is that attempt's unless the backend's log is empty.

        Raises:
            OSError: the archive cannot be written.
            BackendReadError: ``read`` failed.
        """
        n = self.segments(handle, role, k)
        if n == 0:
            return 0
        if self.is_complete(handle):  # the backend gives the last attempt's log
            return n - 1
        seen = [0]

        def counted(role: str, k: int) -> Iterator[bytes]:
            for block in read(role, k):
                seen[0] += len(block)
                yield block

        self.copy(handle, [(role, k)], counted)
        if seen[0] == 0:  # the live attempt has written nothing yet: every archived one is earlier
            return self.segments(handle, role, k)
        return self.segments(handle, role, k) - 1

    # -- writing -------------------------------------------------------------------------
    def _write_atomic(self, path: str, data: bytes) -> None:
        tmp = posixpath.join(posixpath.dirname(path), f".tmp-{uuid.uuid4().hex}")
        try:  # a full filesystem fails the write or the close: no half file is left behind
            with self.fs.open(tmp, "wb") as f:
                f.write(data)
            self.fs.mv(tmp, path)
        except BaseException:
            try:
                self.fs.rm(tmp)
            except OSError:
                pass
            raise

    def _write_new(self, path: str, data: bytes) -> bool:
        """Write ``path`` unless it exists; False when it did. Atomic on a local filesystem
        (a hard link fails on an existing name); elsewhere, and where the filesystem has no
        hard links, the caller's check and a move are two steps (fsspec has no create-only
        move)."""
        if not _is_local(self.fs):
            self._write_atomic(path, data)
            return True
        tmp = posixpath.join(posixpath.dirname(path), f".tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError:  # a filesystem without hard links (some network mounts): move
                self.fs.mv(tmp, path)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return True

    def _ensure_dir(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def copy(self, handle: str, replicas: Sequence[Replica], read: BlockReader,
             ended: Optional[str] = None, why: Optional[Dict[str, Any]] = None, why_rank: int = 1) -> int:
        """Copy what is new in each replica's log; with ``ended`` (the app's terminal state),
        then mark the app complete, with ``why`` in the mark (:meth:`recorded_why`).

        Args:
            handle: the app's handle.
            replicas: its replicas.
            read: reads one replica's log from the backend, once (not followed).
            ended: the app's terminal state's name, or None while it runs.
            why: why the app failed, as seen when it ended (JSON-ready; None: nothing to keep).
            why_rank: how much ``why`` says (:meth:`record_why`).

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
            mark: Dict[str, Any] = {"state": ended, "ended": time.time()}
            if why is not None:
                mark["why"] = why
            self._write_atomic(posixpath.join(app_dir, _COMPLETE), json.dumps(mark).encode("utf-8"))
            if why is not None:
                self.record_why(handle, why, why_rank)
        return written

    def record_why(self, handle: str, why: Dict[str, Any], rank: int) -> bool:
        """Keep ``why`` (as :meth:`copy`'s) under ``rank`` (how much it says: 1 how the app
        ended, 2 a last line, 3 a named cause: ``tx.runner.archiver._rank``), unless
        the archive already holds a why of that rank: each rank's first is kept and never
        overwritten, so a later look that read less (a log the backend had not yet given,
        or no longer gives) never replaces a better record, whichever process writes last.

        Returns:
            whether it was written.

        Raises:
            OSError: the archive cannot be written.
        """
        if rank <= 0:
            return False
        path = posixpath.join(self.app_dir(handle), _WHY.format(rank=rank))
        if self.fs.exists(path):
            return False
        return self._write_new(path, json.dumps(why).encode("utf-8"))

    def recorded_why(self, handle: str) -> Optional[Dict[str, Any]]:
        """Why the app failed as recorded when it ended (:meth:`copy`'s ``why``), the best
        of those recorded (:meth:`record_why`'s highest rank, else the ``complete`` mark's);
        None where nothing was recorded (the app is not archived, not complete, or did not
        fail)."""
        app_dir = self.app_dir(handle)
        for name in [_WHY.format(rank=r) for r in range(_TOP_RANK, 0, -1)] + [_COMPLETE]:
            try:
                with self.fs.open(posixpath.join(app_dir, name), "rb") as f:
                    data = json.loads(f.read().decode("utf-8"))
            except (FileNotFoundError, ValueError):
                continue
            why = data.get("why") if name == _COMPLETE and isinstance(data, dict) else data
            if isinstance(why, dict):
                return why
        return None

    def _copy_one(self, handle: str, role: str, k: int, read: BlockReader) -> int:
        parts = self._parts(handle, role, k)
        seg = _segment(parts)
        have = sum(size for _path, size in seg)  # the archived bytes of the current attempt
        last_start = have - seg[-1][1] if seg else 0
        tail_from = have - min(_TAIL, seg[-1][1]) if seg else 0
        h = hashlib.sha256()  # of the backend's bytes before `last_start`, then before `have`
        before_last = ""
        window: List[bytes] = []  # the backend's bytes [tail_from, have)
        new: List[bytes] = []
        pos = 0
        for block in read(role, k):
            end = pos + len(block)
            for lo, hi in ((pos, min(end, last_start)), (max(pos, last_start), min(end, have))):
                if lo < hi:
                    h.update(block[lo - pos:hi - pos])
                if hi == last_start and not before_last:
                    before_last = h.hexdigest()[:16]
            if max(pos, tail_from) < min(end, have):
                window.append(block[max(pos, tail_from) - pos:min(end, have) - pos])
            if end > have:
                new.append(block[max(0, have - pos):])
            pos = end
        restarted = pos < have
        tag = posixpath.basename(seg[-1][0]).rpartition("-")[2] if seg else ""
        if not restarted and tag.startswith(_CONT[1:]):
            restarted = tag != _CONT[1:] + before_last
        if not restarted and seg:
            path, size = seg[-1]
            restarted = self.fs.cat_file(path, start=size - (have - tail_from), end=size) != b"".join(window)
        segment, number = _part_key(seg[-1][0]) if seg else (0, -1)  # type: ignore[misc]
        if restarted:  # a new attempt: read it again, whole (rare), and begin a segment
            data, segment, number, tag = b"".join(read(role, k)), segment + 1, 0, ""
            if data:
                log.warning("the backend's log started again (a new attempt): archiving it after the "
                            "archived one", handle=handle, role=role, replica=k, archived=have, backend=pos)
        else:
            data, number, tag = b"".join(new), number + 1, (_CONT + h.hexdigest()[:16] if seg else "")
        if not data:
            return 0
        d = self._replica_dir(handle, role, k)
        self._ensure_dir(d)
        path = posixpath.join(d, _part_name(segment, number, tag))
        # a part that exists was written by a racing copier from the same archived bytes: it
        # is as good a continuation, and replacing it (with fewer bytes) could leave a gap
        if self.fs.exists(path) or not self._write_new(path, data):
            return 0
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
