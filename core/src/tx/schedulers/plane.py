"""The status plane: one batched look at a backend, shared by every tx process on the host.

A scheduler that opts in answers ``describe`` from a :class:`StatusPlane` snapshot: one
backend call that returns every app it follows (Slurm: one ``squeue`` for all of the user's
jobs) instead of one call per app. The snapshot is a file under tx's state directory
(``<state_dir>/plane/<backend>-<cluster key>.status``) with the time it was fetched; every
process on the host (``tx status`` in several shells, ``tx list``, ``tx ui``, the failover
watcher, the sweep supervisors) reads it while it is younger than its ``max_age``, and
one of them fetches the next one: the fetch runs under an ``fcntl`` lock of a
``.status.lock`` file, so processes that find the snapshot stale at the same moment wait for
that one fetch instead of asking the backend each (a process that dies releases its lock).
The snapshot is replaced whole (written beside it, then renamed), so a reader never sees a
half-written one.

Its age is stated: ``fetched_at`` is taken *before* the backend is asked, so a status is
never older than the age it is shown with. A snapshot is shared for ``max_age`` seconds
after its fetch *ended* (``done_at``): a fetch slower than ``max_age`` (one ``squeue`` of a
10,000-task array and its parsing take over a second) would otherwise be stale when it is
stored, and every look after it, such as a sweep status's describe of each failed trial,
would ask the backend again. A submit or cancel from this host marks the snapshot stale
(:meth:`StatusPlane.invalidate`), so the next look asks the backend.

How old a snapshot may be: ``--fresh`` (:func:`force_fresh`) or ``TX_STATUS_MAX_AGE=0``
always asks; else ``$TX_STATUS_MAX_AGE``, else ``.txconfig`` ``[<scheduler>]
status_max_age_s``, else :data:`DEFAULT_MAX_AGE_S`.

One look at many apps (a sweep's status: one listing, then a describe of each failed
trial; a cancel or resume of a sweep; a failover watcher's tick) is one moment
(:func:`one_look`): a snapshot that was fresh when the look began, or was fetched during it,
serves the whole look whatever its age by then, so that the look asks each backend once
however long its own work takes (on a loaded host, 100 describes outlast a 1 s snapshot:
one sweep status made 5 ``squeue``, a resume 10). With ``--fresh`` the look asks once.

A fetch that fails is shared like an answer where the scheduler asks for it
(``shared_failure``: Slurm's commands): its one-line error is kept beside the snapshot
(``<...>.failed``) for as long as an answer would be, and a look that finds it fresh raises
it again, saying how old it is, instead of asking a backend that just failed (with
slurmctld down, six processes waiting on the lock each waited their whole command timeout
in turn). An answer fetched since, a stale mark or ``--fresh`` asks again.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Type

from tx.config.files import ConfigError, scheduler_section
from tx.schedulers.batch import write_atomic
from tx.schedulers.budget import _file_key, plane_dir

__all__ = ["DEFAULT_MAX_AGE_S", "ENV_MAX_AGE", "Snapshot", "StatusPlane", "force_fresh", "look_since", "max_age_for",
           "one_look"]

#: seconds a snapshot is shared by default: short against a person's eye and a watcher's
#: tick, long enough that many followers polling at once make one call
DEFAULT_MAX_AGE_S = 1.0
#: the environment variable that sets the snapshots' largest age in seconds (0: always ask)
ENV_MAX_AGE = "TX_STATUS_MAX_AGE"

_FRESH = False
_LOOK = threading.local()  # .since: when this thread's current look began (epoch s), else None


@contextlib.contextmanager
def one_look() -> Iterator[float]:
    """Make what this thread does inside the block one look (see the module's doc): a
    snapshot fresh at the block's start (epoch seconds, yielded) or fetched inside it is
    used to its end; a stale mark (a submit or cancel inside it) still makes the next look
    ask. Nested blocks are one, the outermost's."""
    outer = getattr(_LOOK, "since", None)
    since = time.time() if outer is None else outer
    _LOOK.since = since
    try:
        yield since
    finally:
        _LOOK.since = outer


def look_since() -> Optional[float]:
    """When this thread's current look (:func:`one_look`) began, epoch seconds; None outside
    one. A scheduler may keep what it read during a look (a sweep's job, read for its
    trials' states) to answer the rest of that look (each failed trial's describe)."""
    return getattr(_LOOK, "since", None)


def force_fresh(on: bool = True) -> None:
    """Make every look of this process ask the backend (``--fresh``); the answer is still
    shared with the other processes."""
    global _FRESH
    _FRESH = on


def max_age_for(backend: str) -> float:
    """The largest age (seconds) of a snapshot ``backend``'s looks accept (see the module's
    doc for the order).

    Raises:
        ConfigError: a value that is not a number >= 0.
    """
    if _FRESH:
        return 0.0
    text = os.environ.get(ENV_MAX_AGE)
    where = ENV_MAX_AGE
    if text is None or not text.strip():
        text = scheduler_section(backend).get("status_max_age_s")
        where = f".txconfig [{backend}] status_max_age_s"
    if text is None or not text.strip():
        return DEFAULT_MAX_AGE_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or math.isinf(value):
        raise ConfigError(f"{where} must be a number of seconds >= 0, got {text!r}")
    return value


class Snapshot:
    """One answer of the backend: ``items`` (what the scheduler stored, by its key) as of
    ``fetched_at`` (epoch seconds, taken before the backend was asked); ``done_at`` (epoch
    seconds) is when that answer had been read (``fetched_at`` where unknown)."""

    __slots__ = ("fetched_at", "items", "fetched_here", "done_at")

    def __init__(self, fetched_at: float, items: Dict[str, Any], fetched_here: bool = False,
                 done_at: Optional[float] = None) -> None:
        self.fetched_at = fetched_at
        self.items = items
        self.fetched_here = fetched_here  # this call asked the backend
        self.done_at = fetched_at if done_at is None else max(fetched_at, done_at)

    @property
    def age(self) -> float:
        """Seconds since it was fetched (never negative)."""
        return max(0.0, time.time() - self.fetched_at)


class StatusPlane:
    """The shared snapshot of one backend on one cluster (see the module's doc).

    Args:
        backend: the scheduler's name.
        cluster: what names the cluster (as for :class:`tx.schedulers.budget.CallBudget`).
        directory: where its files live (default ``<state_dir>/plane``).
    """

    def __init__(self, backend: str, cluster: str = "", directory: Optional[str] = None) -> None:
        self.backend, self.cluster = backend, cluster
        self._dir = directory
        base = os.path.join(self.directory, _file_key(backend, cluster))
        self.path, self.lock_path, self.stale_path = base + ".status", base + ".status.lock", base + ".stale"
        self.failed_path = base + ".failed"
        self._cache: Optional[Tuple[Tuple[int, int, int], Snapshot]] = None  # (file version, snapshot)

    @property
    def directory(self) -> str:
        return self._dir or plane_dir()

    def _read(self) -> Optional[Snapshot]:
        """The stored snapshot; parsed once per version of the file (a follower of 1,000
        apps reads it 1,000 times a tick)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                st = os.fstat(f.fileno())
                version = (st.st_ino, st.st_mtime_ns, st.st_size)
                if self._cache is not None and self._cache[0] == version:
                    return self._cache[1]
                data = json.load(f)
            fetched_at, items = float(data["fetched_at"]), data["items"]
            done_at = float(data.get("done_at", fetched_at))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not isinstance(items, dict):
            return None
        snap = Snapshot(fetched_at, items, done_at=done_at)
        self._cache = (version, snap)
        return snap

    def _stale_since(self) -> float:
        try:
            return os.stat(self.stale_path).st_mtime
        except OSError:
            return 0.0

    def _fresh(self, snap: Optional[Snapshot], max_age: float, newer_than: Optional[float] = None) -> bool:
        if snap is None or snap.fetched_at < self._stale_since():
            return False
        if newer_than is not None:
            return snap.fetched_at >= newer_than
        since = getattr(_LOOK, "since", None)
        if since is not None and (snap.fetched_at >= since or (max_age > 0 and since - snap.done_at <= max_age)):
            return True  # one look, one moment: fresh at its start, or fetched during it
        # shared for max_age after the fetch ended: a fetch slower than max_age is still used
        return max_age > 0 and time.time() - snap.done_at <= max_age

    def get(self, fetch: Callable[[], Dict[str, Any]], max_age: Optional[float] = None,
            newer_than: Optional[float] = None, shared_failure: Optional[Type[Exception]] = None) -> Snapshot:
        """The snapshot, fetched with ``fetch`` (one batched backend call returning
        JSON-able items by key) when the shared one is older than ``max_age`` seconds
        (default :func:`max_age_for` the backend) or marked stale.

        Args:
            newer_than: epoch seconds; given, a snapshot fetched at or after it is fresh
                whatever its age (``max_age`` is not used): what is read once per answer of
                another snapshot (a Ray driver's state once per job list) and shared.
            shared_failure: an exception class taking one message; a failure of ``fetch``
                that is one is kept and shared as an answer would be (see the module's doc).

        Raises:
            whatever ``fetch`` raises (nothing but the failure, where shared, is stored
            then); ``shared_failure(message)``: another look's fetch failed so, within the
            age an answer would be shared.
        """
        limit = 0.0 if newer_than is not None else max_age_for(self.backend) if max_age is None else max_age
        snap = self._read()
        if self._fresh(snap, limit, newer_than):
            return snap  # type: ignore[return-value]
        if shared_failure is not None:
            self._raise_shared(shared_failure, snap, limit, newer_than)
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # a read-only state directory: nothing is shared
            started = time.time()
            return Snapshot(started, fetch(), fetched_here=True, done_at=time.time())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one fetch at a time; the others wait for it
            snap = self._read()
            if self._fresh(snap, limit, newer_than):
                return snap  # type: ignore[return-value]
            if shared_failure is not None:
                self._raise_shared(shared_failure, snap, limit, newer_than)
            started = time.time()
            try:
                items = fetch()
            except Exception as e:
                if shared_failure is not None and isinstance(e, shared_failure):
                    self._keep_failure(started, e)
                raise
            snap = Snapshot(started, items, fetched_here=True, done_at=time.time())
            self._write(snap)
            return snap
        finally:
            os.close(fd)  # releases the lock

    def _keep_failure(self, started: float, error: Exception) -> None:
        """Keep a failed fetch's one-line error and its class (replacing the file whole)."""
        write_atomic(self.failed_path, json.dumps({
            "backend": self.backend, "fetched_at": started, "done_at": time.time(),
            "type": _type_name(type(error)), "message": " ".join(str(error).split())}), "status plane")

    def _raise_shared(self, cls: Type[Exception], snap: Optional[Snapshot], limit: float,
                      newer_than: Optional[float]) -> None:
        """Raise the kept failure where it is fresh (as an answer would be) and newer than
        the answer ``snap``: as its own class where that is ``cls`` or one of its subclasses
        and takes one message, else as ``cls``."""
        try:
            with open(self.failed_path, encoding="utf-8") as f:
                data = json.load(f)
            failed = Snapshot(float(data["fetched_at"]), {}, done_at=float(data["done_at"]))
            message, kind = str(data["message"]), str(data.get("type", ""))
        except (OSError, ValueError, KeyError, TypeError):
            return
        if snap is not None and snap.fetched_at >= failed.fetched_at:
            return  # answered since
        if not self._fresh(failed, limit, newer_than):
            return
        text = f"{message} (the shared status plane's look {failed.age:.1f} s ago; --fresh asks again)"
        family, error = [cls], None
        while family and error is None:
            c = family.pop()
            family.extend(c.__subclasses__())
            if _type_name(c) == kind:
                try:
                    error = c(text)
                except TypeError:  # its own arguments (a command's argv and stderr)
                    break
        raise error if error is not None else cls(text)

    def last(self) -> Optional[Snapshot]:
        """The stored snapshot whatever its age (None if there is none): a fetch that asks
        only for what changed since reads it (inside :meth:`get`'s fetch, under the lock)."""
        return self._read()

    def _write(self, snap: Snapshot) -> None:
        """Store ``snap`` (replacing the file whole) and remember it as the file's parsed
        version, so that this process does not parse what it has just written."""
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".status-")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"backend": self.backend, "fetched_at": snap.fetched_at, "done_at": snap.done_at,
                           "items": snap.items}, f)
            st = os.stat(tmp)  # a rename keeps the inode, mtime and size: the version _read sees
            os.replace(tmp, self.path)
            self._cache = ((st.st_ino, st.st_mtime_ns, st.st_size), Snapshot(
                snap.fetched_at, snap.items, done_at=snap.done_at))
        except (OSError, TypeError, ValueError):
            try:
                os.unlink(tmp)
            except OSError:
                pass

    def invalidate(self) -> None:
        """Mark the shared snapshot stale (after a submit or cancel from this host): the
        next look asks the backend. A fetch that started before this call and ends after it
        still stores what it saw, with the time it started."""
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(self.stale_path, "w", encoding="utf-8"):
                pass
            now = time.time()
            os.utime(self.stale_path, (now, now))
        except OSError:
            pass


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
