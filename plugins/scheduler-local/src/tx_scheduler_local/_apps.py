"""Reading the registry: an app's state as a DescribeAppResponse, liveness of its
supervisor, and finalizing apps whose supervisor died.
"""
from __future__ import annotations

import fcntl
import os
import signal
import time
from typing import Any, Dict, List, Optional, Tuple

from tx.schedulers import APP_ID, DescribeAppResponse, names_cause, root_cause
from tx.specs import NONE, AppState, Attempt, FailureKind, ReplicaStatus, Role, RoleStatus, RootCause
from tx_scheduler_local import _procs, _store, _where
from tx_scheduler_local._relay import ERR, FILES

#: how much of the end of a failed replica's stderr is read for its root cause
_CAUSE_TAIL_BYTES = 128 << 10


def is_running(state: Dict[str, Any]) -> bool:
    """True if the process in charge of a non-terminal app is alive: its supervisor, or
    before the supervisor recorded itself, the launching process. A process recorded on
    another host, boot or PID namespace (:func:`tx_scheduler_local._where.elsewhere`)
    cannot be checked from here and counts as alive."""
    if _where.elsewhere(state) is not None:
        return True
    if _where.rebooted(state):  # a pid of an earlier boot is another process now
        return False
    if state.get("pid"):
        return _procs.is_alive(state["pid"], state.get("pid_start"))
    return _procs.is_alive(state.get("launcher_pid"), state.get("launcher_start"))


def why_lost(state: Dict[str, Any], app_id: str, app_dir: str) -> Tuple[bool, str]:
    """Why a non-terminal app whose supervisor is gone (:func:`is_running` is False) ended,
    as ``(infra, reason)``: ``infra`` is True where the infrastructure lost it, not the
    user's program: the host rebooted (the boot id recorded by the supervisor differs from
    this boot's), or the supervisor, tx's own process, ended without recording the end of
    the app (SIGKILL, the OOM killer or the end of the login session killed it; its replicas
    are killed now). False where the launching process died before any supervisor ran
    (``tx run`` killed while it launched: no replica ran, nothing to retry)."""
    log_path = os.path.join(app_dir, _store.SUPERVISOR_LOG)
    if state.get("preempted"):  # its supervisor was warned, stopped the replicas and left
        return True, str(state["preempted"])
    if _where.rebooted(state):
        return True, f"the host rebooted while {app_id} ran: its supervisor and replicas ended with it"
    if state.get("pid"):
        return True, (f"the supervisor of {app_id} (pid {state['pid']}) exited without recording the end of the "
                      f"app (killed from outside: SIGKILL, the OOM killer, the session's end); its remaining "
                      f"processes were killed (see {log_path})")
    if state.get("history"):  # a restart after a loss, whose restarting process died first
        return True, (f"the process restarting {app_id} (pid {state.get('launcher_pid')}) ended before the "
                      "app's supervisor started")
    return False, (f"the process that launched {app_id} (pid {state.get('launcher_pid')}) ended before the "
                   "app's supervisor started (was it killed?): no replica ran")


def _launching_here(state: Dict[str, Any]) -> bool:
    """True if this very process launches the app's supervisor and none has recorded itself:
    the launch failed (its caller finalizes it), so the launcher's liveness says nothing."""
    return not state.get("pid") and state.get("launcher_pid") == os.getpid()


def _kill_remains(state: Dict[str, Any], request: Dict[str, Any]) -> None:
    """SIGKILL what is left of an app whose supervisor is gone: its replicas' process
    groups, every process carrying ``TX_APP_ID=<app_id>``, and its cgroup's members."""
    needle = [f"{APP_ID}={request['app_id']}".encode()]
    for role in state.get("roles", []):
        for r in role["replicas"]:
            # a replica's process group, if its leader is still that replica's
            if r.get("pid") and _procs.environ_matches(r["pid"], needle):
                _procs.killpg(r["pid"], signal.SIGKILL)
    for pid in _procs.pids_with_env(needle):
        _procs.kill(pid, signal.SIGKILL)
    scope = state.get("cgroup")
    if isinstance(scope, str) and os.path.basename(scope) == f"tx-{request['app_id']}":
        # the app's cgroup: what escaped with setsid and a cleared environment too
        _where.kill_scope(scope)
        _where.remove_scope(scope)


