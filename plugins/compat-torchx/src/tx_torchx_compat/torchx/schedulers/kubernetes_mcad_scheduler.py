"""``torchx.schedulers.kubernetes_mcad_scheduler``: tx-scheduler-k8s's ``tx_scheduler_k8s.kubernetes_mcad_scheduler``,
with TorchX 0.7.0's constructors ``KubernetesMCADScheduler(session_name, client=None, docker_client=None)``
and ``create_scheduler(session_name, client=None, docker_client=None, **kwargs)``, plus the
module's public helpers TorchX 0.7.0 projects import (``role_to_pod``, ``create_pod_group``,
``mcad_svc``, ``cleanup_str``, ``get_*``), over tx's ``app_to_appwrapper``: each returns
the piece of the AppWrapper tx submits, as a dict in the API's JSON shape (TorchX returns
``kubernetes.client`` objects from ``role_to_pod`` and ``mcad_svc``)."""
import importlib
import re
import warnings
from typing import Any, Dict, Iterable, List, Optional, TypedDict

from tx.specs import VolumeMount
from tx.specs.api import AppDef, AppState, Resource, Role
from tx_torchx_compat._missing import reexport

_k8s = reexport(globals(), "tx_scheduler_k8s.kubernetes_mcad_scheduler", "tx-scheduler-k8s")
# by name, as reexport does (a plugin is never imported statically; it is importable once
# reexport returned): these modules are the same distribution's
_names = importlib.import_module("tx_scheduler_k8s._names")
_pod = importlib.import_module("tx_scheduler_k8s._pod")

#: TorchX's name of the dryrun request: tx's ``KubernetesJob`` (``resource``, ``namespace``,
#: ``images_to_push``; ``str()`` is the YAML)
KubernetesMCADJob = _k8s.KubernetesJob

#: the port of the app's headless Service when no role has a valid one
DEFAULT_PORT = "29500"


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

    def _validate(self, app: Any, scheduler: str, cfg: Optional[Any] = None) -> None:
        """tx's check (an app has roles), callable with TorchX 0.7.0's ``(app, scheduler)``.

        Raises:
            ValueError: ``app`` has no roles.
        """
        super()._validate(app, scheduler, {} if cfg is None else cfg)


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


def _items(app: AppDef, app_id: str, cfg: Dict[str, Any]) -> List[Dict[str, Any]]:
    res = _k8s.app_to_appwrapper(app, {k: v for k, v in cfg.items() if v is not None}, app_id=app_id).resource
    return res["spec"]["resources"]["GenericItems"]


def role_to_pod(name: str, unique_app_id: str, namespace: str, role: Role, service_account: Optional[str],
                image_secret: Optional[str], coscheduler_name: Optional[str], priority_class_name: Optional[str],
                network: Optional[str]) -> Dict[str, Any]:
    """The Pod of replica 0 of ``role`` named ``name`` in app ``unique_app_id``, as tx puts it
    in the AppWrapper (a dict; TorchX returns a ``V1Pod``).

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
    """
    cfg = {"namespace": namespace, "service_account": service_account, "image_secret": image_secret,
           "coscheduler_name": coscheduler_name, "priority_class_name": priority_class_name, "network": network}
    pod = next(i["generictemplate"] for i in _items(AppDef(unique_app_id, roles=[role]), unique_app_id, cfg)
               if i["generictemplate"]["kind"] == "Pod")
    pod["metadata"]["name"] = name
    return pod


def create_pod_group(app: AppDef, role: Role, role_idx: int, namespace: str, app_id: str) -> Dict[str, Any]:
    """The generic item (``{"replicas": 1, "generictemplate": <PodGroup>}``) of role
    ``role_idx``'s PodGroup ``<app_id>-pg<role_idx>`` (``minMember`` = ``role.num_replicas``),
    as tx submits it with run option ``coscheduler_name``: API group
    ``scheduling.x-k8s.io/v1alpha1`` (the coscheduler plugin's; TorchX writes
    ``scheduling.sigs.k8s.io``).

    Raises:
        IndexError: ``role_idx`` is not a role of ``app``.
    """
    roles = list(app.roles)
    roles[role_idx] = role
    items = _items(AppDef(app.name, roles=roles), app_id, {"namespace": namespace, "coscheduler_name": "_"})
    name = f"{app_id}-pg{role_idx}"
    return next(i for i in items if i["generictemplate"]["metadata"]["name"] == name
                and i["generictemplate"]["kind"] == "PodGroup")


def mcad_svc(app: AppDef, svc_name: str, namespace: str, service_port: str) -> Dict[str, Any]:
    """The app's headless Service ``svc_name`` on port ``service_port``, as tx puts it in the
    AppWrapper (a dict; TorchX returns a ``V1Service``)."""
    svc = next(i["generictemplate"] for i in _items(app, svc_name, {"namespace": namespace})
               if i["generictemplate"]["kind"] == "Service")
    for port in svc["spec"]["ports"]:
        port["port"] = port["targetPort"] = int(service_port)
    return svc


def cleanup_str(data: str) -> str:
    """``data`` lowercased with every character but ``[a-z0-9-]`` removed, then without a
    leading ``-`` and leading digits (a start that Kubernetes names refuse)."""
    return re.sub(r"[^a-z0-9-]", "", data.lower()).lstrip("-").lstrip("0123456789")


