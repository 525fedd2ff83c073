"""Registrations of tx-scheduler-ray (entry point ``ray`` in the group ``tx``)."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register the ``ray`` scheduler (imported on first use: no import cost here)."""
    register(
        "ray",
        "tx_scheduler_ray.scheduler:create_scheduler",
        description="Ray: one Ray job per app (Job Submission API, placement groups, an actor per replica)",
        requires=("ray",),
        install="pip install tx-scheduler-ray",
    )
