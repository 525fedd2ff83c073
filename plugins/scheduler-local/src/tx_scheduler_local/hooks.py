"""tx plugin hooks of tx-scheduler-local (entry point ``local`` in group ``tx``).

Only hook implementations live here; the scheduler module is imported on first use.
"""
from typing import Callable

from tx import hookimpl


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register ``local_cwd`` and ``local_dir`` (factories imported on first use)."""
    register(
        "local_cwd",
        "tx_scheduler_local.scheduler:create_cwd_scheduler",
        description="local processes in the current directory (role.image is ignored)",
    )
    register(
        "local_dir",
        "tx_scheduler_local.scheduler:create_dir_scheduler",
        description="local processes in role.image, an existing directory",
    )
