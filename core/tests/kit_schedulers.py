"""Small schedulers for testing the conformance kit itself (test_testing_kit_catches.py):
``Procs`` runs every replica as a local process and answers as a scheduler should (in
memory: one process only, so the kit's fresh-process test is not for it); each subclass
breaks one rule the kit checks. ``create_<variant>(session_name)`` makes one."""
from __future__ import annotations

import copy
import os
import signal
import subprocess
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, Optional

import attrs

from tx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from tx.schedulers.env import JOB_ID, ROLE_IDX, replica_env, torchx_name
from tx.schedulers.ids import clean_name, make_unique
from tx.schedulers.streams import Stream
from tx.specs.api import NONE, AppDef, AppDryRunInfo, AppState, is_terminal, macros
from tx.specs.runopts import CfgVal, runopts
from tx.specs.status import ReplicaStatus, RoleStatus


@attrs.define
class Request:
    app_id: str
    roles: List[Dict[str, Any]]


class Procs(Scheduler[Request]):
    """Every replica a local process; what it knows lives in this object."""

    def __init__(self, session_name: str) -> None:
        super().__init__("kitprocs", session_name)
        self.dir = tempfile.mkdtemp(prefix="tx-kit-")
        self.apps: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
        self.cancelled: set = set()

    def _run_opts(self) -> runopts:
        return runopts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> None:
        pass

    def replica_env(self, app_id: str, idx: int, role: Any, k: int) -> Dict[str, str]:
        return replica_env(app_id=app_id, role_name=role.name, replica_id=str(k), rank0_host="localhost",
                           role_idx=idx, num_replicas=role.num_replicas)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Request]:
        app_id = make_unique(clean_name(app.name))
        roles = []
        for idx, role in enumerate(app.roles):
            replicas = []
            for k in range(role.num_replicas):
                r = macros.Values(img_root="", app_id=app_id, replica_id=str(k), rank0_env="TX_RANK0_HOST").apply(role)
                replicas.append({"argv": [r.entrypoint, *r.args], "env": {**r.env, **self.replica_env(app_id, idx, role, k)}})
            roles.append({"name": role.name, "replicas": replicas})
        return AppDryRunInfo(Request(app_id, roles), fmt=lambda req: repr(req))

    def start(self, app_id: str, role: str, k: int, replica: Dict[str, Any]) -> Dict[str, Any]:
        out = os.path.join(self.dir, f"{app_id}.{role}.{k}")
        with open(out + ".stdout", "wb") as o, open(out + ".stderr", "wb") as e:
            p = subprocess.Popen(replica["argv"], stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                 env={**os.environ, **replica["env"]}, start_new_session=True)
        return {"proc": p, "log": out}

    def schedule(self, dryrun_info: AppDryRunInfo[Request]) -> str:
        req = dryrun_info.request
        self.apps[req.app_id] = {
            role["name"]: [self.start(req.app_id, role["name"], k, r) for k, r in enumerate(role["replicas"])]
            for role in req.roles
        }
        return req.app_id

    def replica_state(self, app_id: str, rep: Dict[str, Any]) -> AppState:
        code = rep["proc"].poll()
        if code is None:
            return AppState.RUNNING
        if code == 0:
            return AppState.SUCCEEDED
        return AppState.CANCELLED if app_id in self.cancelled else AppState.FAILED

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id not in self.apps:
            return None
        roles = []
        for name, reps in self.apps[app_id].items():
            statuses = []
            for k, rep in enumerate(reps):
                state = self.replica_state(app_id, rep)
                code = rep["proc"].returncode if is_terminal(state) and rep["proc"] is not None else None
                statuses.append(ReplicaStatus(k, state, name, "localhost", exit_code=code))
            roles.append(RoleStatus(name, statuses))
        states = [r.state for rs in roles for r in rs.replicas]
        failed = [f"{rs.role}/{r.id} exited with {r.exit_code}" for rs in roles for r in rs.replicas
                  if r.state == AppState.FAILED]
        if failed:
            state = AppState.FAILED
        elif any(not is_terminal(s) for s in states):
            state = next(s for s in states if not is_terminal(s))
        elif AppState.CANCELLED in states:
            state = AppState.CANCELLED
        else:
            state = AppState.SUCCEEDED
        msg = failed[0] if failed else NONE
        return DescribeAppResponse(app_id=app_id, state=state, num_restarts=0, msg=msg, structured_error_msg=msg,
                                   roles_statuses=roles)

    def list(self) -> List[ListAppResponse]:
        # the honest describe, not a variant's: BackFromTerminal says SUCCEEDED only once,
        # and a list() that came first (a fast app under load) took that answer unseen
        return [ListAppResponse(app_id, Procs.describe(self, app_id).state)  # type: ignore[union-attr]
                for app_id in self.apps]

    def _cancel_existing(self, app_id: str) -> None:
        if app_id not in self.apps:
            return
        self.cancelled.add(app_id)
        for reps in self.apps[app_id].values():
            for rep in reps:
                if rep["proc"].poll() is None:
                    os.killpg(rep["proc"].pid, signal.SIGKILL)
                    rep["proc"].wait()

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None, since: Any = None,
                 until: Any = None, should_tail: bool = False, streams: Optional[Any] = None) -> Iterable[str]:
        stream = Stream(streams) if streams is not None else Stream.STDOUT
        parts = ["stdout", "stderr"] if stream == Stream.COMBINED else [stream.value]
        lines: List[str] = []
        for part in parts:
            with open(f"{self.apps[app_id][role_name][k]['log']}.{part}", newline="") as f:
                text = f.read()
            lines += [line + "\n" for line in text.split("\n")[:-1]] + ([text.rsplit("\n", 1)[-1]] if not text.endswith("\n") and text else [])
        return lines