def finalize_orphan(app_dir: str, request: Dict[str, Any], final: str, msg: str,
                    infra: bool = False) -> Dict[str, Any]:
    """Record a final state for an app whose supervisor is gone without writing one
    (killed with SIGKILL, out of memory, a reboot): SIGKILL what is left of its replicas
    (process groups, and every process carrying ``TX_APP_ID=<app_id>``) and mark replicas
    that did not finish as ``final``. ``infra``: the infrastructure lost the app
    (:func:`why_lost`): its last attempt is recorded as :attr:`FailureKind.INFRA` with
    ``msg`` as the reason. Safe when several processes do it at once (flock).

    Returns:
        the state now on disk.
    """
    path = os.path.join(app_dir, _store.STATE)
    with open(os.path.join(app_dir, _store.LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = _store.read_json(path) or {}
        if state.get("state") in _store.TERMINAL or (state and is_running(state) and not _launching_here(state)):
            return state
        _kill_remains(state, request)
        state.setdefault("app_id", request["app_id"])
        state.setdefault("num_restarts", 0)
        state.setdefault("roles", [
            {"name": ro["name"], "replicas": [{"id": r["id"], "state": "PENDING", "pid": None,
                                                 "exit_code": None, "error": "", "reason": "", "attempts": []}
                                                for r in ro["replicas"]]}
            for ro in request["roles"]
        ])
        dirs = {(ro["name"], r["id"]): r["dir"] for ro in request["roles"] for r in ro["replicas"]}
        for role in state["roles"]:
            for r in role["replicas"]:
                if r["state"] not in _store.TERMINAL:
                    r["state"], r["pid"] = final, None
                elif r["state"] == "FAILED" and "cause" not in r and (role["name"], r["id"]) in dirs:
                    r["cause"] = recorded_cause(role["name"], r, dirs[(role["name"], r["id"])])  # as _finish
        state["state"] = final
        state["msg"] = msg
        if infra:
            state["infra"] = msg
        state["ended"] = time.time()
        _store.write_json_atomic(path, state)
        return state


def prepare_restart(app_dir: str, request: Dict[str, Any], why: str) -> Optional[Dict[str, Any]]:
    """Make an app the infrastructure lost (:func:`why_lost`) ready to start again under a
    new supervisor, which this process then launches: SIGKILL what is left of it, record
    the lost attempt (``history``: ``infra`` and ``why``; ``infra_used`` and
    ``num_restarts`` one more) and this process as its launcher. The new supervisor
    resumes from this state (the replicas' attempts, the roles' spent ``max_retries``) and
    appends to the same logs. Safe when several processes do it at once (flock).

    Returns:
        the state written, or None where another process got there first (the app runs
        again, or ended).
    """
    path = os.path.join(app_dir, _store.STATE)
    with open(os.path.join(app_dir, _store.LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = _store.read_json(path) or {}
        if state.get("state") in _store.TERMINAL or (state and is_running(state)):
            return None
        _kill_remains(state, request)
        for role in state.get("roles", []):
            for r in role["replicas"]:
                if r["state"] not in _store.TERMINAL:
                    r["state"], r["pid"] = "PENDING", None
        me = os.getpid()
        state.update({
            "state": "PENDING", "pid": None, "pid_start": None, "launcher_pid": me,
            "launcher_start": _procs.start_time(me), "cgroup": None,
            "msg": f"restarting: {why}",
            "history": list(state.get("history") or []) + [{"kind": str(FailureKind.INFRA), "reason": why}],
            "infra_used": int(state.get("infra_used") or 0) + 1,
            "num_restarts": int(state.get("num_restarts") or 0) + 1,
            **_where.here(),
        })
        _store.write_json_atomic(path, state)
        return state


def attempts_of(state: Dict[str, Any]) -> List[Attempt]:
    """The app's attempts (:class:`tx.specs.Attempt`), oldest first: one per restart the
    supervisor recorded in ``history`` (``user``: a replica's failure within the roles'
    ``max_retries``; ``infra``: the app lost to a reboot or its supervisor's death, within
    ``infra_retries``), then the current one, which has a kind once the app FAILED
    (``infra`` where the infrastructure lost it, else ``user``)."""
    out = []
    for i, h in enumerate(state.get("history") or []):
        try:
            out.append(Attempt(i, AppState.FAILED, FailureKind(h.get("kind")), str(h.get("reason") or ""), True))
        except (AttributeError, ValueError):
            continue
    app_state = AppState[state.get("state", "SUBMITTED")]
    kind: Optional[FailureKind] = None
    reason = ""
    if app_state == AppState.FAILED:
        if state.get("infra"):
            kind, reason = FailureKind.INFRA, str(state["infra"])
        else:
            cause = next((_cause_of(r) for role in state.get("roles") or [] for r in role.get("replicas") or []
                          if r.get("cause") and r.get("error") and r.get("error") == state.get("error")), None)
            kind, reason = FailureKind.USER, (
                cause.text if cause is not None else str(state.get("error") or state.get("msg") or "").split("\n")[0])
    out.append(Attempt(len(out), app_state, kind, reason))
    return out


def to_describe(
    state: Dict[str, Any], request: Dict[str, Any], roles: List[Role], app_dir: str
) -> DescribeAppResponse:
    """Build the DescribeAppResponse of an app from its state.json and request.json."""
    statuses = []
    app_cause: Optional[RootCause] = None
    if state.get("roles"):
        dirs = {(ro["name"], r["id"]): r["dir"] for ro in request["roles"] for r in ro["replicas"]}
        for role in state["roles"]:
            replicas = []
            for r in role["replicas"]:
                cause = None
                rdir = dirs.get((role["name"], r["id"]))
                if "cause" in r:  # recorded when the app ended: the logs may be gone since
                    cause = _cause_of(r)
                elif r["state"] == "FAILED" and rdir is not None:  # running, or an older record
                    cause = replica_root_cause(role["name"], r, rdir)
                if cause is not None and r.get("error") and r.get("error") == state.get("error"):
                    app_cause = cause
                replicas.append(ReplicaStatus(
                    id=r["id"], state=AppState[r["state"]], role=role["name"], hostname="localhost",
                    structured_error_msg=cause.text if cause else (r.get("error") or NONE),
                    exit_code=r.get("exit_code"), root_cause=cause,
                ))
            statuses.append(RoleStatus(role["name"], replicas))
    else:
        app_state = AppState[state.get("state", "SUBMITTED")]
        for role in request["roles"]:
            statuses.append(RoleStatus(role["name"], [
                ReplicaStatus(id=r["id"], state=app_state, role=role["name"], hostname="localhost")
                for r in role["replicas"]
            ]))
    return DescribeAppResponse(
        app_id=request["app_id"],
        state=AppState[state.get("state", "SUBMITTED")],
        attempts=attempts_of(state),
        num_restarts=state.get("num_restarts", 0),
        msg=state.get("msg") or NONE,
        structured_error_msg=app_cause.text if app_cause else (state.get("error") or NONE),
        ui_url=f"file://{request['log_dir']}",
        roles_statuses=statuses,
        roles=roles,
        root_cause=app_cause,
        metadata={
            "log_dir": request["log_dir"],
            "app_dir": app_dir,
            "scheduler": request["scheduler"],
            "session": request["session"],
            "supervisor_pid": state.get("pid"),
            "started": state.get("started"),
            "ended": state.get("ended"),
            # the run options it was submitted with (absent for apps of an older tx-scheduler-local)
            "run_options": request.get("run_options"),
            # "role/k" -> that replica's attempts: pid, start, end, exit_code, and the
            # offsets in stdout/stderr/combined.log where each attempt's output begins
            # restarts after the infrastructure lost the app (a reboot, its supervisor killed)
            "infra_used": int(state.get("infra_used") or 0),
            "attempts": {
                f"{role['name']}/{r['id']}": r.get("attempts", [])
                for role in state.get("roles", []) for r in role["replicas"]
            },
        },
    )


def _read_tail(path: str, start: int, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(start, end - size))
            return f.read(size)
    except OSError:
        return b""


def replica_root_cause(role: str, replica: Dict[str, Any], replica_dir: str) -> Optional[RootCause]:
    """Why a failed replica failed (:func:`tx.schedulers.why.root_cause`), read from its
    TorchElastic error file (``error.json``, where TORCHELASTIC_ERROR_FILE points) and the
    end of its last attempt's stderr; None where neither names more than the exit status
    and a last line (the supervisor's message says that already), or where the kernel's OOM
    killer ended it (the supervisor's message says so)."""
    if "OOM killer" in str(replica.get("reason") or ""):
        return None
    attempts = replica.get("attempts") or []
    offsets = attempts[-1].get("offsets") if attempts and isinstance(attempts[-1], dict) else None
    start = offsets[ERR] if isinstance(offsets, list) and len(offsets) > ERR and isinstance(offsets[ERR], int) else 0
    tail = _read_tail(os.path.join(replica_dir, FILES[ERR]), start, _CAUSE_TAIL_BYTES)
    error_file = _read_tail(os.path.join(replica_dir, "error.json"), 0, _CAUSE_TAIL_BYTES)
    code = replica.get("exit_code")
    cause = root_cause(role, replica["id"], tail, error_file, code if isinstance(code, int) else None)
    return cause if names_cause(cause) else None


def recorded_cause(role: str, replica: Dict[str, Any], replica_dir: str) -> Optional[Dict[str, Any]]:
    """:func:`replica_root_cause` as the record keeps it (``RootCause.to_json()``: its
    fields and ``text``), or None where it names nothing beyond the exit status. Made when
    the replica's output is complete (by the supervisor, with the final state), so that
    later looks do not depend on logs that may be gone."""
    cause = replica_root_cause(role, replica, replica_dir)
    return cause.to_json() if cause is not None else None


def _cause_of(replica: Dict[str, Any]) -> Optional[RootCause]:
    """The root cause recorded in a replica's entry of state.json (None: none recorded, or
    a record that is not one)."""
    rec = replica.get("cause")
    if not isinstance(rec, dict):
        return None
    try:
        return RootCause(**{k: v for k, v in rec.items() if k != "text"})
    except TypeError:
        return None


def read_request(app_dir: str) -> Optional[Dict[str, Any]]:
    """The app's request.json (None if the app is unknown).

    Raises:
        tx_scheduler_local._store.BadStateFile: the file cannot be read, is not JSON, or is
            not a request tx wrote for this app (a ``{}``, a request of another app).
    """
    path = os.path.join(app_dir, _store.REQUEST)
    req = _store.read_json(path)
    if req is not None:
        check_request(req, path, os.path.basename(app_dir))
    return req


def _fields(obj: Dict[str, Any], types: Dict[str, type]) -> Optional[str]:
    for key, typ in types.items():
        if not isinstance(obj.get(key), typ):
            return f"{key!r} ({typ.__name__})"
    return None


def check_request(req: Dict[str, Any], path: str, app_id: str) -> None:
    """Check that ``req`` (read from ``path``) has the fields of a request tx wrote for
    ``app_id``: ``app_id``, ``scheduler``, ``session``, ``log_dir``, and ``roles`` of
    ``{"name", "replicas": [{"id", "dir"}, ...]}``.

    Raises:
        tx_scheduler_local._store.BadStateFile: a field is missing or of the wrong type.
    """
    bad = _fields(req, {"app_id": str, "scheduler": str, "session": str, "log_dir": str, "roles": list})
    if bad is None:
        for role in req["roles"]:
            if not isinstance(role, dict) or _fields(role, {"name": str, "replicas": list}):
                bad = "'roles' (a list of {name, replicas})"
                break
            if not all(isinstance(r, dict) and _fields(r, {"id": int, "dir": str}) is None for r in role["replicas"]):
                bad = f"'replicas' of role {role['name']!r} (a list of {{id, dir}})"
                break
    if bad is not None:
        raise _store.BadStateFile(path, f"is not a request written by tx: it lacks {bad}")
    if req["app_id"] != app_id:
        raise _store.BadStateFile(path, f"is the request of app {req['app_id']!r}, not of {app_id!r} (copied?)")


def check_state(state: Dict[str, Any], path: str) -> None:
    """Check that ``state`` (read from ``path``) is an app state tx wrote: a ``state``
    naming an AppState and, when present, ``roles`` of ``{"name", "replicas": [{"id",
    "state"}, ...]}``.

    Raises:
        tx_scheduler_local._store.BadStateFile: it is not.
    """
    name = state.get("state")
    if not isinstance(name, str) or name not in AppState.__members__:
        raise _store.BadStateFile(path, f"is not an app state written by tx: 'state' is {name!r}")
    roles = state.get("roles")
    if roles is None:
        return
    ok = isinstance(roles, list) and all(
        isinstance(role, dict) and isinstance(role.get("name"), str) and isinstance(role.get("replicas"), list)
        and all(isinstance(r, dict) and isinstance(r.get("id"), int) and r.get("state") in AppState.__members__
                for r in role["replicas"])
        for role in roles
    )
    if not ok:
        raise _store.BadStateFile(path, "is not an app state written by tx: bad 'roles'")
