"""``torchx.schedulers.kubernetes_mcad_scheduler``: tx-scheduler-k8s's ``tx_scheduler_k8s.kubernetes_mcad_scheduler``,
with TorchX 0.7.0's constructors ``KubernetesMCADScheduler(session_name, client=None, docker_client=None)``
and ``create_scheduler(session_name, client=None, docker_client=None, **kwargs)``."""
from typing import Any, Optional, TypedDict

from tx_torchx_compat._missing import reexport

_k8s = reexport(globals(), "tx_scheduler_k8s.kubernetes_mcad_scheduler", "tx-scheduler-k8s")


class KubernetesMCADOpts(TypedDict, total=False):
    """TorchX 0.7.0's run options of ``kubernetes_mcad`` (``Scheduler[KubernetesMCADOpts]``)."""

    namespace: Optional[str]
    image_repo: Optional[str]
    service_account: Optional[str]
    priority: Optional[int]
    priority_class_name: Optional[str]
    image_secret: Optional[str]
    coscheduler_name: Optional[str]
    network: Optional[str]


#: the node label that selects a named resource's instance type
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"


class KubernetesMCADScheduler(_k8s.KubernetesMCADScheduler):  # type: ignore[misc,valid-type]
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
                     **kwargs: Any) -> KubernetesMCADScheduler:
    """TorchX 0.7.0's factory: a :class:`KubernetesMCADScheduler`; scheduler params other than tx's
    ``context`` are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k == "context"}
    return KubernetesMCADScheduler(session_name, client=client, docker_client=docker_client, **own)


def app_to_resource(app: Any, namespace: str, service_account: Optional[str], image_secret: Optional[str],
                    coscheduler_name: Optional[str], priority_class_name: Optional[str], network: Optional[str],
                    priority: Optional[int] = None) -> Any:
    """TorchX 0.7.0's ``app_to_resource``: the AppWrapper of ``app`` (an
    ``AppDef``) in ``namespace`` as a dict, built by tx's ``app_to_appwrapper`` with these
    run options (its layout is tx's: see tx-scheduler-k8s's module docstring).

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
        InvalidRunConfigException: a bad namespace.
    """
    cfg = {"namespace": namespace, "service_account": service_account, "image_secret": image_secret,
           "coscheduler_name": coscheduler_name, "priority_class_name": priority_class_name,
           "network": network, "priority": priority}
    return _k8s.app_to_appwrapper(app, {k: v for k, v in cfg.items() if v is not None}).resource
