"""``torchx.schedulers.kubernetes_mcad_scheduler``: tx-scheduler-k8s's ``tx_scheduler_k8s.kubernetes_mcad_scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_k8s.kubernetes_mcad_scheduler", "tx-scheduler-k8s")
