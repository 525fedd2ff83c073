"""The attempts of an AWS Batch job and why each ended (:class:`tx.specs.Attempt`), from
``describe_jobs``' ``attempts``: a Spot reclaim or a lost instance (``statusReason``
``Host EC2 ...``) is the infrastructure's, another failure the user's."""
from __future__ import annotations

from typing import Any, Dict, List

from tx.specs import AppState, Attempt, FailureKind

from tx_scheduler_aws_batch.request import HOST_FAILURE_REASON

__all__ = ["batch_attempts"]


def batch_attempts(records: List[Dict[str, Any]], state: AppState) -> List[Attempt]:
    """Every attempt of a job with why it ended, from ``describe_jobs``' ``attempts``
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_AttemptDetail.html: the
    attempts that ended, oldest first). An attempt whose ``statusReason`` starts with
    ``Host EC2`` (a Spot reclaim, an instance lost) is an infrastructure failure; another
    failed one is the user's (its exit code, or the container's reason). ``state`` is the
    job's: the last ended attempt is its end when the job is terminal, else an attempt
    still going follows."""
    out = []
    terminal = state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)
    for i, rec in enumerate(records):
        reason = str(rec.get("statusReason") or "")
        container = rec.get("container") or {}
        code = container.get("exitCode")
        last = terminal and i == len(records) - 1
        if last and state != AppState.FAILED:
            out.append(Attempt(i, state, None, reason))
            continue
        if reason.startswith(HOST_FAILURE_REASON):
            kind = FailureKind.INFRA
        else:
            kind = FailureKind.USER
            reason = f"exit code {code}" if code is not None else str(container.get("reason") or reason)
        out.append(Attempt(i, AppState.FAILED, kind, reason, retried=not last))
    if not terminal:
        out.append(Attempt(len(records), state))
    return out
