"""Batch tasks as replicas: their states and exit codes, the tasks that failed and why the job
failed (the root cause the end of the stderr of the task that failed first names,
:func:`tx.schedulers.why.first_cause`). Functions of the client's
``Job`` and ``Task`` messages, used by :meth:`tx_scheduler_gcp_batch.scheduler.GcpBatchScheduler.describe`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from tx.schedulers import SchedulerError, first_cause, names_cause, root_cause
from tx.specs import AppState, ReplicaStatus, RoleStatus, RootCause, is_terminal

from tx_scheduler_gcp_batch._states import TASK_STATES
from tx_scheduler_gcp_batch.request import INFRA_EXIT_CODES, TaskInfo

__all__ = ["CAUSE_TAIL_LINES", "ERROR_TAIL_LINES", "Failed", "cause_failure", "console_url", "failure",
           "known_failure", "replica_statuses", "state_name", "task_index"]

#: stderr lines of a failed task read for its root cause (tx.schedulers.why): torchrun prints
#: its report after the failed worker's traceback
CAUSE_TAIL_LINES = 1000
#: stderr lines of a failed task quoted in ``structured_error_msg`` when no root cause is named
ERROR_TAIL_LINES = 3
#: a failed replica: its task, its exit code (None if unknown), its last event, and when it
#: ended (its last status event's time, epoch s; inf without one)
Failed = Tuple[TaskInfo, Optional[int], str, float]


def state_name(status: Any) -> str:
    """The name of a raw ``JobStatus`` or ``TaskStatus`` message's state ("" for a number
    this client does not know)."""
    value = status.DESCRIPTOR.fields_by_name["state"].enum_type.values_by_number.get(status.state)
    return value.name if value is not None else ""


def task_index(task: Any) -> int:
    """The index of a task (the last part of its name)."""
    return int(task.name.rsplit("/", 1)[-1])


def _exit_code(task: Any) -> Tuple[Optional[int], str]:
    for event in reversed(list(task.status.status_events)):
        if "task_execution" in event:
            return int(event.task_execution.exit_code), event.description
    events = list(task.status.status_events)
    return None, (events[-1].description if events else "")


def _ended_at(task: Any) -> float:
    """The time of ``task``'s last status event, epoch s, or inf without one
    (``TaskStatus.statusEvents[].eventTime``:
    https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs.taskGroups.tasks#StatusEvent)."""
    events = list(task.status.status_events)
    at = events[-1].event_time if events and events[-1].event_time else None
    return at.timestamp() if at is not None and hasattr(at, "timestamp") else math.inf


def replica_statuses(
    job: Any, layout: Dict[int, TaskInfo], tasks: List[Any], job_state: AppState
) -> Tuple[List[RoleStatus], List[Failed]]:
    """The status of each replica (task) of the job, and the failed replicas, the one that
    ended first first (its last status event's time; the lower index on a tie or without
    times)."""
    by_role: Dict[str, RoleStatus] = {}
    for info in layout.values():
        by_role.setdefault(info.role, RoleStatus(info.role, []))
    seen = set()
    failed: List[Failed] = []
    for task in sorted(tasks, key=task_index):
        idx = task_index(task)
        info = layout.get(idx)
        if info is None:
            continue
        seen.add(idx)
        state = TASK_STATES.get(task.status.state.name, AppState.UNKNOWN)
        code, event = _exit_code(task)
        if job_state == AppState.CANCELLED and not is_terminal(state):
            state = AppState.CANCELLED
        if state == AppState.SUCCEEDED:
            code = 0 if code is None else code
        elif state != AppState.FAILED:
            code = None
        rs = ReplicaStatus(info.replica_id, state, info.role, exit_code=code)
        if state == AppState.FAILED:
            rs.structured_error_msg = event or "failed"
            failed.append((info, code, event, _ended_at(task)))
        by_role[info.role].replicas.append(rs)
    pending = AppState.CANCELLED if job_state == AppState.CANCELLED else AppState.PENDING
    for idx, info in layout.items():
        if idx not in seen:
            by_role[info.role].replicas.append(ReplicaStatus(info.replica_id, pending, info.role))
    for rs in by_role.values():
        rs.replicas.sort(key=lambda r: r.id)
    failed.sort(key=lambda f: f[3])  # stable: the lower index on a tie
    return list(by_role.values()), failed


def known_failure(f: Failed) -> bool:
    """Whether Batch itself says why failed replica ``f`` ended, so that it is a cause
    without its stderr (:func:`tx.schedulers.why.first_cause`'s ``known``): its last
    execution's exit code (``StatusEvent.taskExecution.exitCode``, an int) is one of
    Batch's reserved codes for a VM lost under the task
    (:data:`tx_scheduler_gcp_batch.request.INFRA_EXIT_CODES`, the infrastructure failures
    of :func:`tx_scheduler_gcp_batch._attempts.batch_attempts`:
    https://cloud.google.com/batch/docs/troubleshooting#reserved-exit-codes); its status
    event says so (``replica_statuses`` puts it in ``structured_error_msg``)."""
    return f[1] in INFRA_EXIT_CODES


def console_url(job_name: str) -> str:
    """The Cloud Console page of the job named ``job_name`` ("" for a name not of that shape)."""
    parts = job_name.split("/")
    if len(parts) == 6:
        return f"https://console.cloud.google.com/batch/jobsDetail/regions/{parts[3]}/jobs/{parts[5]}/details?project={parts[1]}"
    return ""


def failure(job: Any, failed: List[Failed], statuses: List[RoleStatus],
            last_lines: Callable[[int, int], List[str]]) -> Tuple[str, Optional[RootCause]]:
    """Why the job failed: the root cause (a torchrun worker's exception,
    :mod:`tx.schedulers.why`) the end of the stderr of the task that is the job's cause
    names, set on its replica too; else one line with that task, its exit code and event,
    and its last stderr lines; else (no failed task) the job's last status event. That task
    is the one that ended first (``failed``'s first), except that among the tasks that
    ended within 10 s of it, one whose stderr names a cause other than a lost peer, or one
    whose VM Batch lost (:func:`known_failure`: its stderr is not read for a root cause, its
    exit code and event say why), comes first (:func:`tx.schedulers.why.first_cause`: a DDP rank that raises makes the others
    fail in their next collective, and which task ends first is a race); only those
    tasks' stderr is read. ``last_lines(task index, n)``: the last ``n`` stderr lines of a
    task."""
    if not failed:
        events = list(job.status.status_events)
        return (events[-1].description if events else "the Batch job failed"), None
    read: Dict[int, List[str]] = {}

    def lines_of(info: TaskInfo) -> List[str]:
        if info.index not in read:
            try:
                read[info.index] = [ln.rstrip("\n") for ln in last_lines(info.index, CAUSE_TAIL_LINES)]
            except SchedulerError:
                read[info.index] = []
        return read[info.index]

    def cause_of(f: Failed) -> Optional[RootCause]:
        cause = root_cause(f[0].role, f[0].replica_id, "\n".join(lines_of(f[0])), exit_code=f[1])
        return cause if names_cause(cause) else None

    (info, code, event, _), cause = first_cause(failed, lambda f: f[3], cause_of, known=known_failure)
    if cause is not None:
        for rs in statuses:
            for rep in rs.replicas:
                if (rs.role, rep.id) == (info.role, info.replica_id):
                    rep.structured_error_msg, rep.root_cause = cause.text, cause
        return cause.text, cause
    text = f"{info.role}[{info.replica_id}] (task {info.index}) failed"
    if code is not None:
        text += f" with exit code {code}"
    if event:
        text += f": {event}"
    tail = [ln for ln in lines_of(info) if ln.strip()][-ERROR_TAIL_LINES:]
    if tail:
        text += " | last stderr: " + " / ".join(tail)
    return text, None


def cause_failure(failed: List[Failed], cause: Optional[RootCause]) -> Optional[Failed]:
    """The failure :func:`failure` named as the job's cause: the one of ``cause``'s replica,
    else (no root cause named) the first whose VM was lost (:func:`known_failure`) within
    10 s of the first failure, else the first; None without failures. Reads no log."""
    if cause is not None:
        for f in failed:
            if (f[0].role, f[0].replica_id) == (cause.role, cause.replica):
                return f
    return first_cause(failed, lambda f: f[3], lambda f: None, known=known_failure)[0] if failed else None
