"""Registrations of tx-scheduler-lsf (entry point ``lsf`` in the group ``tx``)."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register the ``lsf`` scheduler (imported on first use: no import cost here)."""
    register(
        "lsf",
        "tx_scheduler_lsf.scheduler:create_scheduler",
        description="IBM Spectrum LSF (and OpenLava): one batch job per replica (bsub, bjobs, bkill)",
        install="pip install tx-scheduler-lsf",
    )
