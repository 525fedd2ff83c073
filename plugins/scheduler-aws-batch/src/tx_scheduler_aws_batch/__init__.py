"""tx-scheduler-aws-batch: the ``aws_batch`` scheduler (AWS Batch multi-node parallel jobs)
and the ``aws_*`` named resources. boto3 is imported only when a scheduler is created."""
from tx_scheduler_aws_batch.version import __version__

__all__ = ["__version__"]
