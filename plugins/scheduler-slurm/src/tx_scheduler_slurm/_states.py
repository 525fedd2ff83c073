"""Slurm job states -> :class:`tx.specs.AppState`.

The states are those of ``squeue``/``sacct``/``scontrol`` long form
(https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES). ``sacct`` appends text
(``CANCELLED by 1000``) and marks truncated values with ``+``; both are stripped. A state
this table does not know maps to UNKNOWN, never to an exception (TorchX 0.7 asserted).
"""
from __future__ import annotations

from typing import Mapping

from tx.specs import AppState

SLURM_STATES: Mapping[str, AppState] = {
    # waiting (again) for resources or for a retry
    "PENDING": AppState.PENDING,
    "CONFIGURING": AppState.PENDING,
    "REQUEUED": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "RESIZING": AppState.PENDING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "SUSPENDED": AppState.PENDING,
    "STOPPED": AppState.PENDING,
    # running, or finishing
    "RUNNING": AppState.RUNNING,
    "COMPLETING": AppState.RUNNING,
    "SIGNALING": AppState.RUNNING,
    "STAGE_OUT": AppState.RUNNING,
    # done
    "COMPLETED": AppState.SUCCEEDED,
    "CANCELLED": AppState.CANCELLED,
    "BOOT_FAIL": AppState.FAILED,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PREEMPTED": AppState.FAILED,
    "REVOKED": AppState.FAILED,
    "SPECIAL_EXIT": AppState.FAILED,
    "TIMEOUT": AppState.FAILED,
}


def normalize_state(raw: str) -> str:
    """The bare state name of a Slurm state text: ``"CANCELLED by 0"`` -> ``CANCELLED``,
    ``"CANCELLED+"`` -> ``CANCELLED``, ``" running "`` -> ``RUNNING``; ``""`` for blank text."""
    words = raw.split()
    return words[0].rstrip("+").upper() if words else ""


def appstate_from_slurm(raw: str) -> AppState:
    """Map a Slurm job state text to an AppState; UNKNOWN for states not in
    :data:`SLURM_STATES` (including empty text)."""
    return SLURM_STATES.get(normalize_state(raw), AppState.UNKNOWN)
