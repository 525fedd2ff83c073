"""``torchx.specs.named_resources_aws``: the AWS instance types, registered by
tx-scheduler-aws-batch (``aws_p4d.24xlarge`` ...)."""
try:
    from tx_scheduler_aws_batch.resources import *  # noqa: F401,F403
except ModuleNotFoundError as _e:
    if _e.name is None or not _e.name.startswith("tx_scheduler_aws_batch"):
        raise
    from tx_torchx_compat._missing import require

    require("tx_scheduler_aws_batch", "tx-scheduler-aws-batch", __name__.replace("tx_torchx_compat.", ""))
