"""tx-scheduler-ray: the ``ray`` scheduler of tx.

Each app becomes one Ray job submitted through Ray's Job Submission API
(https://docs.ray.io/en/latest/cluster/running-applications/job-submission/sdk.html). The
job runs tx's driver (:mod:`tx_scheduler_ray.tx_ray_driver`), which reserves placement
groups, runs one actor per replica and records each replica's state and output where the
scheduler reads them through the Ray dashboard. See :mod:`tx_scheduler_ray.scheduler`.

Importing this package is cheap: ``ray`` is imported on first use of the scheduler.
"""
from tx_scheduler_ray.version import __version__

__all__ = ["__version__"]
