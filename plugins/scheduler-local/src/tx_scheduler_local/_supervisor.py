"""The supervisor of one local app. Standard library only.

One per app: a detached process in its own session, the child subreaper of what it starts. It:
1. starts every replica (``os.posix_spawn``) in its own session, stdin /dev/null, output to pipes;
2. relays the pipes into the replica's log files (:mod:`._relay`);
3. reaps replicas (SIGCHLD), records exit codes, restarts replicas as ``max_retries`` and
   ``retry_policy`` allow, and on a failure without retries left stops the other replicas;
4. on SIGINT (what ``cancel`` sends) stops every replica: SIGTERM to each replica's
   process group, SIGKILL to every remaining descendant after ``cancel_timeout`` seconds;
   a SIGTERM tx did not send (the host shutting down) is a preemption warning
   (:mod:`._preempt`): delivered to every replica, SIGKILL after ``preempt_grace`` seconds,
   then the supervisor exits leaving the app to be started again (an infra attempt); a
   replica warned from outside (its job's note, or its death by the warning signal) makes
   every replica start again, an infra attempt within ``infra_retries``;
5. when no replica is left, kills any descendant still running (daemons a replica left behind:
   it is their subreaper), drains the pipes, writes the final ``state.json``, ``SUCCESS``, exits.

``state.json`` is rewritten atomically at each change, after the output so far: complete logs.

Started by :mod:`._launch` through :mod:`._supervise` (forked, or ``python -m ...``).
"""
from __future__ import annotations

import fcntl
import json
import os
import selectors
import signal
import time
from typing import Any, Dict, List, Optional

from tx.schedulers import APP_ID, REPLICA_ID, ROLE_NAME
from tx_scheduler_local import _memory, _peering, _preempt, _preempting, _procs, _store, _where
from tx_scheduler_local._apps import recorded_cause
from tx_scheduler_local._relay import ERR, OUT, ReplicaLogs
from tx_scheduler_local._replica import (
    Replica, Role, Spawner, exit_reason, failure_line, killed_by_sigkill, oom_reason, os_error_text, raise_fd_limit,
    set_aside_error_file,
)

_READ = 1 << 20
_DRAIN_S = 5.0
_COALESCE_BYTES = 64 << 10
_COALESCE_S = 0.001
_CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # SIGINT cancels; SIGTERM from outside warns
_NEVER = float("inf")


