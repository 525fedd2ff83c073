"""``torchx.schedulers.slurm_scheduler``: tx-scheduler-slurm's ``slurm`` scheduler."""
try:
    from tx_scheduler_slurm.scheduler import *  # noqa: F401,F403
except ModuleNotFoundError as _e:
    if _e.name is None or not _e.name.startswith("tx_scheduler_slurm"):
        raise
    from tx_torchx_compat._missing import require

    require("tx_scheduler_slurm", "tx-scheduler-slurm", "torchx.schedulers.slurm_scheduler")
