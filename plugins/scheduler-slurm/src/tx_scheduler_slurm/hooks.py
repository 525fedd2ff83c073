"""Registrations of tx-scheduler-slurm (entry point ``slurm`` in the group ``tx``)."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register the ``slurm`` scheduler (imported on first use: no import cost here)."""
    register(
        "slurm",
        "tx_scheduler_slurm.scheduler:create_scheduler",
        description="Slurm: one heterogeneous batch job per app (sbatch, squeue, scancel)",
        install="pip install tx-scheduler-slurm",
    )
