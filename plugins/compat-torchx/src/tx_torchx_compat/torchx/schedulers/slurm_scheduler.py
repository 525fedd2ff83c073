"""``torchx.schedulers.slurm_scheduler``: tx-scheduler-slurm's ``tx_scheduler_slurm.scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_slurm.scheduler", "tx-scheduler-slurm")
