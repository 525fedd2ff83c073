"""Turning Slurm's job records and the replicas' exit-code files into a DescribeAppResponse.

Slurm records one state and one exit code per het job component, and in a tx job every
component shares the batch script's outcome (``NonZeroExitCode`` for all when one replica
fails). Which replica failed, and with what status, comes from the ``.exitcode`` file each
replica's launcher writes (see :mod:`tx_scheduler_slurm.request`); a file written in an
earlier attempt of a requeued job is ignored.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from tx.schedulers import DescribeAppResponse
from tx.specs import MISSING, NONE, NULL_RESOURCE, AppState, ReplicaStatus, Resource, Role, RoleStatus

from tx_scheduler_slurm._parse import JobRecord, split_job_name
from tx_scheduler_slurm._states import appstate_from_slurm
from tx_scheduler_slurm.request import log_file

#: bytes and lines of a failed replica's stderr kept as its structured error message
ERROR_TAIL_BYTES = 4096
ERROR_TAIL_LINES = 20


def read_exit_code(
    work_dir: str, app_id: str, role: str, replica_id: int, restarts: int
) -> Tuple[Optional[int], float]:
    """The exit status the replica's launcher recorded in its current attempt and when
    (the file's mtime, seconds since the epoch); ``(None, 0.0)`` when there is no file, it
    is unreadable, or another attempt than ``restarts`` wrote it (``restarts`` = -1,
    unknown: any attempt's)."""
    if not work_dir:
        return None, 0.0
    path = os.path.join(work_dir, log_file(app_id, role, replica_id, "exitcode"))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            attempt, _, status = f.read().strip().partition(" ")
            mtime = os.fstat(f.fileno()).st_mtime
    except OSError:
        return None, 0.0
    if not (attempt.isdigit() and status.lstrip("-").isdigit()):
        return None, 0.0
    if restarts >= 0 and int(attempt) != restarts:
        return None, 0.0
    return int(status), mtime


def stderr_tail(path: str) -> str:
    """The last :data:`ERROR_TAIL_LINES` lines (at most :data:`ERROR_TAIL_BYTES` bytes) of
    a file; NONE when it is missing or empty."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - ERROR_TAIL_BYTES))
            data = f.read()
    except OSError:
        return NONE
    lines = data.decode("utf-8", "replace").splitlines()
    if size > ERROR_TAIL_BYTES and lines:
        lines = lines[1:]  # the first line was cut
    text = "\n".join(lines[-ERROR_TAIL_LINES:]).strip()
    return text or NONE


def group_replicas(records: List[JobRecord]) -> Dict[str, List[Tuple[int, JobRecord]]]:
    """Role name -> ``[(replica_id, record), ...]`` in het-group order. Components named
    ``<role>-<k>`` (tx's names) give role and replica; any other name is a role of its own
    whose replicas are numbered in order."""
    roles: Dict[str, List[Tuple[int, JobRecord]]] = {}
    for rec in sorted(records, key=lambda r: r.offset):
        role, idx = split_job_name(rec.name)
        replicas = roles.setdefault(role, [])
        replicas.append((idx if idx is not None else len(replicas), rec))
    return roles


def _resource(rec: JobRecord) -> Resource:
    if rec.cpus_per_task < 0 and rec.mem_mb < 0 and rec.gpus < 0:
        return NULL_RESOURCE
    return Resource(cpu=rec.cpus_per_task, gpu=max(rec.gpus, 0), memMB=rec.mem_mb)


def replica_state(app_state: AppState, slurm_state: AppState, exit_code: Optional[int]) -> AppState:
    """A replica's state: from its recorded exit status when there is one (0: SUCCEEDED,
    else FAILED, or CANCELLED when the app was cancelled), else its component's state."""
    if exit_code is None:
        return slurm_state
    if exit_code == 0:
        return AppState.SUCCEEDED
    return AppState.CANCELLED if app_state == AppState.CANCELLED else AppState.FAILED


def build_describe(app_id: str, records: List[JobRecord], source: str) -> DescribeAppResponse:
    """The description of ``app_id`` from its component records (at least one)."""
    leader = min(records, key=lambda r: r.offset)
    app_state = appstate_from_slurm(leader.state)
    work_dir = leader.work_dir
    roles: List[Role] = []
    statuses: List[RoleStatus] = []
    failures: List[Tuple[float, str]] = []  # (when, error) of failed replicas
    for role_name, replicas in group_replicas(records).items():
        rs = RoleStatus(role_name, [])
        for idx, rec in replicas:
            rec_dir = rec.work_dir or work_dir
            code, when = read_exit_code(rec_dir, app_id, role_name, idx, leader.restarts)
            state = replica_state(app_state, appstate_from_slurm(rec.state), code)
            error = NONE
            if state == AppState.FAILED and code is not None:
                error = stderr_tail(os.path.join(rec_dir, log_file(app_id, role_name, idx, "err")))
                failures.append((when, error))
            rs.replicas.append(ReplicaStatus(
                id=idx, state=state, role=role_name, hostname=rec.nodes,
                structured_error_msg=error, exit_code=code,
            ))
        statuses.append(rs)
        head = replicas[0][1]
        roles.append(Role(
            name=role_name,
            image=head.work_dir or work_dir,
            entrypoint=head.command or MISSING,
            num_replicas=len(replicas),
            resource=_resource(head),
        ))
    # the replica that failed first is the cause; srun then kills the others
    first_error = min(failures, key=lambda f: f[0])[1] if failures else NONE
    reason = f" ({leader.reason})" if leader.reason and leader.reason != "None" else ""
    return DescribeAppResponse(
        app_id=app_id,
        state=app_state,
        num_restarts=leader.restarts,
        msg=f"{leader.state or 'UNKNOWN'}{reason}",
        structured_error_msg=first_error,
        roles_statuses=statuses,
        roles=roles,
        metadata={"work_dir": work_dir, "source": source, "partition": leader.partition},
    )
