"""The archive floor's runner side: it keeps :class:`tx.runner.archive.LogArchive` up to
date from the engine's lifecycle events, and reads a replica's log from the backend or, where
the backend no longer has it, from the archive (docs/recovery.md).

:class:`Archiver` subscribes to :class:`tx.runner.engine.Engine`: an app seen terminal (by a
status or a wait) has what is new of its logs copied and is marked complete; an app being
waited for has its logs copied every ``[tx:logs] interval`` seconds; an app about to be
cancelled has its logs copied first; an app that failed has why (its root cause: rank,
exception, file:line, exit status or signal) recorded beside its logs when the archive marks
it complete, and a later look at it whose backend answer names no better cause (the
backend's log is gone) answers with the record (:meth:`Archiver.amend`, a read).
The last copy of an app a wait saw end, on a scheduler
whose replicas run on this host, is made by a detached process
(:mod:`tx.runner._archive_copier`): the waiting caller pays nothing for it. Nothing else calls it to copy: the runner's reads do
not write the archive themselves.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional

import attrs

from tx.config.recovery import archive_url
from tx.log import get_logger
from tx.runner.engine import Engine
from tx.runner.handles import AppRef
from tx.schedulers.api import SchedulerError
from tx.schedulers.why import names_cause
from tx.specs.api import NONE, AppState, UnknownAppException, is_terminal
from tx.specs.status import RootCause

if TYPE_CHECKING:
    from tx.runner.archive import LogArchive

__all__ = ["Archiver"]

log = get_logger(__name__)
_UNSET: Any = object()


def _backend_log_reader(engine: Engine, ref: AppRef) -> Callable[[str, int], Iterator[bytes]]:
    """The reader :class:`tx.runner.archive.LogArchive` copies from: one replica's whole log
    from the backend, as blocks of bytes; any failure of the backend raised as
    ``BackendReadError``."""
    # the archive's module (fsspec) is loaded by log_archive, before a reader is asked for
    from tx.runner.archive import BackendReadError

    def read(role: str, k: int) -> Iterator[bytes]:
        try:
            yield from engine.log_blocks(ref, role, k, should_tail=False)
        except Exception as e:  # noqa: BLE001 - any backend failure: the caller decides
            raise BackendReadError(f"{role}/{k}: {e}") from e

    return read


class Archiver:
    """Copies the logs of the apps ``engine`` sees into the log archive, and reads them back.

    Args:
        engine: the engine whose lifecycle events it subscribes to.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._log_archive: Any = _UNSET
        self._from_settings = False  # the archive is the settings' (another process can open it)
        self._waited: set = set()  # handles of apps a wait followed, until seen terminal
        self._warned = False
        # a cancelled app's logs are copied first: Kubernetes deletes the pods, and their logs, with it
        engine.subscribe(terminal=self._on_terminal, follow=self.follow, cancelling=self.archive_logs,
                         amend=self.amend)

    def amend(self, ref: AppRef, desc: Any) -> Any:
        """``desc`` (a FAILED app's :class:`tx.schedulers.DescribeAppResponse`) with why it
        failed as recorded when it ended (:meth:`tx.runner.archive.LogArchive.recorded_why`),
        where the record names a better cause than the backend's answer (the backend lost
        the log the cause was read from): the app's and the failed replicas'
        ``structured_error_msg`` and ``root_cause``, and the failed attempts' reasons. Only
        reads; any other ``desc`` is returned as it is. Never raises."""
        if desc is None or desc.state != AppState.FAILED or _rank(desc.root_cause, desc.structured_error_msg) >= 3:
            return desc
        try:
            archive = self.log_archive
            why = archive.recorded_why(ref.handle) if archive is not None else None
            cause = _cause(why.get("root_cause")) if why else None
        except Exception as e:  # noqa: BLE001 - a look answers with the backend's words then
            log.debug("log archive: no recorded cause", handle=ref.handle, error=str(e))
            return desc
        if not why or _rank(cause, why.get("structured_error_msg")) <= _rank(desc.root_cause,
                                                                            desc.structured_error_msg):
            return desc
        return _with_why(desc, why, cause)

    def _on_terminal(self, ref: AppRef, desc: Any) -> None:
        if ref.handle in self._waited:
            self._waited.discard(ref.handle)
            self._archive_ended(ref, desc)
        else:
            self.archive_logs(ref, desc, catch_up=True)

    def _archive_wanted(self) -> bool:
        """Whether there is an archive to copy into, without opening it (fsspec stays
        unloaded while the setting alone answers)."""
        if self._log_archive is _UNSET:
            try:
                return archive_url() is not None
            except ValueError:
                pass  # log_archive warns
        return self.log_archive is not None

    def _archive_ended(self, ref: AppRef, desc: Any) -> None:
        """The last copy of an app a wait saw end. For a scheduler whose replicas run on this
        host (``runs_on_host``), with the archive of the settings (``[tx:logs]``) and
        ``last_copy = detached`` (the default), a detached process makes it
        (:mod:`tx.runner._archive_copier`) and the waiting caller pays nothing; else (an
        archive set in code, scheduler factories or parameters another process cannot
        rebuild, a remote backend) it is made here, before the wait returns."""
        engine = self.engine
        url = None
        if getattr(engine.scheduler(ref.scheduler), "runs_on_host", False) \
                and engine.scheduler_factories is None and not engine.scheduler_params \
                and (self._log_archive is _UNSET or self._from_settings):
            # settings are read where they are used
            from tx.config.recovery import last_copy_detached

            try:
                url = archive_url() if last_copy_detached() else None
            except ValueError as e:
                self._warn(str(e))
                return
            if url is None and archive_url() is None:
                return  # `archive = off`
        if url is not None:
            try:
                _start_copier(engine.session, ref.handle, url)
                return
            except OSError as e:  # no process: copy here
                log.debug("log archive: no detached copier", handle=ref.handle, error=str(e))
        self.archive_logs(ref, desc, catch_up=True)

    @property
    def log_archive(self) -> Optional["LogArchive"]:
        """The archive (default: ``[tx:logs] archive``, else under tx's state directory);
        None: no archive. Settable."""
        if self._log_archive is _UNSET:
            try:
                url = archive_url()
                if url is None:  # `archive = off`: fsspec (and asyncio under it) stay unloaded
                    self._log_archive = None
                    return None
                # fsspec only once logs are archived or read
                from tx.runner.archive import LogArchive

                self._log_archive = LogArchive(url)
                self._from_settings = True
            except (ValueError, ImportError, OSError) as e:
                self._warn(f"cannot open the log archive: {e}")
                self._log_archive = None
        return self._log_archive

    @log_archive.setter
    def log_archive(self, archive: Optional["LogArchive"]) -> None:
        self._log_archive = archive
        self._from_settings = False

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(f"{text}; the app runs on, its logs are not archived")

    def _replicas_of(self, ref: AppRef, desc: Any) -> List[tuple]:
        app = self.engine.apps.get(ref.handle) or getattr(desc, "app", None)
        roles = list(app.roles) if app is not None else list(getattr(desc, "roles", None) or [])
        if roles:
            return [(r.name, k) for r in roles for k in range(r.num_replicas)]
        return [(rs.role, k) for rs in getattr(desc, "roles_statuses", None) or []
                for k in range(len(rs.replicas))]

    def archive_logs(self, ref: AppRef, desc: Any = None, catch_up: bool = False) -> int:
        """See :meth:`tx.runner.Runner.archive_logs`. Never raises; returns bytes written."""
        archive = self.log_archive
        if archive is None:
            return 0
        # the archive's module (fsspec) is loaded by log_archive above
        from tx.runner.archive import BackendReadError

        try:
            if catch_up and archive.is_complete(ref.handle):
                why = why_of(desc) if desc is not None else None
                if why is not None:  # a look that reads more than the one that saw the end
                    archive.record_why(ref.handle, why, _rank(desc.root_cause, desc.structured_error_msg))
                return 0
            if desc is None:
                desc = self.engine.describe_raw(ref)
                if desc is None:
                    return 0
            replicas = self._replicas_of(ref, desc)
            ended = desc.state.name if is_terminal(desc.state) else None
            return archive.copy(ref.handle, replicas, _backend_log_reader(self.engine, ref), ended=ended,
                                why=why_of(desc), why_rank=_rank(desc.root_cause, desc.structured_error_msg))
        except BackendReadError as e:
            log.debug("log archive: the backend did not give a log", handle=ref.handle, error=str(e))
        except Exception as e:  # noqa: BLE001 - the archive must never harm the run
            self._warn(f"cannot write the log archive at {archive.url}: {e}")
        return 0

    def follow(self, ref: AppRef) -> Callable[[], None]:
        """Copy the app's logs into the archive every ``[tx:logs] interval`` seconds, in a
        thread, until the returned function is called (the archive is opened, and fsspec
        loaded, at the first copy); the app is then marked as waited for: its last copy
        (:meth:`_archive_ended`) is made when it is seen terminal."""
        if not self._archive_wanted():
            return lambda: None
        # settings are read where they are used
        from tx.config.recovery import archive_interval

        try:
            interval = archive_interval()
        except ValueError as e:
            self._warn(str(e))
            return lambda: None
        done = threading.Event()

        def loop() -> None:
            while not done.wait(interval):
                self.archive_logs(ref)

        t = threading.Thread(target=loop, name="tx-log-archive", daemon=True)
        t.start()

        def stop() -> None:
            done.set()
            t.join()
            self._waited.add(ref.handle)

        return stop

    def archived_replicas(self, ref: AppRef) -> Optional[List[tuple]]:
        """``[(role, k), ...]`` the log archive holds for the app, or None."""
        archive = self.log_archive
        return None if archive is None else archive.replicas(ref.handle)

    def blocks(self, ref: AppRef, role_name: str, k: int, should_tail: bool,
               check_known: bool = False) -> Iterator[bytes]:
        """The replica's log from the backend, or from the archive when the backend no
        longer has it: it does not know the app, cannot give the log, or gives nothing
        where the archive holds the app's complete log (a warning says so). With
        ``check_known``, ask the backend first whether it knows the app, and raise
        UnknownAppException when neither it nor the archive does."""
        archive = self.log_archive
        handle = ref.handle

        def archived(why: str) -> Optional[Iterator[bytes]]:
            if archive is None or not archive.has(handle, role_name, k):
                return None
            return _from_archive(archive, handle, role_name, k, why)

        if check_known:
            try:
                known = self.engine.describe_raw(ref) is not None
            except SchedulerError as e:
                found = archived(str(e))
                if found is None:
                    raise
                return found
            if not known:
                found = archived("the backend no longer knows the app")
                if found is None:
                    raise UnknownAppException(handle)
                return found
        try:
            blocks = iter(self.engine.log_blocks(ref, role_name, k, should_tail=should_tail))
        except (UnknownAppException, SchedulerError, OSError) as e:  # e.g. the job's files deleted
            found = archived(str(e) or type(e).__name__)
            if found is None:
                raise
            return found
        earlier = self._earlier_attempts(archive, ref, role_name, k)
        return _unless_gone(blocks, archive, handle, role_name, k, earlier)

    def _earlier_attempts(self, archive: Optional["LogArchive"], ref: AppRef, role: str, k: int) -> int:
        """How many archived attempts of the replica come before the one the backend's log
        holds now (a Kubernetes retry recreates the pod, its log starting from zero); 0
        when there is no archive or it cannot tell (the backend's log is then printed
        alone, as without an archive)."""
        if archive is None:
            return 0
        try:
            return archive.earlier_segments(ref.handle, role, k, _backend_log_reader(self.engine, ref))
        except Exception as e:  # noqa: BLE001 - the archive must never keep the live log from `tx log`
            log.debug("log archive: earlier attempts unknown", handle=ref.handle, error=str(e))
            return 0


