"""``torchx.specs.named_resources_aws``: the AWS instance types of tx-scheduler-aws-batch."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_aws_batch.resources", "tx-scheduler-aws-batch")
