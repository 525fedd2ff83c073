"""The attempts of a Slurm job and why each ended (:class:`tx.specs.Attempt`).

A job tx submitted restarts in two ways (see :mod:`tx_scheduler_slurm.request`): its batch
script requeues it after the user's failure and writes ``<attempt> user <status>`` to
``slurm-<jobid>.attempts`` first; Slurm requeues it itself after an infrastructure failure
(the batch script is killed with the job, so that attempt has no line). Slurm's own word
for each ended attempt comes from the jobcomp/filetxt log where it is readable: it logs one
line per attempt of the job (``JobState=NODE_FAIL``, ``PREEMPTED``; ``PENDING`` for a
requeue by ``scontrol requeue``).
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from tx.specs import AppState, Attempt, FailureKind

from tx_scheduler_slurm.request import attempts_file

__all__ = ["INFRA_STATES", "build_attempts", "read_attempts_file"]

#: Slurm job states (https://slurm.schedmd.com/job_state_codes.html) of an attempt that the
#: infrastructure ended, explained; ``REQUEUED`` without a ``user`` line is a requeue by an
#: administrator (``scontrol requeue``)
INFRA_STATES: Dict[str, str] = {
    "NODE_FAIL": "NODE_FAIL: a node of the job failed",
    "PREEMPTED": "PREEMPTED: a job of higher priority took its nodes",
    "BOOT_FAIL": "BOOT_FAIL: a node failed to boot",
    "REQUEUED": "REQUEUED: requeued by an administrator (scontrol requeue)",
}
#: jobcomp logs a requeue by ``scontrol requeue`` with the state the job is put in
_REQUEUE_WORDS = {"PENDING": INFRA_STATES["REQUEUED"], "REQUEUE_HOLD": INFRA_STATES["REQUEUED"]}
#: an ended attempt without a ``user`` line and without Slurm's word for it
_REQUEUED_BY_SLURM = "requeued by Slurm (a node failure, a preemption or scontrol requeue)"


def read_attempts_file(work_dir: str, app_id: str) -> Dict[int, Tuple[str, Optional[int]]]:
    """``{attempt: (what, status)}`` from ``slurm-<app_id>.attempts`` in ``work_dir``: what is
    ``user`` (with the ``srun`` status), ``preempted`` (with it) or ``exhausted`` (status
    None); empty where the file is missing or unreadable. Malformed lines are skipped, and
    so are the launchers' ``warned`` lines (a time limit's warning got: the batch script
    writes the attempt's ``preempted`` line after them where the job left on it)."""
    out: Dict[int, Tuple[str, Optional[int]]] = {}
    try:
        with open(os.path.join(work_dir, attempts_file(app_id)), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        words = line.split()
        if len(words) < 2 or not words[0].isdigit() or words[1] == "warned":
            continue
        status = int(words[2]) if len(words) > 2 and words[2].lstrip("-").isdigit() else None
        out[int(words[0])] = (words[1], status)
    return out


def build_attempts(
    restarts: int,
    app_state: AppState,
    slurm_state: str,
    recorded: Dict[int, Tuple[str, Optional[int]]],
    history: List[str],
    preempted: Optional[Dict[int, str]] = None,
) -> List[Attempt]:
    """Every attempt of a job, oldest first.

    Args:
        restarts: the job's restart count (``SLURM_RESTART_COUNT`` of its last attempt);
            -1 when the source does not say (then taken from ``recorded`` and ``history``).
        app_state: the app's state now (that of the last attempt).
        slurm_state: Slurm's state of the job now (``NODE_FAIL``, ``FAILED`` ...).
        recorded: what the batch script wrote (:func:`read_attempts_file`).
        history: Slurm's state of each ended attempt, in order, where known (jobcomp).
        preempted: the reason of each attempt the batch script recorded as preempted
            (``preempted`` lines, :mod:`tx_scheduler_slurm._preempt`): an infrastructure failure.
    """
    if restarts < 0:  # a user failure that was not the last attempt was followed by one more
        last = max(recorded, default=0)
        if recorded.get(last, ("",))[0] == "user" and app_state != AppState.FAILED:
            last += 1
        restarts = max(len(history) - 1, last, 0)
    attempts = []
    for k in range(restarts):
        what, status = recorded.get(k, ("", None))
        if what == "preempted":
            attempts.append(Attempt(k, AppState.FAILED, FailureKind.INFRA, (preempted or {}).get(k)
                                    or INFRA_STATES["PREEMPTED"], retried=True))
        elif what == "user":
            attempts.append(Attempt(k, AppState.FAILED, FailureKind.USER, _status_text(status), retried=True))
        else:
            word = history[k] if k < len(history) else ""
            attempts.append(Attempt(k, AppState.FAILED, FailureKind.INFRA,
                                    INFRA_STATES.get(word) or _REQUEUE_WORDS.get(word, _REQUEUED_BY_SLURM),
                                    retried=True))
    what, status = recorded.get(restarts, ("", None))
    kind: Optional[FailureKind] = None
    reason = ""
    if app_state == AppState.FAILED:
        if what == "exhausted":
            kind, reason = FailureKind.INFRA, "infra_retries exhausted: the job failed without running again"
        elif what == "user":
            kind, reason = FailureKind.USER, _status_text(status)
        elif what == "preempted":
            kind, reason = FailureKind.INFRA, (preempted or {}).get(restarts) or INFRA_STATES["PREEMPTED"]
        elif slurm_state in INFRA_STATES:
            kind, reason = FailureKind.INFRA, INFRA_STATES[slurm_state]
        else:
            kind, reason = FailureKind.USER, slurm_state
    elif app_state == AppState.CANCELLED:
        reason = slurm_state
    attempts.append(Attempt(restarts, app_state, kind, reason))
    return attempts


def _status_text(status: Optional[int]) -> str:
    return "srun failed" if status is None else f"srun exit code {status}"