def _start_copier(session: str, handle: str, url: str) -> None:
    """Start ``python -m tx.runner._archive_copier SESSION HANDLE URL`` detached (its own
    session, stdio on /dev/null) and return at once; a daemon thread reaps it (init does
    once this process exits).

    Raises:
        OSError: the process cannot be started.
    """
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:  # posix_spawn, not subprocess (selectors and more: ~8 ms of imports under load)
        pid = os.posix_spawn(
            sys.executable, [sys.executable, "-m", "tx.runner._archive_copier", session, handle, url], os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)], setsid=True)
    finally:
        os.close(devnull)
    threading.Thread(target=_reap, args=(pid,), name="tx-archive-copier-reaper", daemon=True).start()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored)
        pass


def _unless_gone(blocks: Iterator[bytes], archive: Optional["LogArchive"],
                 handle: str, role: str, k: int, earlier: int = 0) -> Iterator[bytes]:
    if earlier and archive is not None:  # before the live log, which may be followed
        log.warning(f"{handle} {role}/{k}: printing {earlier} earlier attempt"
                    f"{'s' if earlier > 1 else ''} from tx's log archive, then the backend's log",
                    archive=archive.url)
        yield from archive.read_blocks(handle, role, k, stop=earlier)
    first = next(blocks, None)
    if first is None and archive is not None and archive.is_complete(handle) \
            and archive.size(handle, role, k) > 0:
        if earlier:
            yield from archive.read_blocks(handle, role, k, start=earlier)
        else:
            yield from _from_archive(archive, handle, role, k, "the backend's log is gone")
        return
    if first is not None:
        yield first
    yield from blocks


