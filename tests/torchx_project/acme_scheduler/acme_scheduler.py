"""ACME's in-house TorchX scheduler (``acme_local``): every replica is a detached process
group on this host, its stdout/stderr and exit code in files under ``$ACME_STATE_DIR``
(default ``~/.acme-scheduler``), so any process can describe, tail and cancel it.

Written against TorchX 0.7.0's public API only (``torchx.schedulers.api``,
``torchx.specs``), as a TorchX user's plugin is; tx runs it unchanged with
tx-torchx-compat installed.
"""
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional

from torchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
    split_lines,
)
from torchx.schedulers.ids import make_unique
from torchx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, ReplicaStatus, Resource, RoleStatus, macros, runopts
from torchx.specs.api import is_terminal

RANK0_ENV = "ACME_MASTER_ADDR"
_EXIT = 'trap "" HUP; "$@"; code=$?; echo $code > "$ACME_EXIT_FILE.tmp" && mv "$ACME_EXIT_FILE.tmp" "$ACME_EXIT_FILE"'


def acme_gpu() -> Resource:
    """ACME's standard GPU box."""
    return Resource(cpu=16, gpu=2, memMB=64 * 1024)


@dataclass
class ReplicaRequest:
    role: str
    replica_id: int
    cmd: List[str]
    env: Dict[str, str]
    cwd: str


