"""Batch jobs as apps: the roles and node ranges of a job (rebuilt from its definition), the
state of each replica (from the node jobs ``<jobId>#<node>`` where Batch has them) and why a
failed job failed (the root cause the end of the log of the node that failed first names,
:func:`tx.schedulers.why.first_cause`). Functions
of ``describe_jobs`` records, used by :meth:`tx_scheduler_aws_batch.scheduler.AwsBatchScheduler.describe`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from tx.schedulers import env as env_contract, first_cause, names_cause, root_cause
from tx.specs import AppState, ReplicaStatus, Resource, Role, RoleStatus, RootCause, macros

from tx_scheduler_aws_batch._states import appstate_from_batch
from tx_scheduler_aws_batch.request import HOST_FAILURE_REASON, PREEMPT_GRACE_ENV, REPLICA_ID_TOKEN, unwrap_command
from tx_scheduler_aws_batch.resources import K8S_ITYPE

__all__ = ["CAUSE_TAIL_LINES", "ERROR_TAIL_LINES", "OOM_REASON", "FailedNode", "failure", "known_failure",
           "replica_statuses", "role_of", "role_ranges"]

#: log events (lines) of a failed node read for its root cause (tx.schedulers.why): torchrun
#: prints its report after the failed worker's traceback
CAUSE_TAIL_LINES = 1000
#: log lines of a failed node quoted in ``structured_error_msg`` when no root cause is named
ERROR_TAIL_LINES = 3
#: how a container's ``reason`` (``ContainerDetail.reason``, a string of at most 255
#: characters: https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerDetail.html)
#: begins when ECS stopped it for using more memory than it was given
#: (``OutOfMemoryError: Container killed due to memory usage``:
#: https://docs.aws.amazon.com/AmazonECS/latest/developerguide/out-of-memory.html)
OOM_REASON = "OutOfMemoryError"


class FailedNode(NamedTuple):
    """A failed replica's node job."""

    ended: float  #: its ``stoppedAt``, epoch s (inf where Batch gives none)
    role: str
    replica: int  #: index within the role
    node: int  #: node index within the job
    exit_code: Any  #: its container's, None where unknown
    line: str  #: one line: ``<role>[k] (node n) failed with exit code c: <reason>``
    known: bool = False  #: Batch says why it ended (:func:`known_failure`), no log needed


def known_failure(status_reason: str, container_reason: str) -> bool:
    """Whether Batch itself says why a node job (or attempt) ended, so that it is a cause
    without its log (:func:`tx.schedulers.why.first_cause`'s ``known``): its container's
    ``reason`` (str) begins with :data:`OOM_REASON` (ECS killed it for memory), or its
    ``statusReason`` (str) begins with
    :data:`~tx_scheduler_aws_batch.request.HOST_FAILURE_REASON` (its host went away, the
    infrastructure failure of :func:`tx_scheduler_aws_batch._attempts.batch_attempts`).
    ``DescribeJobs``' fields: https://docs.aws.amazon.com/batch/latest/APIReference/API_JobDetail.html"""
    return container_reason.startswith(OOM_REASON) or status_reason.startswith(HOST_FAILURE_REASON)


def _range(target: str, num_nodes: int) -> Tuple[int, int]:
    start, sep, end = target.partition(":")
    if not sep:
        return int(start), int(start)
    return int(start or 0), int(end) if end else num_nodes - 1


def role_ranges(job: Dict[str, Any]) -> List[Tuple[str, int, int, Dict[str, Any]]]:
    """``(role name, first node, last node, container)`` per node range; an array child
    (a ``container`` job) is one replica of the role its env names."""
    if not job.get("nodeProperties") and job.get("container"):
        container = job["container"]
        env = {e["name"]: e["value"] for e in container.get("environment", [])}
        return [(env.get(env_contract.ROLE_NAME) or "node0", 0, 0, container)]
    props = job.get("nodeProperties", {})
    num = int(props.get("numNodes", 0))
    out = []
    for i, rng in enumerate(props.get("nodeRangeProperties", [])):
        container = rng.get("container", {})
        env = {e["name"]: e["value"] for e in container.get("environment", [])}
        name = env.get(env_contract.ROLE_NAME) or env.get("TORCHX_ROLE_NAME") or f"node{i}"
        start, end = _range(str(rng.get("targetNodes", "0")), num)
        out.append((name, start, end, container))
    return out


def role_of(name: str, start: int, end: int, container: Dict[str, Any]) -> Role:
    """The role of node range ``start``..``end`` rebuilt from its container properties."""
    env = {e["name"]: e["value"] for e in container.get("environment", [])}
    env = {
        k: v.replace(REPLICA_ID_TOKEN, macros.replica_id) for k, v in env.items()
        if env_contract.torchx_name(k) is None and not k.startswith("TORCHX_") and k != PREEMPT_GRACE_ENV
    }
    entrypoint, args = unwrap_command(list(container.get("command", [])))
    reqs = {r["type"]: r["value"] for r in container.get("resourceRequirements", [])}
    caps = {K8S_ITYPE: container["instanceType"]} if container.get("instanceType") else {}
    resource = Resource(
        cpu=int(float(reqs.get("VCPU", container.get("vcpus", 1)))),
        gpu=int(reqs.get("GPU", 0)),
        memMB=int(reqs.get("MEMORY", container.get("memory", 0))),
        capabilities=caps,
    )
    return Role(name, image=str(container.get("image", "")), entrypoint=entrypoint, args=args, env=env,
                num_replicas=end - start + 1, resource=resource)