def _from_archive(archive: "LogArchive", handle: str, role: str, k: int, why: str) -> Iterator[bytes]:
    log.warning(f"{handle} {role}/{k}: reading the log from tx's log archive ({why})",
                archive=archive.url)
    return archive.read_blocks(handle, role, k)


def why_of(desc: Any) -> Optional[Dict[str, Any]]:
    """What is recorded of why a FAILED app failed, from its description as tx saw it end:
    ``{"structured_error_msg", "root_cause", "replicas": [{"role", "id",
    "structured_error_msg", "root_cause"}...], "attempts": [[index, reason]...]}``
    (causes as :meth:`tx.specs.RootCause.to_json`); None for an app that did not fail or
    with no cause at all."""
    if desc.state != AppState.FAILED or (desc.root_cause is None and desc.structured_error_msg in ("", NONE)):
        return None

    def js(c: Optional[RootCause]) -> Optional[Dict[str, Any]]:
        return c.to_json() if c is not None else None

    return {"structured_error_msg": desc.structured_error_msg, "root_cause": js(desc.root_cause),
            "replicas": [{"role": rs.role, "id": r.id, "structured_error_msg": r.structured_error_msg,
                          "root_cause": js(r.root_cause)}
                         for rs in desc.roles_statuses or [] for r in rs.replicas
                         if r.root_cause is not None or r.structured_error_msg not in ("", NONE)],
            "attempts": [[a.index, a.reason] for a in desc.attempts if a.state == AppState.FAILED]}


