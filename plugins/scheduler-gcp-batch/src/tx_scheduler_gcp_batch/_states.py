"""Google Cloud Batch job and task states -> :class:`tx.specs.AppState`.

Names are those of ``JobStatus.State`` and ``TaskStatus.State``
(https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs).
"""
from __future__ import annotations

from typing import Dict

from tx.specs import AppState

#: Batch ``JobStatus.State`` name -> AppState
JOB_STATES: Dict[str, AppState] = {
    "STATE_UNSPECIFIED": AppState.UNKNOWN,
    "QUEUED": AppState.SUBMITTED,
    "SCHEDULED": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
    "DELETION_IN_PROGRESS": AppState.UNKNOWN,
    "CANCELLATION_IN_PROGRESS": AppState.RUNNING,
    "CANCELLED": AppState.CANCELLED,
}
#: Batch ``TaskStatus.State`` name -> AppState of the replica
TASK_STATES: Dict[str, AppState] = {
    "STATE_UNSPECIFIED": AppState.UNKNOWN,
    "PENDING": AppState.PENDING,
    "ASSIGNED": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "FAILED": AppState.FAILED,
    "SUCCEEDED": AppState.SUCCEEDED,
    # "The Task has not been executed when the Job finishes" (TaskStatus.State,
    # https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs.taskGroups.tasks#State):
    # terminal, it never ran because the job ended first
    "UNEXECUTED": AppState.CANCELLED,
}
