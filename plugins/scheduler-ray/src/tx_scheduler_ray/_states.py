"""Ray job statuses and the driver's replica states -> :class:`tx.specs.AppState`.

Job statuses are those of Ray's Job Submission API (``ray.job_submission.JobStatus``,
https://docs.ray.io/en/latest/cluster/running-applications/job-submission/api.html); replica
states are written by tx's driver as :class:`AppState` names.
"""
from __future__ import annotations

from typing import Optional

from tx.specs import AppState

#: ``JobStatus`` name -> AppState (a stopped job was cancelled)
JOB_STATES = {
    "PENDING": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
    "STOPPED": AppState.CANCELLED,
}


def replica_state(name: Optional[str]) -> AppState:
    """The AppState named ``name`` (a replica state the driver recorded); UNKNOWN for
    anything else."""
    try:
        return AppState[str(name)]
    except KeyError:
        return AppState.UNKNOWN
