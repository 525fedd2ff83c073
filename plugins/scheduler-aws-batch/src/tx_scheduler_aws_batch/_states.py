"""AWS Batch job statuses -> :class:`tx.specs.AppState`.

Statuses are those of ``describe_jobs``
(https://docs.aws.amazon.com/batch/latest/APIReference/API_JobDetail.html). Batch has no
cancelled status: ``cancel`` terminates a job with :data:`CANCEL_REASON`, and a FAILED job
with that reason is CANCELLED.
"""
from __future__ import annotations

from tx.specs import AppState

#: the reason ``cancel`` gives ``terminate_job``; a FAILED job with it is CANCELLED
CANCEL_REASON = "cancelled by tx (tx cancel)"

_STATES = {
    "SUBMITTED": AppState.PENDING,
    "PENDING": AppState.PENDING,
    "RUNNABLE": AppState.PENDING,
    "STARTING": AppState.PENDING,
    "RUNNING": AppState.RUNNING,
    "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
}


def appstate_from_batch(status: str, reason: str = "") -> AppState:
    """The :class:`AppState` of a Batch job status (SUBMITTED, PENDING, RUNNABLE and
    STARTING are PENDING, as in TorchX); FAILED with :data:`CANCEL_REASON` is CANCELLED;
    an unknown status is UNKNOWN."""
    if status == "FAILED" and reason.startswith(CANCEL_REASON):
        return AppState.CANCELLED
    return _STATES.get(status, AppState.UNKNOWN)
