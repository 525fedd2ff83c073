"""``torchx.schedulers.kubernetes_scheduler``: tx-scheduler-k8s's ``tx_scheduler_k8s.kubernetes_scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_k8s.kubernetes_scheduler", "tx-scheduler-k8s")
