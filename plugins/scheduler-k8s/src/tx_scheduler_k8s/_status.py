"""Pods as replicas: their states, exit codes and host names, why a pending app waits and
why a failed one failed (the root cause the log of the pod that failed first names,
:func:`tx.schedulers.why.first_cause`).

Functions of the API server's pod objects (dicts in the API's JSON shape), used by
:meth:`tx_scheduler_k8s.scheduler.KubernetesBase.describe`.
"""
from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx.schedulers import first_cause, names_cause, root_cause
from tx.specs import AppState, ReplicaStatus, Role, RoleStatus, RootCause, is_terminal

from tx_scheduler_k8s import _pod
from tx_scheduler_k8s._client import Kube, KubeError
from tx_scheduler_k8s._states import POD_STATES

__all__ = ["CAUSE_TAIL_LINES", "DISRUPTION_TARGET", "ERROR_TAIL_LINES", "Failed", "cause_first", "disruption", "failure",
           "oom_killed", "pending_reason", "pod_error", "replica_statuses", "terminated", "ts"]

#: lines of a failed pod's log read for its root cause (tx.schedulers.why): torchrun prints
#: its report after the failed worker's traceback, and other workers' lines may follow
CAUSE_TAIL_LINES = 1000
#: lines of a failed pod's log quoted in ``structured_error_msg`` when no root cause is named
ERROR_TAIL_LINES = 3
#: a failed replica: (when its container finished, role name, replica index, its pod)
Failed = Tuple[float, str, int, Dict[str, Any]]

#: the pod condition of a pod evicted, preempted or lost with its node
#: (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions)
DISRUPTION_TARGET = "DisruptionTarget"


def disruption(pod: Mapping[str, Any]) -> str:
    """The reason of ``pod``'s ``DisruptionTarget`` condition (status True):
    ``EvictionByEvictionAPI``, ``PreemptionByScheduler``, ``DeletionByTaintManager``,
    ``TerminationByKubelet`` ...; "" when the pod has none (its end was not the
    infrastructure's)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True":
            return str(c.get("reason") or DISRUPTION_TARGET)
    return ""


_FRACTION = re.compile(r"(\.\d{1,6})\d*")


def container_status(code: Any, sig: Any) -> Optional[int]:
    """A terminated container's status as :func:`tx.schedulers.why.root_cause` takes it:
    its exit code, or minus its signal where the kubelet reports one (``signal``, set by
    some runtimes) or the code is 128 + a signal (129..159, as shells report it)."""
    if isinstance(sig, int) and sig > 0:
        return -sig
    if not isinstance(code, int):
        return None
    return -(code - 128) if 128 < code < 160 else code


def ts(value: Optional[str]) -> float:
    """An RFC 3339 time of the API server (``Z``, nanoseconds) as epoch seconds (inf if
    unreadable)."""
    if not value:
        return math.inf
    text = _FRACTION.sub(r"\1", value.replace("Z", "+00:00"), count=1)
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return math.inf


def terminated(pod: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``terminated`` state of the pod's first container that has one ({} if none)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated")
        if term:
            return term
    return {}


def replica_statuses(roles: List[Role], pods: List[Dict[str, Any]], state: AppState,
                     replica_label: str) -> Tuple[List[RoleStatus], List[Failed]]:
    """The status of each replica of ``roles`` (the newest pod of each, by the role-index and
    ``replica_label`` labels; a replica without a pod is PENDING, or the app's state once it
    ended), and the failed replicas, the one that finished first first."""
    by_key: Dict[Tuple[int, int], Dict[str, Any]] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        try:
            key = (int(labels[_pod.LABEL_ROLE_INDEX]), int(labels[replica_label]))
        except (KeyError, ValueError):
            continue
        old = by_key.get(key)
        if old is None or ts(old["metadata"].get("creationTimestamp")) <= ts(pod["metadata"].get("creationTimestamp")):
            by_key[key] = pod
    statuses, failed = [], []
    for idx, role in enumerate(roles):
        rs = RoleStatus(role.name)
        for k in range(role.num_replicas):
            pod = by_key.get((idx, k))
            if pod is None:
                rstate = state if is_terminal(state) else AppState.PENDING
                rs.replicas.append(ReplicaStatus(id=k, state=rstate, role=role.name))
                continue
            phase = (pod.get("status") or {}).get("phase", "Unknown")
            rstate = POD_STATES.get(phase, AppState.UNKNOWN)
            if state == AppState.CANCELLED and not is_terminal(rstate):
                rstate = AppState.CANCELLED
            term = terminated(pod)
            spec = pod.get("spec") or {}
            host = spec.get("hostname") or pod["metadata"]["name"]
            if spec.get("subdomain"):
                host = f"{host}.{spec['subdomain']}"
            rep = ReplicaStatus(id=k, state=rstate, role=role.name, hostname=host,
                                exit_code=term.get("exitCode") if term else None)
            if rstate == AppState.FAILED:
                failed.append((ts(term.get("finishedAt")), role.name, k, pod))
                rep.structured_error_msg = pod_error(pod)
            rs.replicas.append(rep)
        statuses.append(rs)
    failed.sort(key=lambda f: (f[0], f[1], f[2]))
    return statuses, failed

def pod_error(pod: Dict[str, Any]) -> str:
    """How the pod's container ended, in a few words (exit code, signal, reason, message)."""
    term = terminated(pod)
    st = pod.get("status") or {}
    parts = []
    if term:
        parts.append(f"exit code {term.get('exitCode')}")
        if term.get("signal"):
            parts.append(f"signal {term['signal']}")
    reason = term.get("reason") or st.get("reason")
    if reason:
        parts.append(str(reason))
    message = term.get("message") or st.get("message")
    if message:
        parts.append(" ".join(str(message).split()))
    return ", ".join(parts) or "failed"