class BackFromTerminal(Procs):
    """Says SUCCEEDED once, then RUNNING again (a backend whose state source flaps)."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.SUCCEEDED:
            told = getattr(self, "told", set())
            self.told = told | {app_id}
            if app_id in told:
                desc.state = AppState.RUNNING
        return desc


class ReplicaBackFromTerminal(Procs):
    """Once the app FAILED, the replica that SUCCEEDED is reported RUNNING again (the app
    stays FAILED)."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        calls = self.__dict__.setdefault("calls", {})
        if desc is not None and desc.state == AppState.FAILED:
            calls[app_id] = calls.get(app_id, 0) + 1
            for rs in desc.roles_statuses if calls[app_id] > 1 else []:
                for r in rs.replicas:
                    if r.state == AppState.SUCCEEDED:
                        r.state, r.exit_code = AppState.RUNNING, None
        return desc


class NeverRunning(Procs):
    """Reports PENDING until the end: RUNNING is never shown."""

    def replica_state(self, app_id: str, rep: Dict[str, Any]) -> AppState:
        state = super().replica_state(app_id, rep)
        return AppState.PENDING if state == AppState.RUNNING else state


class ReplicasNeverRunning(Procs):
    """The app is RUNNING while its replicas are still reported PENDING."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        for rs in desc.roles_statuses if desc else []:
            for r in rs.replicas:
                if r.state == AppState.RUNNING:
                    r.state = AppState.PENDING
        return desc


class NeverStarts(Procs):
    """Queues the app forever (nothing runs); cancel works."""

    def start(self, app_id: str, role: str, k: int, replica: Dict[str, Any]) -> Dict[str, Any]:
        return {"proc": None, "log": ""}

    def replica_state(self, app_id: str, rep: Dict[str, Any]) -> AppState:
        return AppState.CANCELLED if app_id in self.cancelled else AppState.PENDING

    def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.add(app_id)

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        for rs in desc.roles_statuses if desc else []:
            for r in rs.replicas:
                r.exit_code = None
        return desc


class NoRoleIdx(Procs):
    """Sets every contract variable but TX_ROLE_IDX (and TORCHX_ROLE_IDX)."""

    def replica_env(self, app_id: str, idx: int, role: Any, k: int) -> Dict[str, str]:
        env = super().replica_env(app_id, idx, role, k)
        env.pop(ROLE_IDX)
        env.pop(str(torchx_name(ROLE_IDX)))
        return env


class WrongNumReplicas(Procs):
    """TX_NUM_REPLICAS counts every replica of the app, not the role's."""

    def replica_env(self, app_id: str, idx: int, role: Any, k: int) -> Dict[str, str]:
        env = super().replica_env(app_id, idx, role, k)
        env["TX_NUM_REPLICAS"] = env["TORCHX_NUM_REPLICAS"] = "3"
        return env


