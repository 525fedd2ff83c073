"""``torchx.schedulers.slurm_scheduler``: tx-scheduler-slurm's ``tx_scheduler_slurm.scheduler``,
plus TorchX 0.7.0's ``SLURM_STATES`` (Slurm job state -> AppState)."""
from typing import Mapping

from tx.specs.api import AppState
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_slurm.scheduler", "tx-scheduler-slurm")

#: Slurm's job states (https://slurm.schedmd.com/squeue.html#SECTION_JOB-STATE-CODES) as
#: TorchX 0.7.0 maps them (tx-scheduler-slurm maps more states, the same way)
SLURM_STATES: Mapping[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
    "COMPLETED": AppState.SUCCEEDED,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PENDING": AppState.PENDING,
    "PREEMPTED": AppState.FAILED,
    "RUNNING": AppState.RUNNING,
    "REQUEUED": AppState.PENDING,
    "RESIZING": AppState.PENDING,
    "REVOKED": AppState.FAILED,
    "SUSPENDED": AppState.PENDING,
    "TIMEOUT": AppState.FAILED,
}
