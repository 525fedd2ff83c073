"""tx-scheduler-gcp-batch: the ``gcp_batch`` scheduler of tx.

Each app becomes one Google Cloud Batch job, submitted through the official
``google-cloud-batch`` client; replica logs are read from Cloud Logging through
``google-cloud-logging``. See :mod:`tx_scheduler_gcp_batch.scheduler`.

Importing this package is cheap: the Google client libraries are imported on first use.
"""
from tx_scheduler_gcp_batch.version import __version__

__all__ = ["__version__"]
