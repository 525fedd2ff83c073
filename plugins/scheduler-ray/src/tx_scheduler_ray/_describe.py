"""How the ray scheduler reads a Ray job and its driver's ``state.json`` into a
:class:`tx.specs.DescribeAppResponse` (its roles, replicas, attempts and the failure that is
its cause)."""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

from tx.schedulers import DescribeAppResponse, first_cause, names_cause, root_cause, what_saved
from tx.specs import (
    NONE, AppState, Attempt, FailureKind, ReplicaStatus, Resource, RetryPolicy, Role, RoleStatus, RootCause,
    is_terminal)

from tx_scheduler_ray import _client, tx_ray_driver
from tx_scheduler_ray._states import JOB_STATES, replica_state

__all__ = ["describe_job", "replica_record", "roles_of"]

_MB = 1 << 20


def _spec_of(info: Any) -> Dict[str, Any]:
    env = ((getattr(info, "runtime_env", None) or {}).get("env_vars") or {})
    try:
        return json.loads(env.get(tx_ray_driver.SPEC_ENV, "{}"))
    except ValueError:
        return {}


def roles_of(info: Any, state: Optional[Dict[str, Any]]) -> List[Tuple[str, int]]:
    if state and state.get("roles"):
        return [(r["name"], len(r["replicas"])) for r in state["roles"]]
    return [(r["name"], int(r["num_replicas"])) for r in _spec_of(info).get("roles", [])]


def replica_record(state: Optional[Dict[str, Any]], role: str, k: int) -> Optional[Dict[str, Any]]:
    if not state:
        return None
    for r in state.get("roles", []):
        if r["name"] == role:
            for rep in r["replicas"]:
                if rep["id"] == k:
                    return rep
    return None


def _failure_cause(f: Dict[str, Any]) -> Optional[RootCause]:
    """Why the replica of the driver's failure record failed, as :mod:`tx.schedulers.why`
    reads the end of its stderr (``cause_tail``, this attempt's; ``stderr_tail``, its last
    lines, from a driver before it); None where nothing beyond its status and a last line
    is named."""
    code = f.get("exit_code")
    try:
        cause = root_cause(str(f["role"]), int(f["replica"]), f.get("cause_tail") or f.get("stderr_tail") or "",
                           exit_code=code if isinstance(code, int) else None)
    except (KeyError, TypeError, ValueError):
        return None
    return cause if names_cause(cause) else None


def _app_failure(f: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[RootCause]]:
    """The failure record that is the app's cause, and its root cause: the driver's
    ``failure`` (the replica whose end it saw first), except that among its ``others`` (the
    replicas that failed on their own while the driver waited, where that replica only lost
    its peer: :mod:`tx_scheduler_ray.tx_ray_driver._peers`), one that ended within 10 s of
    the first and names a cause other than a lost peer comes first
    (:func:`tx.schedulers.why.first_cause`, by each record's ``ended``, epoch s)."""
    others = [o for o in f.get("others") or [] if isinstance(o, dict)]

    def ended(rec: Dict[str, Any]) -> float:
        try:
            return float(rec["ended"])
        except (KeyError, TypeError, ValueError):
            return math.inf
    return first_cause([f, *others], ended, _failure_cause)


def _failure_text(f: Dict[str, Any]) -> str:
    """One line: which replica failed, how, where, and its last stderr lines."""
    code = f.get("exit_code")
    how = (f"exited with code {code}" if code is not None and code >= 0
           else f"was killed by signal {-code}" if code is not None else (f.get("msg") or "failed"))
    where = f" on {f['hostname']}" + (f" ({f['node_ip']})" if f.get("node_ip") else "") if f.get("hostname") else ""
    tail = " | ".join(ln.strip() for ln in (f.get("stderr_tail") or "").splitlines()[-3:] if ln.strip())
    text = f"{f['role']}/{f['replica']} {how}{where}"
    if f.get("attempt"):
        text += f" (attempt {f['attempt'] + 1})"
    if tail:
        text += f": {tail}"
    return text[:800]


