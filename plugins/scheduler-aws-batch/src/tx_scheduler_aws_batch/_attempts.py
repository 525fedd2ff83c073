"""The attempts of an AWS Batch job and why each ended (:class:`tx.specs.Attempt`), from
``describe_jobs``' ``attempts``: a Spot reclaim or a lost instance (``statusReason``
``Host EC2 ...``) is the infrastructure's, another failure the user's. Such an attempt names
what the job saved in the grace before it stopped (ECS stops a container with SIGTERM, then
SIGKILL after ``ECS_CONTAINER_STOP_TIMEOUT``: the run option ``preempt_grace``), read from
the completion markers under its ``TX_CHECKPOINT_DIR`` where that is a directory of this
host (:mod:`tx.schedulers.saves`)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from tx.schedulers import local_path, what_saved
from tx.specs import AppState, Attempt, FailureKind

from tx_scheduler_aws_batch.request import DEFAULT_PREEMPT_GRACE, HOST_FAILURE_REASON, PREEMPT_GRACE_ENV

__all__ = ["batch_attempts", "saves_of"]

#: (the checkpoint directory this host reads, the grace in seconds), or None
Saves = Optional[Tuple[str, float]]


def saves_of(job: Dict[str, Any]) -> Saves:
    """The job's ``TX_CHECKPOINT_DIR`` where it is a directory of this host, and the grace
    its containers were given (``TX_PREEMPT_GRACE``), from its container or node properties;
    None where tx cannot read what was saved."""
    containers = [job.get("container") or {}] + [
        r.get("container") or {} for r in (job.get("nodeProperties") or {}).get("nodeRangeProperties") or []]
    for c in containers:
        env = {e.get("name"): e.get("value") for e in c.get("environment") or []}
        loc = env.get("TX_CHECKPOINT_DIR")
        if not loc:
            continue
        path = local_path(str(loc))
        if path is None or not os.path.isdir(path):
            return None
        try:
            grace = float(env.get(PREEMPT_GRACE_ENV) or DEFAULT_PREEMPT_GRACE)
        except ValueError:
            grace = float(DEFAULT_PREEMPT_GRACE)
        return str(loc), grace
    return None


def _saved(saves: Saves, rec: Dict[str, Any]) -> str:
    """``; saved step N in S s`` (or ``; no checkpoint saved ...``) for an attempt that
    stopped at its ``stoppedAt`` (ms), "" where unknown."""
    stopped = rec.get("stoppedAt")
    if saves is None or not isinstance(stopped, (int, float)) or stopped <= 0:
        return ""
    end = stopped / 1000.0
    text = what_saved(saves[0], end - saves[1], end)
    return f"; {text}" if text else ""


def batch_attempts(records: List[Dict[str, Any]], state: AppState, job_reason: str = "",
                   saves: Saves = None) -> List[Attempt]:
    """Every attempt of a job with why it ended, from ``describe_jobs``' ``attempts``
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_AttemptDetail.html: the
    attempts that ended, oldest first). An attempt whose ``statusReason`` starts with
    ``Host EC2`` (a Spot reclaim, an instance lost) is an infrastructure failure, naming
    what was saved before it stopped (``saves``, :func:`saves_of`); another failed one is
    the user's (its exit code, or the container's reason). The last attempt of a FAILED job
    without a ``statusReason`` of its own takes the job's (``job_reason``: AWS gives both;
    moto only the job's). ``state`` is the job's: the last ended attempt is its end when
    the job is terminal, else an attempt still going follows."""
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
        if last and not reason:
            reason = job_reason
        if reason.startswith(HOST_FAILURE_REASON):
            kind = FailureKind.INFRA
            saved = _saved(saves, rec)
            reason = reason.rstrip(".") + saved if saved else reason
        else:
            kind = FailureKind.USER
            reason = f"exit code {code}" if code is not None else str(container.get("reason") or reason)
        out.append(Attempt(i, AppState.FAILED, kind, reason, retried=not last))
    if not terminal:
        out.append(Attempt(len(records), state))
    return out
