"""``torchx.schedulers.aws_batch_scheduler``: tx-scheduler-aws-batch's
``tx_scheduler_aws_batch.scheduler``, with TorchX 0.7.0's ``AWSBatchScheduler(session_name,
client=None, log_client=None, docker_client=None)`` and its ``create_scheduler``."""
from typing import Any, Optional

from tx_torchx_compat._missing import reexport

_batch = reexport(globals(), "tx_scheduler_aws_batch.scheduler", "tx-scheduler-aws-batch")


class AWSBatchScheduler(_batch.AwsBatchScheduler):  # type: ignore[misc,valid-type]
    """tx's AWS Batch scheduler (``AwsBatchScheduler``), constructed as TorchX 0.7.0's.

    Args:
        session_name: the session part of app handles.
        client: a boto3 ``batch`` client (None: made from the environment, as tx does).
        log_client: a boto3 ``logs`` client (None: likewise).
        docker_client: accepted and unused (tx builds workspace images itself).
        kwargs: tx's own keyword arguments (``region``, ``endpoint_url``, ``poll_interval``).
    """

    def __init__(self, session_name: str, client: Optional[Any] = None, log_client: Optional[Any] = None,
                 docker_client: Optional[Any] = None, **kwargs: Any) -> None:
        super().__init__(session_name, **kwargs)
        # the given clients are used as they are (tx's AwsClients makes them lazily otherwise)
        if client is not None:
            self._aws._batch = client
        if log_client is not None:
            self._aws._logs = log_client


def create_scheduler(session_name: str, client: Optional[Any] = None, log_client: Optional[Any] = None,
                     docker_client: Optional[Any] = None, **kwargs: Any) -> AWSBatchScheduler:
    """TorchX 0.7.0's factory: an :class:`AWSBatchScheduler`; scheduler params other than
    tx's (``region``, ``endpoint_url``, ``poll_interval``) are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k in ("region", "endpoint_url", "poll_interval")}
    return AWSBatchScheduler(session_name, client=client, log_client=log_client, docker_client=docker_client, **own)
