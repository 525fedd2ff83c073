"""Scheduler ``procs``: every replica is a detached local process.

Everything about an app lives in files under the state directory (``$PROCS_STATE_DIR``,
else ``~/.local/state/tx-procs``: an environment variable, so that every process of the
user finds it), and a scheduler created in another process (``tx status``, ``tx log``,
``tx cancel`` from another shell) sees the same apps::

    <state_dir>/<app_id>/app.json                 the app: name, roles, replica counts
    <state_dir>/<app_id>/<role>/<k>/pid           the replica's process id
    <state_dir>/<app_id>/<role>/<k>/stdout.log    its output streams
    <state_dir>/<app_id>/<role>/<k>/stderr.log
    <state_dir>/<app_id>/<role>/<k>/exitcode      written by the replica's shell when it ends
    <state_dir>/<app_id>/cancelled                present once the app was cancelled
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional

import attrs

from tx.schedulers import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    clean_name,
    filter_regex,
    make_unique,
    replica_env,
)
from tx.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RoleStatus,
    is_terminal,
    macros,
    runopts,
)


def _default_state_dir() -> str:
    return os.environ.get("PROCS_STATE_DIR") or os.path.expanduser("~/.local/state/tx-procs")


@attrs.define
class ProcsRequest:
    """What :meth:`ProcsScheduler.submit_dryrun` returns and :meth:`ProcsScheduler.schedule`
    starts: the app id chosen ahead, where its state goes, the niceness, and per role the
    command line and environment of every replica: ``[{"name", "replicas": [{"argv", "env"}]}]``."""

    app_id: str
    app_name: str
    state_dir: str
    nice: int
    roles: List[Dict[str, Any]]


class ProcsScheduler(Scheduler[ProcsRequest]):
    """Runs each replica of an app as a detached process (its own session) on this host."""

    runs_on_host = True  # tx run waits and relays logs by default, as for local_cwd
    supports_mounts = False  # no mounts are made: tx refuses roles with mounts (ignored_mounts)

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("nice", type_=int, default=0, help="niceness added to the replicas' processes (nice -n)")
        return opts

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        pass  # resources mean nothing to local processes: roles without one are fine

    # -- submit ------------------------------------------------------------------------------
    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[ProcsRequest]:
        app_id = make_unique(clean_name(app.name))
        roles = []
        for idx, role in enumerate(app.roles):
            replicas = []
            for k in range(role.num_replicas):
                values = macros.Values(img_root=os.getcwd(), app_id=app_id, replica_id=str(k),
                                       rank0_env="TX_RANK0_HOST")
                r = values.apply(role)
                env = {**r.env, **replica_env(app_id=app_id, role_name=role.name, replica_id=str(k),
                                              rank0_host="localhost", role_idx=idx,
                                              num_replicas=role.num_replicas)}
                replicas.append({"argv": [r.entrypoint, *r.args], "env": env})
            roles.append({"name": role.name, "replicas": replicas})
        request = ProcsRequest(app_id, app.name, _default_state_dir(), int(cfg.get("nice") or 0), roles)  # type: ignore[arg-type]
        return AppDryRunInfo(request, fmt=lambda req: json.dumps(attrs.asdict(req), indent=2))

    def schedule(self, dryrun_info: AppDryRunInfo[ProcsRequest]) -> str:
        """Start every replica and return the app id.

        Raises:
            FileExistsError: this request was already scheduled.
        """
        req = dryrun_info.request
        app_dir = os.path.join(req.state_dir, req.app_id)
        os.makedirs(app_dir)  # fails if this request was scheduled before
        with open(os.path.join(app_dir, "app.json"), "w") as f:
            json.dump({"name": req.app_name, "submitted": time.time(),
                       "roles": {r["name"]: len(r["replicas"]) for r in req.roles}}, f)
        for role in req.roles:
            for k, replica in enumerate(role["replicas"]):
                rdir = os.path.join(app_dir, role["name"], str(k))
                os.makedirs(rdir)
                # the shell records the exit code when the program ends, from any process's view
                script = f'{shlex.join(replica["argv"])}; echo $? > "$RDIR/exitcode.tmp"; mv "$RDIR/exitcode.tmp" "$RDIR/exitcode"'
                with open(os.path.join(rdir, "stdout.log"), "wb") as out, \
                        open(os.path.join(rdir, "stderr.log"), "wb") as err:
                    p = subprocess.Popen(["nice", "-n", str(req.nice), "sh", "-c", script], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         env={**os.environ, **replica["env"], "RDIR": rdir},
                                         start_new_session=True)
                with open(os.path.join(rdir, "pid"), "w") as f:
                    f.write(str(p.pid))
        return req.app_id

    # -- queries -------------------------------------------------------------------------------
    def _app_dir(self, app_id: str) -> Optional[str]:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", app_id):
            return None
        d = os.path.join(_default_state_dir(), app_id)
        return d if os.path.isfile(os.path.join(d, "app.json")) else None

    @staticmethod
    def _read(path: str) -> Optional[str]:
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def _replica(self, app_dir: str, role: str, k: int, cancelled: bool) -> ReplicaStatus:
        rdir = os.path.join(app_dir, role, str(k))
        code = self._read(os.path.join(rdir, "exitcode"))
        pid = int(self._read(os.path.join(rdir, "pid")) or 0)
        alive = bool(pid) and _alive(pid)
        if code is None and not alive:
            # the shell may have written its exit code and ended between the two reads above:
            # read it again now that the process is known to be gone
            code = self._read(os.path.join(rdir, "exitcode"))
        if code is not None:
            exit_code = int(code)
            state = AppState.SUCCEEDED if exit_code == 0 else AppState.CANCELLED if cancelled else AppState.FAILED
            err = NONE
            if state == AppState.FAILED:
                tail = (self._read(os.path.join(rdir, "stderr.log")) or "").splitlines()[-1:]
                err = f"replica {role}/{k} exited with code {exit_code}" + (f": {tail[0]}" if tail else "")
            return ReplicaStatus(k, state, role, "localhost", err, exit_code)
        if alive:
            return ReplicaStatus(k, AppState.RUNNING, role, "localhost")
        # gone without an exit code: killed (by cancel, or by someone else)
        state = AppState.CANCELLED if cancelled else AppState.FAILED
        return ReplicaStatus(k, state, role, "localhost", NONE if cancelled else f"replica {role}/{k} was killed")

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return None
        with open(os.path.join(app_dir, "app.json")) as f:
            meta = json.load(f)
        cancelled = os.path.exists(os.path.join(app_dir, "cancelled"))
        roles = [RoleStatus(name, [self._replica(app_dir, name, k, cancelled) for k in range(n)])
                 for name, n in meta["roles"].items()]
        states = [r.state for rs in roles for r in rs.replicas]
        failed = [r for rs in roles for r in rs.replicas if r.state == AppState.FAILED]
        if failed:
            state = AppState.FAILED
        elif AppState.RUNNING in states:
            state = AppState.RUNNING
        elif AppState.CANCELLED in states:
            state = AppState.CANCELLED
        else:
            state = AppState.SUCCEEDED
        err = failed[0].structured_error_msg if failed else NONE
        return DescribeAppResponse(app_id=app_id, state=state, num_restarts=0, msg=err,
                                   structured_error_msg=err, roles_statuses=roles,
                                   ui_url=f"file://{app_dir}")

    def list(self) -> List[ListAppResponse]:
        try:
            names = sorted(os.listdir(_default_state_dir()))
        except FileNotFoundError:
            return []
        out = []
        for app_id in names:
            desc = self.describe(app_id)
            if desc is not None:
                out.append(ListAppResponse(app_id, desc.state, name=app_id.rsplit("-", 1)[0]))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        app_dir = self._app_dir(app_id)
        if app_dir is None:
            return
        desc = self.describe(app_id)
        if desc is None or is_terminal(desc.state):
            return
        open(os.path.join(app_dir, "cancelled"), "w").close()
        for rs in desc.roles_statuses:
            for r in rs.replicas:
                pid = int(self._read(os.path.join(app_dir, rs.role, str(r.id), "pid")) or 0)
                if pid:
                    try:
                        os.killpg(pid, signal.SIGKILL)  # the replica's whole session
                    except ProcessLookupError:
                        pass

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Any = None, until: Any = None, should_tail: bool = False,
                 streams: Optional[Any] = None) -> Iterable[str]:
        """Lines of replica ``k``'s stdout (default) or stderr; ``should_tail`` follows the
        file until the app ends.

        Raises:
            ValueError: an unknown app or replica, or a stream other than stdout/stderr.
        """
        stream = Stream(streams) if streams is not None else Stream.STDOUT
        if stream not in (Stream.STDOUT, Stream.STDERR):
            raise ValueError(f"procs keeps stdout and stderr, not {stream.value}")
        app_dir = self._app_dir(app_id)
        path = os.path.join(app_dir or "", role_name, str(k), f"{stream.value}.log")
        if app_dir is None or not os.path.isfile(path):
            raise ValueError(f"app {app_id} has no replica {role_name}/{k}")
        return filter_regex(regex, self._lines(app_id, path, should_tail))

    def _lines(self, app_id: str, path: str, follow: bool) -> Iterable[str]:
        with open(path, errors="replace", newline="") as f:
            partial = ""
            while True:
                chunk = f.read()
                if chunk:
                    *whole, partial = (partial + chunk).split("\n")
                    yield from (line + "\n" for line in whole)
                    continue
                desc = self.describe(app_id) if follow else None
                if desc is None or is_terminal(desc.state):
                    chunk = f.read()  # what was written just before the end
                    if chunk:
                        *whole, partial = (partial + chunk).split("\n")
                        yield from (line + "\n" for line in whole)
                    if partial:
                        yield partial
                    return
                time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own child that nobody waited for) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def create_scheduler(session_name: str, **kwargs: Any) -> ProcsScheduler:
    """The factory tx calls: ``create_scheduler(session_name, **kwargs)``."""
    return ProcsScheduler("procs", session_name)
