"""``torchx.schedulers.aws_batch_scheduler``: tx-scheduler-aws-batch's ``tx_scheduler_aws_batch.scheduler``."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_aws_batch.scheduler", "tx-scheduler-aws-batch")