def _cause(data: Optional[Mapping[str, Any]]) -> Optional[RootCause]:
    if not data:
        return None
    fields = {f.name for f in attrs.fields(RootCause)}
    return RootCause(**{k: v for k, v in data.items() if k in fields})


def _rank(cause: Optional[RootCause], text: Optional[str]) -> int:
    """How much a cause says: 3 names one (an exception, the failing rank), 2 a last line,
    1 only how it ended, 0 nothing."""
    if cause is None:
        return 1 if text not in (None, "", NONE) else 0
    if names_cause(cause):
        return 3
    return 2 if cause.message else 1


def _with_why(desc: Any, why: Mapping[str, Any], cause: Optional[RootCause]) -> Any:
    replicas = {(r["role"], r["id"]): r for r in why.get("replicas") or []}
    roles = []
    for rs in desc.roles_statuses or []:
        reps = []
        for rep in rs.replicas:
            got = replicas.get((rs.role, rep.id))
            if got is not None:
                rep = attrs.evolve(rep, structured_error_msg=got["structured_error_msg"],
                                   root_cause=_cause(got.get("root_cause")))
            reps.append(rep)
        roles.append(attrs.evolve(rs, replicas=reps))
    reasons = {int(i): str(r) for i, r in why.get("attempts") or []}
    attempts = [attrs.evolve(a, reason=reasons[a.index]) if a.state == AppState.FAILED and reasons.get(a.index)
                else a for a in desc.attempts]
    return attrs.evolve(desc, structured_error_msg=why["structured_error_msg"], root_cause=cause,
                        roles_statuses=roles, attempts=attempts)