def oom_killed(f: Failed) -> bool:
    """Whether the kernel's OOM killer ended the failed replica's container (its reason says
    so): a cause the pod itself explains, without its log."""
    return terminated(f[3]).get("reason") == "OOMKilled"


def failure(kube: Kube, ns: str, failed: List[Failed], msg: str,
            statuses: List[RoleStatus]) -> Tuple[str, Optional[RootCause]]:
    """Why the app failed: the root cause (a torchrun worker's exception,
    :mod:`tx.schedulers.why`) the end of the log of the pod that is the app's cause names,
    set on its replica too; else how its container ended and its last lines. That pod is
    the one whose container finished first (``failed``'s order: ``terminated.finishedAt``,
    whole seconds, then role and index), except that among the pods that finished within
    10 s of it, one whose log names a cause other than a lost peer, or one the OOM killer
    ended (no root cause is read for it: its reason says so), comes first
    (:func:`tx.schedulers.why.first_cause`: a DDP rank that raises makes the others fail in
    their next collective, and which pod ends first is a race); only those pods' logs are
    read."""
    if not failed:
        return msg or "the app failed", None
    raws: Dict[str, bytes] = {}

    def raw_of(f: Failed) -> bytes:
        name = f[3]["metadata"]["name"]
        if name not in raws:
            try:
                raws[name] = b"".join(kube.pod_log(ns, name, tail_lines=CAUSE_TAIL_LINES))
            except KubeError:
                raws[name] = b""
        return raws[name]

    def cause_of(f: Failed) -> Optional[RootCause]:
        term = terminated(f[3])
        cause = root_cause(f[1], f[2], raw_of(f), exit_code=container_status(term.get("exitCode"), term.get("signal")))
        return cause if names_cause(cause) else None

    chosen, cause = first_cause(failed, lambda f: f[0], cause_of, known=oom_killed)
    _, role, k, pod = chosen
    if cause is not None:
        rep = next((r for rs in statuses if rs.role == role for r in rs.replicas if r.id == k), None)
        if rep is not None:
            rep.structured_error_msg, rep.root_cause = cause.text, cause
        return cause.text, cause
    text = f"{role}/{k} (pod {pod['metadata']['name']}) failed first: {pod_error(pod)}"
    lines = [ln.strip() for ln in raw_of(chosen).decode("utf-8", "replace").splitlines() if ln.strip()][-ERROR_TAIL_LINES:]
    if lines:
        text += "; last lines: " + " | ".join(lines)
    return text, None


def cause_first(failed: List[Failed], cause: Optional[RootCause]) -> List[Failed]:
    """``failed`` with the failure :func:`failure` named as the app's cause first: the one
    of ``cause``'s replica, else (no root cause named) the first OOM-killed one within 10 s
    of the first failure, else the first; the others in their order. Reads no log."""
    if not failed:
        return failed
    chosen = next((f for f in failed if cause is not None and (f[1], f[2]) == (cause.role, cause.replica)), None)
    if chosen is None:
        chosen = first_cause(failed, lambda f: f[0], lambda f: None, known=oom_killed)[0]
    return [chosen, *(f for f in failed if f is not chosen)]


def pending_reason(pods: List[Dict[str, Any]], roles: List[Role]) -> str:
    """Why a pending app waits: its first unschedulable or waiting pod, "" if none says."""
    for pod in pods:
        st = pod.get("status") or {}
        if st.get("phase") != "Pending":
            continue
        for cond in st.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
                return f"pod {pod['metadata']['name']} unschedulable: {cond['message']}"
        for cs in st.get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") and waiting["reason"] != "ContainerCreating":
                return f"pod {pod['metadata']['name']} waiting: {waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    return ""
