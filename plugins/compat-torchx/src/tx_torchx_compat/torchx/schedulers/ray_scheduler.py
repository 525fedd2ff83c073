"""``torchx.schedulers.ray_scheduler``: tx-scheduler-ray's ``tx_scheduler_ray.scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_ray.scheduler", "tx-scheduler-ray")
