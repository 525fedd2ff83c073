"""Registrations of tx-scheduler-aws-batch (entry point ``aws_batch`` in the group ``tx``).

Imports nothing heavy: boto3 is imported by the scheduler module, on first use."""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register the ``aws_batch`` scheduler (imported on first use)."""
    register(
        "aws_batch",
        "tx_scheduler_aws_batch.scheduler:create_scheduler",
        description="AWS Batch: one multi-node parallel job per app, logs from CloudWatch",
        requires=("boto3",),
        install="pip install tx-scheduler-aws-batch",
    )


@hookimpl
def tx_register_named_resources(register: Callable[..., None]) -> None:
    """Register TorchX 0.7.0's ``aws_*`` instance types (memory less the 4% Batch tax)."""
    from tx_scheduler_aws_batch.resources import NAMES

    for name, attr in NAMES.items():
        register(name, f"tx_scheduler_aws_batch.resources:{attr}")