class RawJobId(Procs):
    """Does not fill in macros in the role's env (TX_JOB_ID keeps ``${app_id}``)."""

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Request]:
        info = super()._submit_dryrun(app, cfg)
        for role, src in zip(info.request.roles, app.roles):
            for r in role["replicas"]:
                for key in (JOB_ID, str(torchx_name(JOB_ID))):
                    if key in src.env:
                        r["env"][key] = src.env[key]
        return info


class SucceededWithFailedReplica(Procs):
    """Says the app SUCCEEDED while a replica FAILED (it looks at role 0 only). It says so once
    every replica has ended: where worker/1 failed before worker/0 had ended, the kit read
    worker/0 RUNNING first and named that instead (c24, once)."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.FAILED:
            for reps in self.apps[app_id].values():
                for rep in reps:
                    rep["proc"].wait(timeout=60)
            desc = super().describe(app_id)
            assert desc is not None
            desc.state, desc.msg = AppState.SUCCEEDED, NONE
        return desc


class FailsSilently(Procs):
    """FAILED without a word of why."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.FAILED:
            desc.msg = desc.structured_error_msg = NONE
        return desc


class OneBasedReplicas(Procs):
    """Numbers replicas from 1."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        for rs in desc.roles_statuses if desc else []:
            for r in rs.replicas:
                r.id += 1
        return desc


class SilentUnknown(Procs):
    """Reports a running app as UNKNOWN without saying what the backend answered."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.RUNNING:
            desc.state = AppState.UNKNOWN
        return desc


class ExplainedUnknown(SilentUnknown):
    """Reports a running app as UNKNOWN, saying why (allowed)."""

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.UNKNOWN:
            desc.msg = "the backend answered state 'Weird', which tx does not know"
        return desc


class ListLags(Procs):
    """list() keeps saying RUNNING after the app ended."""

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(a.app_id, AppState.RUNNING if is_terminal(a.state) else a.state) for a in super().list()]


class ForgetsRunOptions(Procs):
    """Keeps the submitted AppDef (in memory) but not the run options it was submitted with."""

    def __init__(self, session_name: str) -> None:
        super().__init__(session_name)
        self.appdefs: Dict[str, AppDef] = {}

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("label", type_=str, default=None, help="a label")
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Request]:
        info = super()._submit_dryrun(app, cfg)
        self.appdefs[info.request.app_id] = copy.deepcopy(app)
        return info

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        desc = super().describe(app_id)
        if desc is not None:
            desc.app = self.appdefs.get(app_id)
        return desc


VARIANTS = {
    "good": Procs, "back_from_terminal": BackFromTerminal, "replica_back_from_terminal": ReplicaBackFromTerminal,
    "never_running": NeverRunning, "replicas_never_running": ReplicasNeverRunning, "never_starts": NeverStarts, "no_role_idx": NoRoleIdx,
    "wrong_num_replicas": WrongNumReplicas, "raw_job_id": RawJobId,
    "succeeded_with_failed_replica": SucceededWithFailedReplica, "fails_silently": FailsSilently,
    "one_based_replicas": OneBasedReplicas, "silent_unknown": SilentUnknown, "explained_unknown": ExplainedUnknown,
    "list_lags": ListLags,
    # the unbroken scheduler keeps no copy of the submitted AppDef (and does not say why)
    "forgets_appdef": Procs,
    "forgets_run_options": ForgetsRunOptions,
}


def create(variant: str, session_name: str = "kit") -> Procs:
    """A scheduler of ``variant`` (a key of :data:`VARIANTS`)."""
    return VARIANTS[variant](session_name)
