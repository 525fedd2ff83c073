"""``torchx.schedulers.gcp_batch_scheduler``: tx-scheduler-gcp-batch's
``tx_scheduler_gcp_batch.scheduler``, with TorchX 0.7.0's ``GCPBatchScheduler(session_name,
client=None)`` and ``create_scheduler(session_name, client=None, **kwargs)``."""
from typing import Any, List, Optional, TypedDict

from tx_torchx_compat._missing import reexport
from tx_torchx_compat.scheduler_api import IgnoresMounts

_gcp = reexport(globals(), "tx_scheduler_gcp_batch.scheduler", "tx-scheduler-gcp-batch")


class GCPBatchOpts(TypedDict, total=False):
    """TorchX 0.7.0's run options of ``gcp_batch`` (``Scheduler[GCPBatchOpts]``)."""

    project: Optional[str]
    location: Optional[str]


#: the job labels tx writes (tx's names; TorchX 0.7.0's are ``torchx_version`` and
#: ``torchx_app_name``)
LABEL_VERSION: str = "tx_version"
LABEL_APP_NAME: str = "tx_app_name"
#: the locations ``list`` looks in: tx lists the configured location only
#: (``$CLOUDSDK_BATCH_LOCATION``, default ``us-central1``), where TorchX 0.7.0 walks a fixed
#: list of regions
LOCATIONS: List[str] = ["us-central1"]


class GCPBatchScheduler(IgnoresMounts, _gcp.GcpBatchScheduler):  # type: ignore[misc,valid-type]
    """tx's GCP Batch scheduler (``GcpBatchScheduler``), constructed as TorchX 0.7.0's; roles'
    mounts are dropped with a warning, as TorchX ignores them (tx's refuses them).

    Args:
        session_name: the session part of app handles.
        client: a ``google.cloud.batch_v1.BatchServiceClient`` (None: made from the
            environment's credentials).
        kwargs: tx's own keyword arguments (``project``, ``location``, ``logging_client``).
    """

    def __init__(self, session_name: str, client: Optional[Any] = None, **kwargs: Any) -> None:
        super().__init__(session_name, batch_client=client, **kwargs)


def create_scheduler(session_name: str, client: Optional[Any] = None, **kwargs: Any) -> GCPBatchScheduler:
    """TorchX 0.7.0's factory: a :class:`GCPBatchScheduler`; scheduler params other than
    tx's (``project``, ``location``, ``logging_client``) are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k in ("project", "location", "logging_client")}
    return GCPBatchScheduler(session_name, client=client, **own)