def describe_job(app_id: str, url: str, sid: str, info: Any, state: Optional[Dict[str, Any]]) -> DescribeAppResponse:
    job_status = str(info.status)
    app_state = JOB_STATES.get(job_status, AppState.UNKNOWN)
    msg = info.message or job_status
    spec = _spec_of(info)
    if app_state == AppState.RUNNING:
        if state is None:
            app_state, msg = AppState.PENDING, "tx's Ray driver is starting"
        elif state.get("state") == "PENDING":
            app_state, msg = AppState.PENDING, state.get("msg") or "reserving resources"
        else:
            msg = state.get("msg") or "running"
    elif app_state == AppState.PENDING:
        msg = f"Ray job pending: {info.message}" if info.message else "Ray job pending"
    elif state is not None and state.get("msg"):
        msg = state["msg"]
    error = NONE
    cause: Optional[RootCause] = None
    if state and state.get("failure"):
        failure, cause = _app_failure(state["failure"])
        error = cause.text if cause is not None else _failure_text(failure)
        if failure is not state["failure"] and app_state == AppState.FAILED:
            # the driver's message names the replica whose end it saw first: name the cause's
            msg = f"{failure.get('role')}/{failure.get('replica')} failed: " \
                  f"{failure.get('msg') or 'exited with code ' + str(failure.get('exit_code'))}"
    elif app_state == AppState.FAILED:
        error = _client.one_line(Exception(info.message or "the Ray job failed"))
    roles_statuses = []
    if state and state.get("roles"):
        for r in state["roles"]:
            reps = []
            for rep in r["replicas"]:
                st = replica_state(rep.get("state"))
                if is_terminal(app_state) and not is_terminal(st):
                    st = {AppState.CANCELLED: AppState.CANCELLED, AppState.FAILED: AppState.FAILED}.get(app_state, AppState.UNKNOWN)
                err = NONE
                mine = cause if cause is not None and (cause.role, cause.replica) == (r["name"], rep["id"]) else None
                if st == AppState.FAILED:
                    err = mine.text if mine is not None else (rep.get("stderr_tail") or rep.get("msg") or NONE)
                reps.append(ReplicaStatus(id=rep["id"], state=st, role=r["name"], hostname=rep.get("hostname") or "",
                                          structured_error_msg=err, exit_code=rep.get("exit_code"),
                                          root_cause=mine if st == AppState.FAILED else None))
            roles_statuses.append(RoleStatus(r["name"], reps))
    else:
        rep_state = app_state if is_terminal(app_state) else AppState.PENDING
        for r in spec.get("roles", []):
            roles_statuses.append(RoleStatus(r["name"], [
                ReplicaStatus(id=i, state=rep_state, role=r["name"]) for i in range(int(r["num_replicas"]))]))
    attempts = _attempts(app_state, state, info)
    return DescribeAppResponse(
        app_id=app_id,
        state=app_state,
        attempts=attempts,
        num_restarts=int(state.get("num_restarts", 0)) if state else 0,
        msg=_client.one_line(Exception(msg)) if msg else NONE,
        structured_error_msg=error,
        root_cause=cause,
        ui_url=f"{url}/#/jobs/{sid}",
        roles_statuses=roles_statuses,
        roles=[_role(r) for r in spec.get("roles", [])],
        metadata={
            "submission_id": sid, "job_id": getattr(info, "job_id", None),
            "driver_node_id": getattr(info, "driver_node_id", None), "dashboard": url,
            "rank0": (state or {}).get("rank0") or {}, "ray_status": job_status,
            "attempts": [a.to_json() for a in attempts],
            "infra_retries": {k: (state or {}).get(k) for k in ("infra_retries", "infra_used")},
            "replicas": {
                f"{r['name']}/{rep['id']}": {k: rep.get(k) for k in ("pid", "actor_pid", "node_ip", "node_id", "attempt", "msg")}
                for r in (state or {}).get("roles", []) for rep in r["replicas"]
            },
        },
    )