def replica_statuses(job: Dict[str, Any], nodes: Dict[int, Dict[str, Any]], state: AppState, reason: str,
                     ) -> Tuple[List[RoleStatus], List[Role], List[FailedNode]]:
    """The status of each replica of ``job`` (``nodes``: its node jobs by index, where Batch
    has them; else each replica has the job's ``state``), its roles, and its failed node
    jobs, in node order (:class:`FailedNode`). A failed replica whose end Batch explains
    (:func:`known_failure`: killed for memory, its host lost) has its one line in
    ``structured_error_msg`` (``trainer[1] (node 1) failed with exit code 137:
    OutOfMemoryError: ...``)."""
    roles_statuses = []
    roles = []
    failed: List[FailedNode] = []
    for name, start, end, container in role_ranges(job):
        replicas = []
        for idx in range(start, end + 1):
            node = nodes.get(idx)
            if node is not None:
                nstatus = str(node.get("status", ""))
                nreason = str(node.get("statusReason", ""))
                rstate = appstate_from_batch(nstatus, nreason or reason)
                ncontainer = node.get("container") or {}
                exit_code = ncontainer.get("exitCode")
                nics = ncontainer.get("networkInterfaces") or [{}]
                host = str(nics[0].get("privateIpv4Address", ""))
                known = False
                if rstate == AppState.FAILED:
                    why = ncontainer.get("reason") or nreason
                    known = known_failure(nreason, str(ncontainer.get("reason") or ""))
                    line = (
                        f"{name}[{idx - start}] (node {idx}) failed"
                        + (f" with exit code {exit_code}" if exit_code is not None else "")
                        + (f": {why}" if why else "")
                    )
                    stopped = node.get("stoppedAt")
                    ended = stopped / 1000.0 if isinstance(stopped, (int, float)) and stopped > 0 else math.inf
                    failed.append(FailedNode(ended, name, idx - start, idx, exit_code, line, known))
            else:
                rstate, exit_code, host, known = state, None, "", False
            rep = ReplicaStatus(id=idx - start, state=rstate, role=name, hostname=host, exit_code=exit_code)
            if known:
                rep.structured_error_msg = failed[-1].line
            replicas.append(rep)
        roles_statuses.append(RoleStatus(name, replicas))
        roles.append(role_of(name, start, end, container))
    return roles_statuses, roles, failed


def failure(job: Dict[str, Any], failed: List[FailedNode], reason: str, statuses: List[RoleStatus],
            last_lines: Callable[[Optional[int]], List[str]]) -> Tuple[str, Optional[RootCause]]:
    """Why the job failed: the root cause (a torchrun worker's exception,
    :mod:`tx.schedulers.why`) the end of the log of the node that is the job's cause names,
    set on its replica too; else one line with that node (exit code, reason), or the job's,
    and its last log lines. That node is the one that stopped first (``stoppedAt``; the
    lower node index on a tie), except that among the nodes that stopped within 10 s of it,
    one whose log names a cause other than a lost peer, or one whose end Batch explains
    (:attr:`FailedNode.known`: killed for memory, its host lost; its log is not read for a
    root cause, its line says why), comes first
    (:func:`tx.schedulers.why.first_cause`: a DDP rank that raises makes the others fail in
    their next collective, and which node stops first is a race); only those nodes' logs
    are read. Without node jobs (moto) the job's own log and exit code stand for its
    replica when it has only one; with several, which one failed is unknown and no root
    cause is named. ``last_lines(node index)``: the last :data:`CAUSE_TAIL_LINES` lines of
    the node's log (None: of the job's own log)."""
    reps = [(rs.role, r) for rs in statuses for r in rs.replicas]
    read: Dict[Optional[int], List[str]] = {}

    def lines_of(node: Optional[int]) -> List[str]:
        if node not in read:
            read[node] = last_lines(node)
        return read[node]

    def cause_of(role: str, k: int, node: Optional[int], code: Any) -> Optional[RootCause]:
        cause = root_cause(role, k, "\n".join(lines_of(node)), exit_code=code if isinstance(code, int) else None)
        return cause if names_cause(cause) else None

    if failed:
        chosen, cause = first_cause(failed, lambda f: f.ended, lambda f: cause_of(f.role, f.replica, f.node, f.exit_code),
                                    known=lambda f: f.known)
        line, node = chosen.line, chosen.node
    else:
        name = job.get("jobName", "")
        container = job.get("container", {}) or {}
        code, why = container.get("exitCode"), container.get("reason") or reason
        line = f"job {name} failed" + (f" with exit code {code}" if code is not None else "") + (
            f": {why}" if why else "")
        node, cause = None, (cause_of(reps[0][0], reps[0][1].id, None, code) if len(reps) == 1 else None)
    if cause is not None:
        for r_role, rep in reps:
            if (r_role, rep.id) == (cause.role, cause.replica):
                rep.structured_error_msg, rep.root_cause = cause.text, cause
        return cause.text, cause
    tail = [" ".join(ln.split())[:200] for ln in lines_of(node) if ln.strip()][-ERROR_TAIL_LINES:]
    return line + (f"; last lines: {' | '.join(tail)}" if tail else ""), None
