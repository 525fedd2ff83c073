"""``torchx.schedulers.kubernetes_scheduler``: tx-scheduler-k8s's ``tx_scheduler_k8s.kubernetes_scheduler``,
with TorchX 0.7.0's constructors ``KubernetesScheduler(session_name, client=None, docker_client=None)``
and ``create_scheduler(session_name, client=None, docker_client=None, **kwargs)``."""
from typing import Any, Optional, TypedDict

from tx_torchx_compat._missing import reexport

_k8s = reexport(globals(), "tx_scheduler_k8s.kubernetes_scheduler", "tx-scheduler-k8s")


class KubernetesOpts(TypedDict, total=False):
    """TorchX 0.7.0's run options of ``kubernetes`` (``Scheduler[KubernetesOpts]``)."""

    namespace: Optional[str]
    queue: str
    image_repo: Optional[str]
    service_account: Optional[str]
    priority_class: Optional[str]


#: the node label that selects a named resource's instance type
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"


class KubernetesScheduler(_k8s.KubernetesScheduler):  # type: ignore[misc,valid-type]
    """tx's scheduler, constructed as TorchX 0.7.0's.

    Args:
        session_name: the session part of app handles.
        client: a ``kubernetes.client.ApiClient`` (None: from the kube config).
        docker_client: accepted and unused: tx builds and pushes workspace images with its
            own image builder (docker or podman), not a docker SDK client.
        kwargs: tx's own keyword arguments (``context``).
    """

    def __init__(self, session_name: str, client: Optional[Any] = None, docker_client: Optional[Any] = None,
                 **kwargs: Any) -> None:
        super().__init__(session_name, client, **kwargs)


def create_scheduler(session_name: str, client: Optional[Any] = None, docker_client: Optional[Any] = None,
                     **kwargs: Any) -> KubernetesScheduler:
    """TorchX 0.7.0's factory: a :class:`KubernetesScheduler`; scheduler params other than tx's
    ``context`` are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k == "context"}
    return KubernetesScheduler(session_name, client=client, docker_client=docker_client, **own)
