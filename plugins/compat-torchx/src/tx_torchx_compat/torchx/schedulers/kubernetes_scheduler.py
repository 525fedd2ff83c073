"""``torchx.schedulers.kubernetes_scheduler``: tx-scheduler-k8s's ``tx_scheduler_k8s.kubernetes_scheduler``,
with TorchX 0.7.0's constructors ``KubernetesScheduler(session_name, client=None, docker_client=None)``
and ``create_scheduler(session_name, client=None, docker_client=None, **kwargs)``, plus TorchX
0.7.0's ``role_to_pod`` (a dict, see there)."""
from typing import Any, Dict, Optional, TypedDict

from tx.specs.api import AppDef, Role

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

    def _validate(self, app: Any, scheduler: str, cfg: Optional[Any] = None) -> None:
        """tx's check (an app has roles), callable with TorchX 0.7.0's ``(app, scheduler)``.

        Raises:
            ValueError: ``app`` has no roles.
        """
        super()._validate(app, scheduler, {} if cfg is None else cfg)


def create_scheduler(session_name: str, client: Optional[Any] = None, docker_client: Optional[Any] = None,
                     **kwargs: Any) -> KubernetesScheduler:
    """TorchX 0.7.0's factory: a :class:`KubernetesScheduler`; scheduler params other than tx's
    ``context`` are ignored, as TorchX does."""
    own = {k: v for k, v in kwargs.items() if k == "context"}
    return KubernetesScheduler(session_name, client=client, docker_client=docker_client, **own)


def role_to_pod(name: str, role: Role, service_account: Optional[str]) -> Dict[str, Any]:
    """The Pod that runs replica 0 of ``role`` as container ``name``, as tx's ``kubernetes``
    scheduler builds it (the pod template of its Volcano task, from ``app_to_job``).

    TorchX returns a ``kubernetes.client.V1Pod``; tx builds Kubernetes objects as dicts in
    the API's JSON shape (https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/),
    so this is ``{"apiVersion": "v1", "kind": "Pod", "metadata": ..., "spec": ...}`` with
    camelCase keys; the container's env carries tx's per-replica variables too.

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
    """
    cfg: Dict[str, Any] = {"queue": "default"}  # the Job's queue; the pod does not carry it
    if service_account:
        cfg["service_account"] = service_account
    job = _k8s.app_to_job(AppDef(name=name, roles=[role]), cfg, app_id=name)
    template = job.resource["spec"]["tasks"][0]["template"]
    template["spec"]["containers"][0]["name"] = name
    return {"apiVersion": "v1", "kind": "Pod", **template}