class Supervisor(_preempting.PreemptMixin, _peering.PeerMixin):
    """Runs the app described by ``request`` (the JSON form of the dryrun request) and
    records its state in ``app_dir`` (the app's registry directory)."""

    def __init__(self, request: Dict[str, Any], app_dir: str) -> None:
        self.request = request
        self.app_dir = app_dir
        self.state_path = os.path.join(app_dir, _store.STATE)
        self.grace = float(request.get("cancel_timeout", 10.0))
        self.preempt_grace = float(request.get("preempt_grace", 30.0))
        #: a preemption in progress: {"since": epoch seconds, "entry": its history entry}
        self.preempt: Optional[Dict[str, Any]] = None
        self.preempted_host = ""  # why the supervisor was warned: it leaves once replicas are gone
        self.infra_msg = ""
        self.roles = [Role(r) for r in request["roles"]]
        self.replicas = [r for role in self.roles for r in role.replicas]
        self.by_pid: Dict[int, Replica] = {}
        self.by_fd: Dict[int, Replica] = {}
        self.sel = selectors.DefaultSelector()
        self.state = "PENDING"
        self.msg = ""
        self.error = ""
        self.num_restarts = 0
        #: the attempts that ended in a restart: {"kind": "user" | "infra", "reason": ...}
        self.history: List[Dict[str, str]] = []
        self.infra_used = 0
        self.resumed = False
        self.cancelled = False
        self.failed: Optional[Replica] = None
        # replicas to start again together once all of them are gone: group id -> members,
        # and when their pipes are closed regardless (monotonic seconds)
        self.restart_groups: Dict[int, List[Replica]] = {}
        self.group_deadline: Dict[int, float] = {}
        self._next_group = 0
        self.base_env = dict(os.environ)
        self.started = time.time()
        self.ended: Optional[float] = None
        self.dirty = True
        self.pid = os.getpid()
        self.pid_start = _procs.start_time(self.pid)
        self.where = _where.here()
        self.scope: Optional[str] = None
        self.oom_file: Optional[str] = None
        self.spawner = Spawner()
        self._wake_r, self._wake_w = os.pipe()

    # -- set-up ----------------------------------------------------------------------------
    def setup(self) -> None:
        """Install signal handling and write the first state. Call
        before acknowledging the launch (the subreaper is set in :meth:`run`, before any
        replica starts: it loads ctypes, ~5-13 ms the launcher need not wait for)."""
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        for sig in (signal.SIGCHLD, *_CANCEL_SIGNALS):
            signal.signal(sig, _noop)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        self.sel.register(self._wake_r, selectors.EVENT_READ, None)
        raise_fd_limit(6 * len(self.replicas) + 64)
        with open(os.path.join(self.app_dir, _store.LOCK), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = _store.read_json(self.state_path) or {}
            if current.get("state") in _store.TERMINAL:  # finalized: its launcher died
                raise RuntimeError(f"app already ended {current['state']}: {current.get('msg', '')}")
            if current.get("roles"):  # a restart after the infrastructure lost the app
                self._resume(current)
            self.write_state()

    def _resume(self, current: Dict[str, Any]) -> None:
        """Carry on from the state of an app restarted after the infrastructure lost it
        (:func:`tx_scheduler_local._apps.prepare_restart`): the environment it was launched
        with (``environ.json``), its restarts and their reasons, the roles' spent
        ``max_retries``, each replica's earlier attempts (its logs are appended to) and its
        first start time. Every replica starts again."""
        self.resumed = True
        try:  # the environment it was launched with, not that of the process restarting it
            self.base_env = _store.read_json(os.path.join(self.app_dir, _store.ENVIRON)) or self.base_env
        except _store.BadStateFile as e:
            self._log(f"{e}: the replicas get the environment of the process that restarted the app")
        self.num_restarts = int(current.get("num_restarts") or 0)
        self.history = list(current.get("history") or [])
        self.infra_used = int(current.get("infra_used") or 0)
        self.started = current.get("started") or self.started
        saved = {ro.get("name"): ro for ro in current.get("roles") or []}
        for role in self.roles:
            old = saved.get(role.name) or {}
            role.retries = int(old.get("retries") or 0)
            by_id = {r.get("id"): r for r in old.get("replicas") or []}
            for r in role.replicas:
                r.attempts = list((by_id.get(r.id) or {}).get("attempts") or [])

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> None:
        """Create the log files, start the replicas and supervise them until the app is
        terminal."""
        # subreaper of everything the replicas leave behind, before any of them starts
        _procs.set_child_subreaper()
        _procs.set_process_name("tx-supervisor")
        # a cgroup of the app's own where cgroup v2 allows, so that escapees cannot leave
        # it: entered after the launch is acknowledged (it costs ~14 ms that `tx run` need
        # not wait for) and before any replica starts
        self.scope = _where.make_scope(self.request["app_id"])
        if not self.resumed:  # for a restart after the infrastructure lost the app (0600: secrets)
            _store.write_json_atomic(os.path.join(self.app_dir, _store.ENVIRON), self.base_env, mode=0o600)
        #: the OOM-kill counter of the replicas' memory cgroup (None: unknown)
        self.oom_file = _memory.counter_file()
        if self.scope:
            self.write_state()
        for r in self.replicas:
            r.logs = ReplicaLogs(r.dir)
        for r in self.replicas:
            if self.cancelled or self.failed is not None:
                break
            if not any(r in g for g in self.restart_groups.values()):
                self._spawn(r)
        if self.state == "PENDING" and not self.cancelled and self.failed is None:
            self.state = "RUNNING"
        self.dirty = True
        while True:
            self._advance()
            if not any(r.pid for r in self.replicas) and not self.restart_groups:
                break
            if self.dirty:
                self.write_state()
            got = 0
            for key, _ in self.sel.select(self._timeout()):
                if key.data is None:
                    self._on_wake()
                else:
                    got += self._read(key.fd, key.data)
            self._check_deadlines()
            if 0 < got < _COALESCE_BYTES:
                # output trickles in (e.g. an unbuffered writer, one write per line): let it
                # gather in the pipes a moment instead of waking up for every write
                time.sleep(_COALESCE_S)
        self._finish()

    def _timeout(self) -> Optional[float]:
        deadlines = [d for d in (r.stop_deadline for r in self.replicas) if d is not None and d != _NEVER]
        deadlines.extend([*self.group_deadline.values(), *self._stop_others_deadline()])
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def _on_wake(self) -> None:
        try:
            data = os.read(self._wake_r, 512)
        except BlockingIOError:
            return
        sigs = set(data)
        if signal.SIGCHLD in sigs:
            self._reap()
        if signal.SIGINT in sigs:
            self.cancel()
        elif signal.SIGTERM in sigs:
            self._warned()

    # -- replicas ------------------------------------------------------------------------------
    def _spawn(self, r: Replica) -> None:
        assert r.logs is not None
        offsets = r.logs.new_attempt()
        attempt: Dict[str, Any] = {"n": len(r.attempts), "pid": None, "start": time.time(),
                                   "end": None, "exit_code": None, "offsets": offsets}
        if r.attempts:
            set_aside_error_file(r.dir, len(r.attempts) - 1)
        r.attempts.append(attempt)
        r.exit_code, r.error, r.reason = None, "", ""
        env = dict(self.base_env)
        env.update(r.env)
        _preempt.clear_note(r.dir)
        r.oom_base = _memory.oom_kills(self.oom_file)
        try:
            pid, out_fd, err_fd = self.spawner.spawn(r.role.cwd, r.role.entrypoint, r.argv, env)
        except OSError as e:
            code = 127 if isinstance(e, FileNotFoundError) else 126
            where = "" if self.spawner.in_cwd == r.role.cwd else f" (working directory {r.role.cwd})"
            why = f"could not be started: {r.role.entrypoint}{where}: {os_error_text(e)} (exit code {code})"
            r.logs.note(f"tx: {r.name} {why}")
            attempt["end"], attempt["exit_code"] = time.time(), code
            r.exit_code = code
            self._on_failure(r, code, why)
            self.dirty = True
            return
        for fd, stream in ((out_fd, OUT), (err_fd, ERR)):
            r.pipes[fd] = stream
            self.by_fd[fd] = r
            self.sel.register(fd, selectors.EVENT_READ, r)
        r.pid = attempt["pid"] = pid
        r.state = "RUNNING"
        self.by_pid[pid] = r
        self.dirty = True

    def _read(self, fd: int, r: Replica) -> int:
        """Relay what pipe ``fd`` holds; returns the number of bytes read."""
        if self.by_fd.get(fd) is not r:
            return 0  # closed by a drain earlier in this batch of events
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return 0
        except OSError:
            data = b""
        stream = r.pipes[fd]
        assert r.logs is not None
        if data:
            r.logs.write(stream, data, time.time())
            if r.logs.full is not None:
                self._no_space(r)
            return len(data)
        self._close_pipe(fd, r)
        return 0

    def _close_pipe(self, fd: int, r: Replica) -> None:
        stream = r.pipes.pop(fd)
        self.by_fd.pop(fd, None)
        self.sel.unregister(fd)
        os.close(fd)
        assert r.logs is not None
        r.logs.close_stream(stream)

    def _drain(self, r: Replica) -> None:
        """Read what the replica's pipes hold now (it has exited: no more will come from
        it, though a process it left behind may still write)."""
        for fd in list(r.pipes):
            while fd in r.pipes:
                try:
                    data = os.read(fd, _READ)
                except BlockingIOError:
                    break
                if not data:
                    self._close_pipe(fd, r)
                    break
                assert r.logs is not None
                r.logs.write(r.pipes[fd], data, time.time())
                if r.logs.full is not None:
                    self._no_space(r)

    def _reap(self, only: int = -1) -> bool:
        """Reap the children that exited (``only``: that one); whether one was."""
        reaped = False
        while True:
            try:
                pid, status = os.waitpid(only, os.WNOHANG)
            except ChildProcessError:
                return reaped
            if pid == 0:
                return reaped
            r, reaped = self.by_pid.pop(pid, None), True
            if r is not None:
                self._exited(r, os.waitstatus_to_exitcode(status))

    def _exited(self, r: Replica, code: int) -> None:
        self._drain(r)
        r.pid = None
        r.exit_code = code
        att = r.attempts[-1]
        att["end"], att["exit_code"] = time.time(), code
        self.dirty = True
        reason, r.stop_reason, r.stop_deadline = r.stop_reason, None, None
        if reason in ("restart", "preempt"):
            r.state = "PENDING"
        elif reason == "no space":  # the replica whose logs filled the disk
            r.state = "FAILED"
        elif reason is not None:
            r.state = "CANCELLED"
            r.reason = exit_reason(code)
        elif code == 0:
            r.state = "SUCCEEDED"
        elif self._preempted(r, code):
            return
        else:
            oom = self._oom_killed(r, code)
            self._on_failure(r, code, oom_reason(code, _memory.limit_mb(self.oom_file)) if oom else exit_reason(code),
                             oom)

    def _oom_killed(self, r: Replica, code: int) -> Optional[bool]:
        """Whether the kernel's OOM killer killed replica ``r`` (exit status ``code``): its
        memory cgroup counted an OOM kill since the replica started; None where unknown."""
        if not killed_by_sigkill(code):
            return False
        now = _memory.oom_kills(self.oom_file)
        if now is None or r.oom_base is None:
            return None
        return now > r.oom_base

    def _on_failure(self, r: Replica, code: int, why: str, oom: Optional[bool] = None) -> None:
        assert r.logs is not None
        tail = r.logs.tail_text()
        r.state, r.reason = "FAILED", why
        r.error = failure_line(r.name, why, code, r.dir, tail, oom)
        if self.cancelled or self.failed is not None:
            return
        role = r.role
        if role.retries < role.max_retries:
            role.retries += 1
            self.num_restarts += 1
            if role.policy == "APPLICATION":
                group = list(self.replicas)
            elif role.policy == "ROLE":
                group = list(role.replicas)
            else:  # REPLICA, HOT_SPARE
                group = [r]
            # the reason names the root cause once the attempt's output is complete (_advance)
            r.history_entry = {"kind": "user", "reason": f"replica {r.name} {why}"}
            self.history.append(r.history_entry)
            self._restart(group)
            self._log(f"{r.name} {why}; restart {role.retries}/{role.max_retries} ({role.policy})")
            return
        self.failed = r
        self.msg = f"replica {r.name} {why}" + (f"; last lines of stderr:\n{tail}" if tail else "")
        self.error = r.error
        self._log(self.msg)
        self._stop_others(r)  # now, or (r only lost its peer) once the others had a while to end
        self._drop_restarts()

    def _record_restart_cause(self, r: Replica) -> None:
        """Name the root cause in the ``history`` entry of ``r``'s failed attempt, once its
        output is complete (its pipes closed, before it starts again)."""
        entry, r.history_entry = r.history_entry, None
        if entry is not None:
            cause = recorded_cause(r.role.name, r.to_json(), r.dir)
            if cause is not None:
                entry["reason"] = cause["text"]
                self.dirty = True

    def _restart(self, group: List[Replica]) -> None:
        """Stop the replicas of ``group`` still running; start them all again once all are
        gone (a group that shares a replica with an earlier one is merged into it)."""
        for gid, members in list(self.restart_groups.items()):
            if any(x in group for x in members):
                del self.restart_groups[gid]
                self.group_deadline.pop(gid, None)
                group.extend(x for x in members if x not in group)
        for x in group:
            if x.pid is not None:
                self._stop(x, "restart")
            else:
                x.state = "PENDING"
        self.restart_groups[self._next_group] = group
        self._next_group += 1

    def _drop_restarts(self) -> None:
        for members in self.restart_groups.values():
            for x in members:
                if x.pid is None and x.state == "PENDING":
                    x.state = "CANCELLED"
        self.restart_groups.clear()
        self.group_deadline.clear()

    def _advance(self) -> None:
        """Start the restart groups whose old processes are all gone and whose pipes are
        closed (or were given ``_DRAIN_S`` seconds to close)."""
        for gid, members in list(self.restart_groups.items()):
            if any(x.pid is not None for x in members):
                continue
            if gid not in self.group_deadline:
                self._kill_leftovers(members)
                self.group_deadline[gid] = time.monotonic() + _DRAIN_S
            if any(x.pipes for x in members) and time.monotonic() < self.group_deadline[gid]:
                continue
            del self.restart_groups[gid]
            del self.group_deadline[gid]
            for x in members:
                for fd in list(x.pipes):
                    self._close_pipe(fd, x)
            for x in members:
                self._record_restart_cause(x)
            self._record_saved()
            for x in members:
                if not self.cancelled and self.failed is None:
                    self._spawn(x)

    def _no_space(self, r: Replica) -> None:
        """A log file of ``r`` could not be written for lack of space: the app fails and
        every replica is stopped (their output could not be kept anyway)."""
        if self.failed is not None or self.cancelled:
            return
        assert r.logs is not None
        why = f"no space left on device on {r.logs.full} (writing the logs in {r.dir})"
        self._log(f"{r.name}: {why}: stopping the app")
        self.failed = r
        self.msg = f"replica {r.name}: {why}; replicas stopped"
        self.error = r.error = f"{r.name}: {why}"
        r.reason = why
        for x in self.replicas:
            if x.pid is not None:
                self._stop(x, "no space" if x is r else "failed")
            elif x is r:
                r.state = "FAILED"
        self._drop_restarts()
        self.dirty = True

    # -- stopping -------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop every replica (SIGTERM now, SIGKILL after the grace period); the app ends
        CANCELLED. Idempotent."""
        if self.cancelled:
            return
        self.cancelled = True
        if self.failed is None:
            self.msg = "cancelled"
        self._log("cancel requested")
        self._drop_restarts()
        for r in self.replicas:
            if r.pid is not None:
                self._stop(r, "cancel")
            elif r.state == "PENDING":
                r.state = "CANCELLED"
        self.dirty = True

    def _stop(self, r: Replica, reason: str, grace: Optional[float] = None,
              sig: int = signal.SIGTERM) -> None:
        # one that ended on its own (not yet reaped) before the app's end stopped it keeps its
        # own end: a replica that exited 0 is SUCCEEDED, not CANCELLED (CI, stop 46)
        if reason in ("failed", "cancel") and r.pid is not None and self._reap(r.pid):
            return
        if r.stop_reason is None or reason != "restart":
            r.stop_reason = reason
        if r.stop_deadline is None and r.pid is not None:
            _procs.killpg(r.pid, sig)
            r.stop_deadline = time.monotonic() + (self.grace if grace is None else grace)

    def _check_deadlines(self) -> None:
        self._stop_others_when_due()
        now = time.monotonic()
        late = [r for r in self.replicas if r.pid is not None and r.stop_deadline is not None and r.stop_deadline <= now]
        if not late:
            return
        for r in late:
            self._log(f"{r.name} still running at the end of its grace period: SIGKILL")
            r.stop_deadline = _NEVER
        self._kill_leftovers(late)

    def _kill_leftovers(self, replicas: List[Replica]) -> None:
        """SIGKILL what is left of these replicas: their process groups, and descendants
        that left the group but still carry the replica's environment."""
        wanted = []
        for r in replicas:
            if r.attempts and r.attempts[-1]["pid"]:
                _procs.killpg(r.attempts[-1]["pid"], signal.SIGKILL)
            wanted.append([f"{k}={r.env.get(k, '')}".encode() for k in (APP_ID, ROLE_NAME, REPLICA_ID)])
        for pid in _procs.descendants(self.pid):
            if any(_procs.environ_matches(pid, needles) for needles in wanted):
                _procs.kill(pid, signal.SIGKILL)

    def _kill_all_descendants(self) -> None:
        """SIGKILL every process left under this supervisor (it is their subreaper) and reap
        them, until none is left."""
        for _ in range(10000):
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid:
                continue
            for p in _procs.descendants(self.pid):
                _procs.kill(p, signal.SIGKILL)
            if self.scope:  # also what left this process's tree (a reparenting race)
                for p in _where.members(self.scope):
                    if p != self.pid:
                        _procs.kill(p, signal.SIGKILL)
            time.sleep(0.001)

    def _finish(self) -> None:
        self._kill_all_descendants()
        deadline = time.monotonic() + _DRAIN_S
        while self.by_fd and time.monotonic() < deadline:
            for key, _ in self.sel.select(max(0.0, deadline - time.monotonic())):
                if key.data is None:
                    self._on_wake()
                else:
                    self._read(key.fd, key.data)
        if self.preempted_host and not self.cancelled and self.failed is None:
            self._leave_preempted()
            return
        for r in self.replicas:
            for fd in list(r.pipes):
                self._close_pipe(fd, r)
            if r.logs is not None:
                r.logs.close()
        # why each failed replica failed, recorded with the final state: later looks read
        # it, whether or not the logs are still there (the logs are complete only now)
        for r in self.replicas:
            self._record_restart_cause(r)
            if r.state == "FAILED":
                r.cause = recorded_cause(r.role.name, r.to_json(), r.dir)
        self._name_cause()  # the replica that failed first, unless it only lost its peer
        if self.failed is not None:
            self.state = "FAILED"
        elif self.cancelled:
            self.state = "CANCELLED"
        elif all(r.state == "SUCCEEDED" for r in self.replicas):
            self.state = "SUCCEEDED"
        else:
            self.state = "FAILED"
            self.msg = self.msg or "replicas ended without succeeding"
        self.ended = time.time()
        # the cgroup goes before the final state: a reader that sees it may end everything
        # at once (tx as a container's PID 1 exits, and the kernel kills this process)
        if self.scope:
            _where.kill_scope(self.scope, spare=self.pid)
            _where.leave_scope(self.scope)
        self._write_success_file()  # first: a reader that sees the final state finds it
        self.write_state()

    # -- records ------------------------------------------------------------------------------
    def to_json(self) -> Dict[str, Any]:
        """The content of state.json."""
        return {
            "app_id": self.request["app_id"], "state": self.state, "num_restarts": self.num_restarts,
            "msg": self.msg, "error": self.error, "pid": self.pid, "pid_start": self.pid_start,
            "started": self.started, "ended": self.ended, "cgroup": self.scope, **self.where,
            "history": self.history, "infra_used": self.infra_used,
            **({"infra": self.infra_msg} if self.infra_msg else {}),
            **({"preempted": self.msg} if self.preempted_host and self.state not in _store.TERMINAL else {}),
            "roles": [{"name": role.name, "retries": role.retries, "replicas": [r.to_json() for r in role.replicas]}
                      for role in self.roles],
        }

    def write_state(self) -> None:
        """Replace state.json (atomically) with the current state."""
        _store.write_json_atomic(self.state_path, self.to_json())
        self.dirty = False

    def _write_success_file(self) -> None:
        info = {
            "app_id": self.request["app_id"], "final_state": self.state, "last_updated": self.ended,
            "roles": {
                role.name: [
                    {"replica_id": r.id, "pid": r.attempts[-1]["pid"] if r.attempts else None,
                     "exitcode": r.exit_code, "attempts": len(r.attempts), "log_dir": r.dir}
                    for r in role.replicas
                ]
                for role in self.roles
            },
        }
        try:
            with open(os.path.join(self.request["log_dir"], "SUCCESS"), "w") as f:
                json.dump(info, f, indent=2)
        except OSError as e:
            self._log(f"cannot write SUCCESS: {e}")

    def _log(self, text: str) -> None:
        try:
            os.write(2, f"{time.strftime('%H:%M:%S')} {self.request['app_id']}: {text}\n".encode())
        except OSError:
            pass


def _noop(_sig: int, _frame: Any) -> None:
    """Python-level handler: the signal number reaches the loop through the wakeup fd."""