@dataclass
class AcmeJob:
    app_id: str
    roles: Dict[str, int]
    replicas: List[ReplicaRequest] = field(default_factory=list)
    priority: int = 0
    queue: str = ""

    def __str__(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def state_dir() -> str:
    return os.environ.get("ACME_STATE_DIR") or os.path.expanduser("~/.acme-scheduler")


class AcmeScheduler(Scheduler):
    def __init__(self, session_name: str) -> None:
        super().__init__("acme_local", session_name)

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=str, required=True, help="the ACME queue to run in")
        opts.add("priority", type_=int, default=0, help="queue priority (higher runs first)")
        opts.add("cwd", type_=str, default=None, help="working directory of the replicas")
        return opts

    def _validate(self, app: AppDef, scheduler: str) -> None:
        # processes on this host: no resource requirements to check (TorchX 0.7 signature)
        for role in app.roles:
            if not role.entrypoint:
                raise ValueError(f"role {role.name} has no entrypoint")

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AcmeJob]:
        app_id = make_unique(app.name)
        job = AcmeJob(app_id=app_id, roles={r.name: r.num_replicas for r in app.roles},
                      priority=int(cfg.get("priority") or 0), queue=str(cfg["queue"]))
        cwd = str(cfg.get("cwd") or os.getcwd())
        for role in app.roles:
            for k in range(role.num_replicas):
                values = macros.Values(img_root=role.image, app_id=app_id, replica_id=str(k), rank0_env=RANK0_ENV)
                r = values.apply(role)
                job.replicas.append(ReplicaRequest(r.name, k, [r.entrypoint, *r.args],
                                                   {**r.env, RANK0_ENV: "127.0.0.1"}, cwd))
        return AppDryRunInfo(job, str)

    def schedule(self, dryrun_info: AppDryRunInfo[AcmeJob]) -> str:
        job = dryrun_info.request
        app_dir = os.path.join(state_dir(), job.app_id)
        os.makedirs(app_dir)
        pids = {}
        try:
            for rep in job.replicas:
                d = os.path.join(app_dir, rep.role, str(rep.replica_id))
                os.makedirs(d)
                env = {**os.environ, **rep.env, "ACME_EXIT_FILE": os.path.join(d, "exitcode")}
                with open(os.path.join(d, "stdout"), "wb") as out, open(os.path.join(d, "stderr"), "wb") as err:
                    p = subprocess.Popen(["sh", "-c", _EXIT, "acme-replica", *rep.cmd], env=env, cwd=rep.cwd,
                                         stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
                pids[f"{rep.role}/{rep.replica_id}"] = p.pid
        except Exception:
            for pid in pids.values():
                _kill(pid)
            shutil.rmtree(app_dir, ignore_errors=True)
            raise
        with open(os.path.join(app_dir, "job.json"), "w") as f:
            json.dump({"roles": job.roles, "pids": pids, "submitted": time.time()}, f)
        return job.app_id

    def _job(self, app_id: str) -> Optional[Dict[str, Any]]:
        try:
            with open(os.path.join(state_dir(), app_id, "job.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        job = self._job(app_id)
        if job is None:
            return None
        app_dir = os.path.join(state_dir(), app_id)
        cancelled = os.path.exists(os.path.join(app_dir, "cancelled"))
        statuses, states, error = [], [], "<NONE>"
        for role, n in job["roles"].items():
            replicas = []
            for k in range(n):
                code = _exit_code(os.path.join(app_dir, role, str(k), "exitcode"))
                if code is None:
                    alive = _alive(job["pids"][f"{role}/{k}"])
                    state = AppState.CANCELLED if cancelled else (AppState.RUNNING if alive else AppState.FAILED)
                else:
                    state = AppState.SUCCEEDED if code == 0 else AppState.FAILED
                    if code != 0 and error == "<NONE>":
                        error = f"{role}/{k} exited with {code}"
                states.append(state)
                replicas.append(ReplicaStatus(id=k, state=state, role=role, hostname="localhost", exit_code=code))
            statuses.append(RoleStatus(role=role, replicas=replicas))
        if cancelled:
            state = AppState.CANCELLED
        elif AppState.FAILED in states:
            state = AppState.FAILED
        elif all(s == AppState.SUCCEEDED for s in states):
            state = AppState.SUCCEEDED
        else:
            state = AppState.RUNNING
        return DescribeAppResponse(app_id=app_id, state=state, roles_statuses=statuses,
                                   structured_error_msg=error, ui_url=f"file://{app_dir}")

    def list(self) -> List[ListAppResponse]:
        out = []
        base = state_dir()
        for app_id in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            desc = self.describe(app_id)
            if desc is not None:
                out.append(ListAppResponse(app_id=app_id, state=desc.state))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        job = self._job(app_id)
        desc = self.describe(app_id)
        if job is None or desc is None or is_terminal(desc.state):
            return
        open(os.path.join(state_dir(), app_id, "cancelled"), "w").close()
        for pid in job["pids"].values():
            _kill(pid)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        stream = Stream(streams) if streams else Stream.COMBINED
        if stream == Stream.COMBINED:
            stream = Stream.STDERR  # ACME keeps stdout and stderr apart; TorchX's default reads stderr
        path = os.path.join(state_dir(), app_id, role_name, str(k), stream.value)
        if not os.path.exists(path):
            raise ValueError(f"no {stream.value} log for {app_id} {role_name}/{k}")
        lines = _follow(self, app_id, path) if should_tail else split_lines(_read(path))
        return filter_regex(regex, lines) if regex else lines


def _read(path: str) -> str:
    with open(path, newline="") as f:
        return f.read()


def _follow(sched: AcmeScheduler, app_id: str, path: str) -> Iterable[str]:
    pos, pending = 0, ""
    while True:
        desc = sched.describe(app_id)
        done = desc is None or is_terminal(desc.state)
        with open(path, newline="") as f:
            f.seek(pos)
            chunk = f.read()
            pos = f.tell()
        lines = split_lines(pending + chunk)
        pending = lines.pop() if lines and not lines[-1].endswith("\n") else ""
        yield from lines
        if done:
            if pending:
                yield pending
            return
        time.sleep(0.1)


def _exit_code(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a finished child of this process that nobody reaped yet
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def create_scheduler(session_name: str, **kwargs: Any) -> AcmeScheduler:
    return AcmeScheduler(session_name)
