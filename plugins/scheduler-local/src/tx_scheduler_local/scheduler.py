"""The ``local_cwd`` and ``local_dir`` schedulers: every replica is a local process.

``schedule`` starts a small supervisor per app (a detached process, see
:mod:`tx_scheduler_local._supervisor`) and returns as soon as it runs. The supervisor
starts the replicas, writes their logs and records states in an on-disk registry under
``$TX_STATE_DIR`` (:mod:`tx_scheduler_local._store`), so apps outlive the process that
launched them and ``describe``, ``list``, ``log_iter``, ``wait`` and ``cancel`` work from
any process.

Signals and lifetime (what the CLI relies on):

* An app runs until it ends or is cancelled, whatever happens to the launching process
  (exit, SIGKILL): it is *detached*. :meth:`LocalScheduler.close` never cancels detached
  apps.
* While this process is in :meth:`LocalScheduler.wait` for an app it launched, SIGINT
  (KeyboardInterrupt) or SIGTERM (when no SIGTERM handler is installed, wait installs one
  that raises ``SystemExit(143)``) cancels that app before the exception propagates.
  ``close()`` called while another thread waits on an app this scheduler launched cancels
  that app too.
* ``cancel`` (from any process) sends SIGINT to the app's supervisor, which sends
  SIGTERM to every replica's process group and, after ``cancel_timeout`` seconds, SIGKILL
  to every process left under it (it is their subreaper, so daemons that called setsid
  are found too). SIGINT delivered to a supervisor by anyone else does the same.
* A SIGTERM that tx did not send is a preemption warning (docs/recovery.md): to the
  supervisor (a host shutting down), it is delivered to every replica, SIGKILL follows
  after the run option ``preempt_grace`` and the app is started again as below; to a
  replica (noted by its job's ``tx.distributed.preempted``, or the replica died of it),
  every replica is warned and all start again, an infra attempt within ``infra_retries``.
* An app lost to the infrastructure (the host rebooted, or its supervisor was killed without
  recording the end) is started again by the next ``describe`` (any tx command, ``list``,
  ``wait``, the failover watcher) while its run option ``infra_retries`` allows, else
  recorded FAILED with an ``infra`` last attempt (README, "Infrastructure failures").
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from tx import get_logger
from tx.schedulers import (
    DEFAULT_INFRA_RETRIES, DescribeAppResponse, ListAppResponse, Scheduler, Stream, add_infra_retries_opt,
    infra_retries)
from tx.specs import (
    AppDef, AppDryRunInfo, CfgVal, InvalidRunConfigException, Role, UnknownAppException, appdef_to_dict, is_terminal,
    make_app_handle, runopts, storable_run_options)
from tx_scheduler_local import _apps, _launch, _listing, _logs, _procs, _scripts, _store, _where
from tx_scheduler_local._relay import TIMES
from tx_scheduler_local.request import (HostMounts, LocalRequest, app_from_json, build_request, dumps_default,
                                        workspace_role)

if TYPE_CHECKING:
    import datetime as _dt

log = get_logger(__name__)

#: seconds after which a directory of the state directory without a request is not an app
#: being launched but a stray (named by describe)
STRAY_AGE_S = 10.0


def nvidia_smi_device_count() -> int:
    """Number of GPUs ``nvidia-smi -L`` lists; 0 if it is missing, fails or times out (10 s)."""
    import subprocess  # only when a role asks for GPUs (selectors and more: off a CPU app's path)

    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    if out.returncode != 0:
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.strip())


class LocalScheduler(HostMounts, Scheduler[LocalRequest]):
    """Runs each replica as a local process, supervised by a detached per-app supervisor
    (mounts: :class:`~tx_scheduler_local.request.HostMounts`).

    Args:
        session_name: the session part of app handles and of log paths.
        backend: the registered name (``local_cwd`` or ``local_dir``).
        image_is_dir: ``local_dir`` semantics: ``role.image`` is an existing directory the
            replicas run in, their entrypoint looked up there first.
        state_dir: where the registry lives (default ``$TX_STATE_DIR``, else
            ``${XDG_STATE_HOME:-~/.local/state}/tx``).
        cuda_device_count: returns the host's GPU count (default: ``nvidia-smi -L``).
        supervisor: how supervisors start: ``auto`` (fork when this process has a single
            thread, else a fresh interpreter), ``fork`` or ``exec``.
        extra_paths: directories put first on every replica's PATH.
    """

    runs_on_host = True

    def __init__(
        self,
        session_name: str,
        backend: str = "local_cwd",
        *,
        image_is_dir: bool = False,
        state_dir: Optional[str] = None,
        cuda_device_count: Optional[Callable[[], int]] = None,
        supervisor: str = "auto",
        extra_paths: Optional[List[str]] = None,
    ) -> None:
        super().__init__(backend, session_name)
        self.extra_paths = [os.path.abspath(p) for p in (extra_paths or [])]
        if supervisor not in _launch.METHODS:
            raise ValueError(f"supervisor must be one of {', '.join(_launch.METHODS)}, got {supervisor!r}")
        self.image_is_dir = image_is_dir
        self.state_dir = os.path.abspath(state_dir) if state_dir else _store.default_state_dir()
        self.apps_dir = _store.apps_dir(self.state_dir)
        self._device_count = cuda_device_count or nvidia_smi_device_count
        self._method = supervisor
        self._terminal: Dict[str, DescribeAppResponse] = {}
        self._requests: Dict[str, Dict[str, Any]] = {}
        self._roles: Dict[str, Optional[AppDef]] = {}  # app id -> the stored AppDef
        self._launched: Set[str] = set()
        self._waiting: Dict[str, int] = {}
        self._lock = threading.Lock()

    # -- options and dryrun -------------------------------------------------------------------
    def _run_opts(self) -> runopts:
        where = "role.image" if self.image_is_dir else "the current directory"
        opts = runopts()
        opts.add(
            "log_dir", type_=str, default=None,
            help="directory of the replicas' logs: <log_dir>/<session>/<app_id>/<role>/<replica>/"
            "{stdout,stderr,combined}.log (default: <tmp>/tx-<uid>); made with its missing parents when "
            "the app runs (a dryrun makes nothing); refused if it or its nearest existing parent is "
            "not a directory",
        )
        opts.add("prepend_cwd", type_=bool, default=False,
                 help=f"put {where} first on the replicas' PATH (default: last)")
        opts.add(
            "auto_set_cuda_visible_devices", type_=bool, default=False,
            help="give each replica its own GPUs (CUDA_VISIBLE_DEVICES, contiguous ranges in "
            "role then replica order) when the host has enough (nvidia-smi -L)",
        )
        opts.add(
            "cancel_timeout", type_=float, default=10.0,
            help="seconds between SIGTERM and SIGKILL when the app is cancelled or replicas "
            "are stopped for a restart",
        )
        opts.add(
            "preempt_grace", type_=float, default=30.0,
            help="seconds between a preemption warning (a SIGTERM tx did not send, to a replica or "
            "to the app's supervisor: delivered to every replica, TX_PREEMPT_GRACE in their env) and SIGKILL",
        )
        add_infra_retries_opt(opts)  # the host rebooted, or the app's supervisor was killed
        return opts

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        # resources are not enforced locally, so roles without one are fine
        infra_retries(cfg)  # a negative one is refused here, not when the host reboots
        for name in ("cancel_timeout", "preempt_grace"):
            timeout = cfg.get(name)
            if timeout is not None and float(timeout) < 0:  # type: ignore[arg-type]
                raise InvalidRunConfigException(
                    f"run option '{name}' must be >= 0 seconds, got {timeout!r}", name, cfg
                )

    def build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> Optional[Role]:
        """The first role runs in the workspace directory (``request.workspace_role``)."""
        return workspace_role(role, workspace, self.image_is_dir)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[LocalRequest]:
        req = build_request(
            app, cfg, scheduler=self.backend, session=self.session_name,
            image_is_dir=self.image_is_dir, device_count=self._device_count,
            warn=lambda text: log.warning(text, app=app.name), extra_paths=self.extra_paths,
        )
        return AppDryRunInfo(req, fmt=str)

    # -- schedule -------------------------------------------------------------------------------
    def schedule(self, dryrun_info: AppDryRunInfo[LocalRequest]) -> str:
        """Start the app's supervisor and return the app id once it runs.

        Raises:
            FileExistsError: this request (its app id) was already scheduled.
            RuntimeError: the default log directory is not private to this user.
            tx_scheduler_local._launch.SupervisorStartError: the supervisor did not start
                (the app is recorded as FAILED).
        """
        req = dryrun_info.request
        app = dryrun_info._app
        _scripts.check_scripts(app, req)  # a missing script fails before anything starts
        _procs.check_fd_limit(sum(len(r.replicas) for r in req.roles))
        _store.ensure_log_root(req.log_root, is_default=not dryrun_info._cfg.get("log_dir"))
        os.makedirs(os.path.join(req.log_root, req.session), exist_ok=True)
        try:
            os.mkdir(req.log_dir)
        except FileExistsError:
            raise FileExistsError(f"app {req.app_id} was already scheduled (log directory {req.log_dir} exists)") from None
        os.makedirs(self.apps_dir, exist_ok=True)
        app_dir = os.path.join(self.apps_dir, req.app_id)
        # the app's registry entry is made whole in a hidden directory, then renamed into
        # place: a launcher killed half-way leaves no entry without a state (``.``-names
        # are never apps; `tx gc` removes them)
        tmp_dir = os.path.join(self.apps_dir, f".new-{req.app_id}-{os.getpid()}")
        try:
            data = self._write_entry(dryrun_info, tmp_dir, app_dir)
        except BaseException:
            # nothing of an app that never started is left behind (its log directory is
            # empty: the supervisor makes the replicas' directories); shutil (zlib, bz2,
            # lzma) only on this failure
            import shutil

            shutil.rmtree(tmp_dir, ignore_errors=True)
            shutil.rmtree(req.log_dir, ignore_errors=True)
            raise
        try:
            pid = _launch.start_supervisor(data, app_dir, self._method)
        except BaseException as e:
            _apps.finalize_orphan(app_dir, data, "FAILED", f"the supervisor did not start: {e}")
            raise
        with self._lock:
            self._launched.add(req.app_id)
            self._requests[req.app_id] = data
        log.debug("scheduled", app_id=req.app_id, supervisor_pid=pid, log_dir=req.log_dir)
        return req.app_id

    def _write_entry(self, dryrun_info: AppDryRunInfo[LocalRequest], tmp_dir: str, app_dir: str) -> Dict[str, Any]:
        """Make the app's registry entry whole in ``tmp_dir``, rename it to ``app_dir`` and
        return the request data written."""
        req = dryrun_info.request
        app = dryrun_info._app
        os.mkdir(tmp_dir)
        data = req.to_json()
        data["submitted"] = time.time()
        # the whole AppDef, through core's converter: describe from any process rebuilds it
        data["app"] = appdef_to_dict(app) if app else {"name": req.app_name, "roles": []}
        # the run options it was submitted with (resolved: defaults included; JSON-safe values,
        # as the other schedulers keep them in the AppDef's copy), for describe
        data["run_options"] = storable_run_options(dryrun_info._cfg)
        me = os.getpid()
        _store.write_json_atomic(os.path.join(tmp_dir, _store.STATE), {
            "app_id": req.app_id, "state": "SUBMITTED", "launcher_pid": me,
            "launcher_start": _procs.start_time(me), "num_restarts": 0, **_where.here(),
        })
        _store.write_json_atomic(os.path.join(tmp_dir, _store.REQUEST), data, default=dumps_default)
        _listing.write_summary(tmp_dir, data)
        os.rename(tmp_dir, app_dir)
        return data

    # -- queries ---------------------------------------------------------------------------------
    def _request(self, app_id: str) -> Optional[Dict[str, Any]]:
        req = self._requests.get(app_id)
        if req is None and _store.valid_app_id(app_id):
            req = _apps.read_request(os.path.join(self.apps_dir, app_id))
            if req is not None:
                self._requests[app_id] = req
        return req

    def _app(self, app_id: str, request: Dict[str, Any]) -> Optional[AppDef]:
        """The AppDef stored with the request (None for a request without one)."""
        if app_id not in self._roles:
            self._roles[app_id] = app_from_json(request.get("app") or {})
        return self._roles[app_id]

    @staticmethod
    def _check_stray(app_dir: str) -> None:
        """Raise :class:`~tx_scheduler_local._store.BadStateFile` naming ``app_dir`` when an
        app's place in the state directory holds something that is not an app: a file, or
        a directory without a request older than :data:`STRAY_AGE_S` (a younger one may be
        an app that another process is launching right now)."""
        try:
            st = os.stat(app_dir)
        except OSError:
            return
        if not os.path.isdir(app_dir):
            raise _store.BadStateFile(app_dir, "is a file, not an app directory: not an app of tx")
        if time.time() - st.st_mtime > STRAY_AGE_S:
            raise _store.BadStateFile(app_dir, f"holds no {_store.REQUEST}: not an app of tx (or its request "
                                      "was deleted)")

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's state, replicas (states, exit codes, stderr tails), restarts, attempts
        and roles; None for an unknown app id. An app whose supervisor is gone without
        recording its end is finalized here, or, if the infrastructure lost it, started
        again within ``infra_retries``. A terminal description is cached: treat it as
        read-only."""
        cached = self._terminal.get(app_id)
        if cached is not None:
            return cached
        request = self._request(app_id)
        app_dir = os.path.join(self.apps_dir, app_id)
        if request is None:
            if _store.valid_app_id(app_id):  # `..` or a dotted name is no app, never a place to look
                self._check_stray(app_dir)
            return None
        state_path = os.path.join(app_dir, _store.STATE)
        state = _store.read_json(state_path)
        if state is None:
            if os.path.exists(os.path.join(app_dir, _store.REQUEST)):  # damaged, not deleted
                raise _store.BadStateFile(state_path, "is missing (the app's state was deleted?)")
            # its registry entry was deleted (tx gc)
            self._requests.pop(app_id, None)
            self._roles.pop(app_id, None)
            return None
        _apps.check_state(state, state_path)
        if state.get("state") not in _store.TERMINAL and not _apps.is_running(state):
            state = _store.read_json(state_path) or {}
            if state.get("state") not in _store.TERMINAL and not _apps.is_running(state):
                infra, why = _apps.why_lost(state, app_id, app_dir)
                if infra:
                    state = self._restart_lost(app_id, app_dir, request, state, why)
                else:
                    state = _apps.finalize_orphan(app_dir, request, "FAILED", why)
        where = _where.elsewhere(state) if state.get("state") not in _store.TERMINAL else None
        if where is not None:
            who = f"its supervisor (pid {state['pid']})" if state.get("pid") else "its launcher"
            state = {**state, "msg": f"last recorded state {state.get('state')}; {who} runs {where}, "
                     "cannot be checked from here"}
        app = self._app(app_id, request)
        desc = _apps.to_describe(state, request, list(app.roles) if app else [], app_dir)
        desc.app = app
        if where is not None:
            desc.metadata["elsewhere"] = where
        if is_terminal(desc.state):
            self._terminal[app_id] = desc
        return desc

    def _restart_lost(self, app_id: str, app_dir: str, request: Dict[str, Any], state: Dict[str, Any],
                      why: str) -> Dict[str, Any]:
        """An app the infrastructure lost (``why``, :func:`tx_scheduler_local._apps.why_lost`):
        start it again under a new supervisor while its run option ``infra_retries`` allows
        (the roles' ``max_retries`` are not spent), else record it FAILED with an ``infra``
        last attempt. Returns the state now on disk."""
        try:
            limit = infra_retries(request.get("run_options") or {})
        except InvalidRunConfigException:
            limit = DEFAULT_INFRA_RETRIES
        used = int(state.get("infra_used") or 0)
        if used >= limit:
            why += f"; infra_retries={limit} exhausted" if limit else "; infra_retries=0: not restarted"
            return _apps.finalize_orphan(app_dir, request, "FAILED", why, infra=True)
        if _apps.prepare_restart(app_dir, request, why) is not None:
            log.warning(f"{app_id}: {why}; restarting it (infra retry {used + 1}/{limit})")
            try:  # a reboot empties a tmpfs /tmp, where the default log root is
                if request.get("log_root"):
                    _store.ensure_log_root(request["log_root"],
                                           is_default=not (request.get("run_options") or {}).get("log_dir"))
                _launch.start_supervisor(request, app_dir, self._method)
            except Exception as e:  # noqa: BLE001 - recorded as the app's end, said once
                return _apps.finalize_orphan(app_dir, request, "FAILED",
                                             f"{why}; its restart failed: {_one_line(e)}", infra=True)
        return _store.read_json(os.path.join(app_dir, _store.STATE)) or state

    def list(self) -> List[ListAppResponse]:
        """Every app of this scheduler (not the other local one's, in the same state directory) of every session,
        newest first, handles filled, each a :class:`~tx_scheduler_local._listing.LocalListAppResponse`
        (``submitted``, ``ended``: epoch seconds). Reads each app's small summary and state files only."""
        return list(_listing.list_apps(self.apps_dir, self.describe, scheduler=self.backend))

    def list_page(self, limit: Optional[int] = None, offset: int = 0, states: Any = None, name: Any = None) -> Any:
        """A page of :meth:`list` in memory bounded by the page (:func:`tx.schedulers.paging.list_page`)."""
        return _listing.list_page(self.apps_dir, self.describe, limit, offset, states, name, scheduler=self.backend)

    def prune(self, keep: float, dry_run: bool = False) -> List[ListAppResponse]:
        """Delete the state and logs of every app of this scheduler (as :meth:`list`, every session) that ended
        more than ``keep`` seconds ago; apps that are not finished are never touched. Returns the apps deleted
        (``dry_run``: that would be), oldest first. Used by ``tx gc``."""
        if keep < 0:
            raise ValueError(f"keep must be >= 0 seconds, got {keep}")
        gone = _listing.prune(self.apps_dir, keep, self.describe, dry_run=dry_run, scheduler=self.backend)
        if not dry_run:
            for a in gone:
                self._terminal.pop(a.app_id, None)
                self._requests.pop(a.app_id, None)
                self._roles.pop(a.app_id, None)
        return list(gone)

    # -- cancel -----------------------------------------------------------------------------------
    def _cancel_existing(self, app_id: str) -> None:
        """Ask the supervisor to stop the app (SIGINT to it); returns at once. If the
        supervisor is gone, kill what is left of the app and record it CANCELLED."""
        request = self._request(app_id)
        if request is None:
            return
        app_dir = os.path.join(self.apps_dir, app_id)
        deadline = time.monotonic() + 10.0
        while True:
            state = _store.read_json(os.path.join(app_dir, _store.STATE)) or {}
            if state.get("state") in _store.TERMINAL:
                return
            where = _where.elsewhere(state)
            if where is not None:
                raise ValueError(f"app {app_id} runs {where}: its processes cannot be reached from here; "
                                 "cancel it there")
            if state.get("pid"):
                # SIGINT: a SIGTERM that tx did not send is a preemption warning (docs/recovery.md)
                if _procs.signal_process(state["pid"], state.get("pid_start"), signal.SIGINT):
                    log.debug("cancel", app_id=app_id, supervisor_pid=state["pid"])
                    return
                break
            # the supervisor is starting (another process launches it): give it a moment
            if not _apps.is_running(state) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        _apps.finalize_orphan(app_dir, request, "CANCELLED", "cancelled")
        self._terminal.pop(app_id, None)

    # -- logs ---------------------------------------------------------------------------------------
    def _replica_file(self, app_id: str, role_name: str, k: int, streams: Any) -> Tuple[str, Stream, Dict[str, Any]]:
        request = self._request(app_id)
        if request is None:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        path, stream = _logs.replica_file(self.apps_dir, app_id, request, role_name, k, streams)
        return path, stream, request

    def _blocks(self, app_id: str, path: str, should_tail: bool) -> Iterator[Tuple[int, bytes]]:
        app_dir = os.path.join(self.apps_dir, app_id)

        def looked() -> bool:  # a describe, only once state.json changed (unless_state_changed)
            desc = self.describe(app_id)
            return desc is None or is_terminal(desc.state)

        state = _store.read_json(os.path.join(app_dir, _store.STATE)) or {}
        pid = state.get("pid") if should_tail and _where.elsewhere(state) is None else None
        with _logs.open_notifier(app_dir, pid) as n:
            yield from _logs.iter_blocks(path, _logs.unless_state_changed(app_dir, looked, n), should_tail, n)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[_dt.datetime] = None,
        until: Optional[_dt.datetime] = None,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name``, each with its ``\\n``, every attempt
        in order (restarts append to the same files).

        Args:
            regex: keep the lines where it is found (``re.search``).
            since, until: keep lines that arrived in ``[since, until]`` (datetimes, naive
                ones in local time, or seconds since the epoch). Arrival times are recorded
                by the supervisor per block of output, to within a millisecond.
            should_tail: follow the file until the app is terminal.
            streams: ``stdout``, ``stderr`` or ``combined`` (default).

        Raises:
            tx.specs.UnknownAppException: unknown app id.
            ValueError: unknown role, replica or stream.
        """
        path, stream, _req = self._replica_file(app_id, role_name, k, streams)
        t0, t1 = _logs.epoch(since), _logs.epoch(until)
        index = None
        if t0 is not None or t1 is not None:
            index = _logs.TimeIndex(os.path.join(os.path.dirname(path), TIMES), _logs.STREAM_CODE[stream])
        return _logs.iter_lines(self._blocks(app_id, path, should_tail), regex, t0, t1, index)

    def log_iter_blocks(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        should_tail: bool = False,
        streams: Optional[Any] = None,
    ) -> Iterable[bytes]:
        """The bytes of the replica's log in whole-line blocks of up to ~1 MiB, read
        straight from the file (no decoding); see :meth:`log_iter`.

        Raises:
            tx.specs.UnknownAppException: unknown app id.
            ValueError: unknown role, replica or stream.
        """
        path, _stream, _req = self._replica_file(app_id, role_name, k, streams)
        return (block for _off, block in self._blocks(app_id, path, should_tail))

    # -- wait ---------------------------------------------------------------------------------------
    def wait(
        self, app_id: str, timeout: Optional[float] = None, poll_interval: float = 1.0
    ) -> Optional[DescribeAppResponse]:
        """Block until the app is terminal or ``timeout`` seconds pass; woken by inotify on
        the app's state file and by its supervisor's exit (pidfd), no polling on Linux.
        ``poll_interval`` only bounds the sleeps where inotify is missing.

        If SIGINT or SIGTERM interrupts the wait on an app this scheduler launched, the
        app is cancelled and the exception (KeyboardInterrupt, ``SystemExit(143)``)
        propagates. Returns the last description (None for an unknown app).
        """
        desc = self.describe(app_id)
        if desc is None or is_terminal(desc.state):
            return desc
        deadline = None if timeout is None else time.monotonic() + timeout
        app_dir = os.path.join(self.apps_dir, app_id)
        restore: Callable[[], None] = _nothing
        with self._lock:
            self._waiting[app_id] = self._waiting.get(app_id, 0) + 1
        try:
            restore = _install_sigterm()
            pid = None if desc.metadata.get("elsewhere") else desc.metadata.get("supervisor_pid")
            with _logs.open_notifier(app_dir, pid) as n:
                while True:
                    desc = self.describe(app_id)
                    if desc is None or is_terminal(desc.state):
                        return desc
                    now = None if desc.metadata.get("elsewhere") else desc.metadata.get("supervisor_pid")
                    if now and now != pid:  # restarted after the infrastructure lost it
                        pid = now
                        n.watch_process(pid)
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return desc
                    cap = 1.0 if n.available else max(poll_interval, 0.001)
                    n.wait(cap if left is None else min(cap, left))
        except (KeyboardInterrupt, SystemExit):
            if app_id in self._launched:
                log.warning("interrupted while waiting: cancelling the app", app_id=app_id)
                self.cancel(app_id)
            raise
        finally:
            with self._lock:
                self._waiting[app_id] -= 1
                if not self._waiting[app_id]:
                    del self._waiting[app_id]
            restore()

    def close(self) -> None:
        """Cancel the apps this scheduler launched that a thread is waiting on right now;
        every other app (detached) keeps running. Idempotent."""
        with self._lock:
            waited = [a for a in self._waiting if a in self._launched]
        for app_id in waited:
            self.cancel(app_id)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _nothing() -> None:
    return None


def _install_sigterm() -> Callable[[], None]:
    """In the main thread, if SIGTERM has its default action, make it raise
    ``SystemExit(143)`` until the returned function is called."""
    if threading.current_thread() is not threading.main_thread():
        return _nothing
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return _nothing

    def on_term(_sig: int, _frame: Any) -> None:
        raise SystemExit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _own_kwargs() -> Set[str]:
    """:class:`LocalScheduler`'s keyword-only arguments; other factory kwargs are ignored
    (a Runner passes its ``scheduler_params`` to every scheduler)."""
    import inspect

    params = inspect.signature(LocalScheduler.__init__).parameters.values()
    return {p.name for p in params if p.kind == p.KEYWORD_ONLY} - {"image_is_dir"}


def _check_cache_size(kwargs: Dict[str, Any]) -> None:
    """TorchX 0.7.0's factory refuses ``cache_size`` < 1 (``get_runner(cache_size=0)``)."""
    size = kwargs.get("cache_size")
    if size is not None and size < 1:
        raise ValueError(f"cache_size must be greater than zero, got {size}")


def create_cwd_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Factory of ``local_cwd``: replicas run in the current directory, image ignored.

    ``kwargs``: :class:`LocalScheduler`'s keyword arguments (``state_dir``,
    ``cuda_device_count``, ``supervisor``, ``extra_paths``); others are ignored, but
    TorchX's ``cache_size`` is checked as TorchX does (apps are kept on disk, not in memory).

    Raises:
        ValueError: ``cache_size`` below 1.
    """
    _check_cache_size(kwargs)
    own = _own_kwargs()
    return LocalScheduler(session_name, "local_cwd", image_is_dir=False,
                          **{k: v for k, v in kwargs.items() if k in own})


def create_dir_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Factory of ``local_dir``: replicas run in ``role.image``, an existing directory.
    Arguments as :func:`create_cwd_scheduler`."""
    _check_cache_size(kwargs)
    own = _own_kwargs()
    return LocalScheduler(session_name, "local_dir", image_is_dir=True,
                          **{k: v for k, v in kwargs.items() if k in own})
