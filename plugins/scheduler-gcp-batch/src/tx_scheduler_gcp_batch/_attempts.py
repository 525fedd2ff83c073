"""The attempts of a Batch job and why each ended (:class:`tx.specs.Attempt`): Batch retries
each task on its own; an execution that ended with one of Batch's reserved exit codes for a
lost VM (:data:`tx_scheduler_gcp_batch.request.INFRA_EXIT_CODES`) is the infrastructure's,
any other failure the user's."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from tx.schedulers import local_path, what_saved
from tx.specs import AppState, Attempt, FailureKind, is_terminal

from tx_scheduler_gcp_batch._status import Failed, task_index
from tx_scheduler_gcp_batch.request import INFRA_EXIT_CODES, PREEMPT_GRACE_S, TaskInfo

#: Batch's reserved exit code of a task whose Spot VM was preempted (after its notice)
SPOT_PREEMPTED = 50001

__all__ = ["batch_attempts", "retries"]


def retries(task: Any) -> int:
    """Restarts of a task: its executions (status events with a ``task_execution``) that
    ended, except the last one of a task that has ended."""
    runs = sum(1 for e in task.status.status_events if "task_execution" in e)
    ended = task.status.state.name in ("SUCCEEDED", "FAILED")
    return max(runs - 1, 0) if ended else runs


def _executions(task: Any) -> List[Tuple[Any, int]]:
    """The ended executions of ``task``, oldest first: (the time it ended, its exit code), from
    its status events that carry a ``task_execution``
    (https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs.taskGroups.tasks#StatusEvent)."""
    return [(e.event_time, int(e.task_execution.exit_code)) for e in task.status.status_events if "task_execution" in e]


def _batch_retries(spec: Any, execution: int, code: int) -> bool:
    """Whether Batch runs a task again after its ``execution``-th run (0 first) ended with
    ``code``: within the task spec's ``max_retry_count``, where its lifecycle policy lets it
    (``RETRY_TASK``: only the policy's exit codes; ``FAIL_TASK``: all but them;
    https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs#LifecyclePolicy)."""
    if spec is None or code == 0 or execution >= spec.max_retry_count:
        return False
    if not spec.lifecycle_policies:
        return True
    policy = spec.lifecycle_policies[0]
    match = code in list(policy.action_condition.exit_codes)
    return match if policy.action.name == "RETRY_TASK" else not match


def _checkpoint_dirs(job: Any) -> Dict[int, str]:
    """``{task index: TX_CHECKPOINT_DIR}`` of the tasks whose checkpoint directory is a
    directory of this host (the markers tx reads to say what a preempted task saved)."""
    out: Dict[int, str] = {}
    if not job.task_groups:
        return out
    for i, env in enumerate(job.task_groups[0].task_environments):
        loc = env.variables.get("TX_CHECKPOINT_DIR") or ""
        path = local_path(loc)
        if path is not None and os.path.isdir(path):
            out[i] = loc
    return out


def _saved(location: Optional[str], at: Any) -> str:
    """What a task preempted at ``at`` (the status event's time) saved in the notice before
    it: ``; saved step N in S s`` (or ``; no checkpoint saved ...``), "" where unknown."""
    if location is None or at is None or not hasattr(at, "timestamp"):
        return ""
    end = at.timestamp()
    text = what_saved(location, end - PREEMPT_GRACE_S, end)
    return f"; {text}" if text else ""


def _why(info: TaskInfo, code: Optional[int]) -> Tuple[FailureKind, str]:
    """Whose failure an execution of replica ``info`` that ended with ``code`` was: Batch's
    reserved exit codes for a VM lost under the task (:data:`INFRA_EXIT_CODES`: 50001 Spot
    preemption, 50002 VM reporting timeout, 50003 VM rebooted, 50006 VM recreated; retried
    within ``infra_retries``) are the infrastructure's, each with its reason; any other the user's."""
    who = f"{info.role}/{info.replica_id}"
    if code in INFRA_EXIT_CODES:
        return FailureKind.INFRA, f"{who}: {INFRA_EXIT_CODES[code]}, exit code {code}"
    return FailureKind.USER, f"{who}: exit code {code}" if code is not None else f"{who}: failed"


def batch_attempts(job: Any, layout: Dict[int, TaskInfo], tasks: List[Any], state: AppState,
                   failed: Optional[Failed]) -> List[Attempt]:
    """The app's attempts with why each ended. Batch retries each task on its own: every
    failed execution of a task that Batch ran again (a later execution, or one due by the
    task spec's retry rules, :func:`_batch_retries`) is an attempt, ``retried``, in the order
    they ended; then the app's last attempt: where it FAILED, the last execution of the
    replica that is the app's cause (``failed``, as
    :func:`tx_scheduler_gcp_batch._status.cause_failure` chose it: ``infra`` for one of
    :data:`INFRA_EXIT_CODES`, else ``user``), else the app's state. ``state`` is the job's.
    A task preempted on a Spot VM (50001) names what it saved in the notice before its
    status event (the completion markers under its ``TX_CHECKPOINT_DIR``, where that is a
    directory of this host: ``tx.schedulers.saves``)."""
    spec = job.task_groups[0].task_spec if job.task_groups else None
    ended = is_terminal(state)
    dirs = _checkpoint_dirs(job)
    last_end: Dict[int, Any] = {}
    retried: List[Tuple[Any, int, Tuple[FailureKind, str]]] = []
    for task in tasks:
        info = layout.get(task_index(task))
        if info is None:
            continue
        runs = _executions(task)
        if runs:
            last_end[info.index] = runs[-1][0]
        for j, (at, code) in enumerate(runs):
            if code != 0 and (j < len(runs) - 1 or (not ended and _batch_retries(spec, j, code))):
                kind, why = _why(info, code)
                if code == SPOT_PREEMPTED:
                    why += _saved(dirs.get(info.index), at)
                retried.append((at, info.index, (kind, why)))
    retried.sort(key=lambda r: (r[0] is None, r[0] or 0, r[1]))
    out = [Attempt(i, AppState.FAILED, kind, reason, retried=True) for i, (_, _, (kind, reason)) in enumerate(retried)]
    if state == AppState.FAILED and failed is not None:
        kind, reason = _why(failed[0], failed[1])
        if failed[1] == SPOT_PREEMPTED:
            reason += _saved(dirs.get(failed[0].index), last_end.get(failed[0].index))
        out.append(Attempt(len(out), AppState.FAILED, kind, reason))
    else:
        out.append(Attempt(len(out), state))
    return out
