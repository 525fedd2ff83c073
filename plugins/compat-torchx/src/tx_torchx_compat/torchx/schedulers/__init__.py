"""``torchx.schedulers``: the Scheduler base and the registry of installed schedulers."""
from tx.schedulers.api import (  # noqa: F401
    Scheduler,
    SchedulerFactory,
    get_default_scheduler_name,
    get_scheduler_factories,
)
import tx_torchx_compat.scheduler_api  # noqa: F401 - fits TorchX-style Scheduler subclasses to tx
from tx_torchx_compat.torchx.util.entrypoints import load_group  # noqa: F401

__all__ = ["Scheduler", "SchedulerFactory", "get_default_scheduler_name", "get_scheduler_factories"]
