"""``torchx.schedulers.gcp_batch_scheduler``: tx-scheduler-gcp-batch's ``tx_scheduler_gcp_batch.scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_gcp_batch.scheduler", "tx-scheduler-gcp-batch")
