"""Registrations of tx-scheduler-gcp-batch (entry point ``gcp_batch`` in the group ``tx``).

Imports nothing but tx: the Google client libraries load when the scheduler is created.
"""
from typing import Callable

from tx import hookimpl

TX_PLUGIN_API = 1


@hookimpl
def tx_register_schedulers(register: Callable[..., None]) -> None:
    """Register the ``gcp_batch`` scheduler (imported on first use)."""
    register(
        "gcp_batch",
        "tx_scheduler_gcp_batch.scheduler:create_scheduler",
        description="Google Cloud Batch: one Batch job per app, logs from Cloud Logging",
        requires=("google.cloud.batch_v1", "google.cloud.logging_v2"),
        install="pip install tx-scheduler-gcp-batch",
    )