def _attempts(app_state: AppState, state: Optional[Dict[str, Any]], info: Any) -> List[Attempt]:
    """The app's attempts from the driver's ``state.json``: each that ended in a failure
    (``infra``: a replica's actor or node lost; ``user``: a replica's own failure), then the
    current one (the app's state) unless the last recorded one ended the app; empty before
    the driver wrote its state. A Ray job that FAILED while its driver's state still says
    it runs lost its driver (the driver's process or node died: Ray's ``JobInfo.message``
    and ``error_type``, e.g. ``JOB_SUPERVISOR_ACTOR_DIED``): an infrastructure failure. So is
    a job that FAILED before its driver ran, where Ray lost the driver or the job's code
    package (:func:`_lost_before_the_driver`); other failures before the driver (a ``pip``
    requirement that does not install, no node that fits) give no attempt."""
    if not state:
        lost = _lost_before_the_driver(info) if app_state == AppState.FAILED else ""
        return [Attempt(0, app_state, FailureKind.INFRA, lost)] if lost else []
    out = []
    for a in state.get("attempts") or []:
        try:
            kind = FailureKind(a["kind"]) if a.get("kind") else None
            reason = str(a.get("reason") or "")
            if kind == FailureKind.INFRA and a.get("checkpoint_dir") and a.get("since") is not None:
                saved = what_saved(str(a["checkpoint_dir"]), float(a["since"]), float(a.get("until") or float("inf")))
                reason += f"; {saved}" if saved else ""  # what the lost replica saved, where this host reads it
            out.append(Attempt(int(a["index"]), replica_state(a.get("state")), kind, reason, bool(a.get("retried"))))
        except (KeyError, TypeError, ValueError):
            continue
    current = int(state.get("num_restarts", 0) or 0)
    if not out or out[-1].retried or out[-1].index < current:
        if app_state == AppState.FAILED and state.get("state") in ("PENDING", "RUNNING"):
            what = " ".join(x for x in (getattr(info, "error_type", None), getattr(info, "message", None)) if x)
            out.append(Attempt(current, app_state, FailureKind.INFRA,
                               _client.one_line(Exception(f"the job's driver was lost: {what or 'FAILED'}"))))
        else:
            out.append(Attempt(current, app_state))
    return out


#: what Ray says (``JobInfo.message``) when a job's code package is gone from the GCS as
#: the job's runtime environment is set up: Ray deleted it (its reference counting of
#: packages, ray-project/ray#36703, #46625), not the user's code
PACKAGE_LOST = "Failed to download runtime_env file package"


def _lost_before_the_driver(info: Any) -> str:
    """Why a Ray job that FAILED before tx's driver wrote its state is an infrastructure
    failure, in one line ("" where it is not): the job supervisor actor (which runs the
    driver) died, or its runtime environment found the job's ``working_dir`` or
    ``py_modules`` package gone (``error_type`` ``RUNTIME_ENV_SETUP_FAILURE`` with
    :data:`PACKAGE_LOST`). Ray's ``JobErrorType``:
    https://docs.ray.io/en/latest/cluster/running-applications/job-submission/doc/ray.job_submission.JobDetails.html"""
    kind = str(getattr(getattr(info, "error_type", None), "value", getattr(info, "error_type", None)) or "")
    message = str(getattr(info, "message", None) or "")
    if kind == "JOB_SUPERVISOR_ACTOR_DIED" or (kind == "RUNTIME_ENV_SETUP_FAILURE" and PACKAGE_LOST in message):
        return _client.one_line(Exception(f"Ray lost the job before tx's driver ran: {kind}: {message}"))
    return ""


def _role(r: Dict[str, Any]) -> Role:
    res = r.get("resources") or {}
    env = {k: v for k, v in (r.get("env") or {}).items() if not (k.startswith("TX_") or k.startswith("TORCHX_"))}
    return Role(
        r["name"], image=r.get("image", ""), entrypoint=r["entrypoint"], args=r.get("args", []), env=env,
        num_replicas=int(r["num_replicas"]), min_replicas=r.get("min_replicas"),
        max_retries=int(r.get("max_retries", 0)), retry_policy=RetryPolicy(r.get("retry_policy", "APPLICATION")),
        resource=Resource(cpu=int(res.get("CPU", 1)), gpu=int(res.get("GPU", 0)),
                          memMB=int(res.get("memory", 0)) // _MB),
    )
