"""``torchx.schedulers.docker_scheduler``: tx-scheduler-docker's ``tx_scheduler_docker.scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_docker.scheduler", "tx-scheduler-docker")
