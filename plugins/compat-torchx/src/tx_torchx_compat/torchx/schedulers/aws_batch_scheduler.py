"""``torchx.schedulers.aws_batch_scheduler``: tx-scheduler-aws-batch's
``tx_scheduler_aws_batch.scheduler``, with TorchX 0.7.0's ``AWSBatchScheduler(session_name,
client=None, log_client=None, docker_client=None)`` and its ``create_scheduler``, plus TorchX
0.7.0's ``AWSBatchOpts``, ``ENV_TORCHX_ROLE_*`` and resource helpers (over tx's request
builder)."""
import importlib
from datetime import datetime
from typing import Any, Dict, List, Optional, TypedDict

from tx.specs.api import Resource, Role
from tx_torchx_compat._missing import reexport

_batch = reexport(globals(), "tx_scheduler_aws_batch.scheduler", "tx-scheduler-aws-batch")
# by name, as reexport does (a plugin is never imported statically; it is importable once
# reexport returned): its request module is the same distribution's
_request = importlib.import_module("tx_scheduler_aws_batch.request")
_status = importlib.import_module("tx_scheduler_aws_batch._status")

#: the environment variables naming a node's role and its index (tx sets them, with TX_*)
ENV_TORCHX_ROLE_NAME = "TORCHX_ROLE_NAME"
ENV_TORCHX_ROLE_IDX = "TORCHX_ROLE_IDX"


class AWSBatchOpts(TypedDict, total=False):
    """TorchX 0.7.0's run options of ``aws_batch`` (tx's take more: ``tx runopts aws_batch``)."""

    queue: str
    user: str
    image_repo: Optional[str]
    privileged: bool
    share_id: Optional[str]
    priority: int
    job_role_arn: Optional[str]
    execution_role_arn: Optional[str]


def to_millis_since_epoch(ts: datetime) -> int:
    """``ts`` as whole milliseconds since the epoch (AWS Batch's timestamps), rounded."""
    return int(round(ts.timestamp() * 1000))


def to_datetime(ms_since_epoch: int) -> datetime:
    """The local-time datetime of ``ms_since_epoch`` (AWS Batch's ``createdAt``, ...)."""
    return datetime.fromtimestamp(ms_since_epoch / 1000)


def resource_requirements_from_resource(resource: Resource) -> List[Dict[str, str]]:
    """The container's ``resourceRequirements`` (``VCPU``, ``MEMORY``, ``GPU`` when > 0) as tx
    submits them (https://docs.aws.amazon.com/batch/latest/APIReference/API_ResourceRequirement.html);
    at least one vCPU.

    Raises:
        ValueError: ``resource.memMB`` is not positive (TorchX raises AssertionError).
    """
    # tx's request builder's own function, so that the two cannot drift apart
    return _request._resource_requirements(Role("node", image="", resource=resource))


def resource_from_resource_requirements(resource_requirements: List[Dict[str, str]]) -> Resource:
    """The :class:`Resource` (cpu, gpu, memMB) that ``resourceRequirements`` ask for, read as tx's
    ``describe`` reads a submitted job (GPU 0 when absent)."""
    container = {"resourceRequirements": resource_requirements}
    return _status.role_of("node", 0, 0, container).resource


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
