"""``torchx.specs.named_resources_aws``: the AWS instance types of tx-scheduler-aws-batch
(``aws_p4d.24xlarge`` ...); ``NAMED_RESOURCES`` maps each name to its factory, as in TorchX."""
from tx_torchx_compat._missing import reexport

reexport(globals(), "tx_scheduler_aws_batch.resources", "tx-scheduler-aws-batch")

NAMED_RESOURCES = {name: globals()[attr] for name, attr in NAMES.items()}  # type: ignore[name-defined]  # noqa: F821