def get_unique_truncated_appid(app: AppDef) -> str:
    """A new app id for ``app``: its normalized name and a random suffix, cut so that
    ``<id>-pg<role>`` stays within 63 characters (tx's own app ids; a warning when the name
    itself must be cut)."""
    return _names.app_id(app.name, _names.MAX_LABEL - len(f"-pg{len(app.roles) - 1}"))


def get_port_for_service(app: AppDef) -> str:
    """The port of the app's headless Service: the first valid port (1-65535) of the roles'
    ``port_map``s, in role order, as tx chooses it (TorchX takes the last one), else 29500;
    a warning for an invalid port."""
    for role in app.roles:
        for port in (role.port_map or {}).values():
            if 0 < int(port) < 65536:
                return str(port)
            warnings.warn(f"port_map of role {role.name!r}: {port} is not a port (1-65535); skipped")
    return DEFAULT_PORT


#: the role label of the pods TorchX 0.7.0 puts into an AppWrapper
_TORCHX_ROLE_LABEL = "torchx.pytorch.org/role-name"


def _torchx_role(name: str, tmpl: Dict[str, Any]) -> Role:
    """A TorchX-made pod's role as TorchX 0.7.0's ``get_role_information`` gives it: the
    first container's fields as they are (``command`` as args, ``env``, ``ports`` as
    port_map, ``volumeMounts`` as mounts, ``resources.requests`` cpu, any ``*gpu*`` key and
    memory as the Resource, -1 where absent), read in that order up to the first one
    missing."""
    fields: Dict[str, Any] = {"image": ""}
    container = (((tmpl.get("spec") or {}).get("containers")) or [{}])[0]
    steps = [("image", "image"), ("command", "args"), ("env", "env")]
    for key, field in steps:
        if key not in container:
            return Role(name=name, **fields)
        fields[field] = _as_role_field(field, container[key])
    requests = (container.get("resources") or {}).get("requests")
    if "resources" not in container or not isinstance(requests, dict) or "cpu" not in requests:
        return Role(name=name, **fields)
    resource = Resource(cpu=requests["cpu"], gpu=-1, memMB=-1)
    for key, value in requests.items():
        if "gpu" in key:
            resource.gpu = value
    if "memory" in requests:
        resource.memMB = requests["memory"]
        fields["resource"] = resource
        for key, field in (("ports", "port_map"), ("volumeMounts", "mounts")):
            if key not in container:
                break
            fields[field] = _as_role_field(field, container[key])
    return Role(name=name, **fields)


def _as_role_field(field: str, value: Any) -> Any:
    """A container's field in the shape tx's Role takes (TorchX stores Kubernetes' own lists
    there; tx's Role validates its fields): ``env`` ``[{name, value}]`` as a mapping,
    ``ports`` ``[{name, containerPort}]`` as ``port_map``, ``volumeMounts`` ``[{name,
    mountPath, readOnly}]`` as VolumeMounts; values already in tx's shape as they are."""
    if field == "env" and isinstance(value, list):
        return {e["name"]: str(e.get("value", "")) for e in value if isinstance(e, dict) and "name" in e}
    if field == "port_map" and isinstance(value, list):
        return {p.get("name") or str(p["containerPort"]): p["containerPort"]
                for p in value if isinstance(p, dict) and "containerPort" in p}
    if field == "mounts" and isinstance(value, list):
        return [VolumeMount(src=m["name"], dst_path=m["mountPath"], read_only=bool(m.get("readOnly", False)))
                if isinstance(m, dict) else m for m in value]
    return value


def get_role_information(generic_items: Iterable[Dict[str, Any]]) -> Dict[str, Role]:
    """The roles of an AppWrapper's generic items by name, ``num_replicas`` = the number of
    its pods. A pod tx made is rebuilt as tx's describe does; a pod TorchX 0.7.0 made
    (label ``torchx.pytorch.org/role-name``) as TorchX's function gives it (its container's
    fields as they are). Items without a generic template, metadata, labels or a role
    label are skipped."""
    first: Dict[str, Dict[str, Any]] = {}
    count: Dict[str, int] = {}
    for item in generic_items:
        tmpl = item.get("generictemplate") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        name = labels.get(_pod.LABEL_ROLE_NAME) or labels.get(_TORCHX_ROLE_LABEL)
        if tmpl.get("kind", "Pod") != "Pod" or not name:
            continue
        first.setdefault(name, tmpl)
        count[name] = count.get(name, 0) + 1
    roles = {}
    for name, tmpl in first.items():
        labels = tmpl["metadata"]["labels"]
        if _pod.LABEL_ROLE_NAME in labels:
            roles[name] = _pod.role_from_template(tmpl, count[name])
        else:
            role = _torchx_role(name, tmpl)
            role.num_replicas = count[name]
            roles[name] = role
    return roles


def get_appwrapper_status(app: Dict[str, Any]) -> AppState:
    """The AppState of an AppWrapper from its ``status.state`` (none yet: PENDING, MCAD has
    not dispatched it), by tx's mapping (``Completed`` too)."""
    state = str((app.get("status") or {}).get("state") or "")
    return _k8s.STATES.get(state, AppState.UNKNOWN)


def get_tasks_status_description(status: Dict[str, Any]) -> Dict[str, int]:
    """The pod counts of an AppWrapper's ``status`` (``running``, ``pending``, ``failed``,
    ``Succeeded``: the keys MCAD writes), those present only."""
    return {k: status[k] for k in ("running", "pending", "failed", "Succeeded") if k in status}
