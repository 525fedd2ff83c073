"""Pods of a role replica, as plain dicts in the shape of the Kubernetes ``v1`` API.

Everything here builds JSON-ready dicts (no ``kubernetes`` client models: building and
printing a dryrun of thousands of replicas stays fast). The shapes are those of the API
reference: PodTemplateSpec, PodSpec, Container, ResourceRequirements, Volume
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/).

* resources: ``cpu`` as millicores, ``memory`` as ``<memMB>Mi``, GPUs as
  ``nvidia.com/gpu``, ``Resource.devices`` as extended resources; requests equal limits
  (Guaranteed QoS for cpu and memory), extended resources in limits only (their requests
  default to the limits).
* capabilities whose key is a label key (``node.kubernetes.io/instance-type``, as named
  resources set it) go to ``nodeSelector``.
* mounts: BindMount -> ``hostPath``, VolumeMount -> ``persistentVolumeClaim``,
  DeviceMount -> ``hostPath`` with a privileged container (Kubernetes has no device cgroup
  option); ``/dev/shm`` is a memory ``emptyDir`` (PyTorch's data loaders need more than the
  runtime's 64 MB).
* labels ``app.kubernetes.io/{name,instance,managed-by}`` and ``tx.pytorch.org/*`` let tx
  find the pods of an app and rebuild its roles (:func:`role_from_template`).
"""
from __future__ import annotations

import json
import re
import string
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import env as envc
from tx.specs import (
    MISSING, NULL_RESOURCE, BindMount, DeviceMount, Resource, Role, VolumeMount, appdef_to_stored, macros)

from tx_scheduler_k8s import _names, _preempt
from tx_scheduler_k8s.version import __version__

log = get_logger(__name__)

GPU = "nvidia.com/gpu"
LABEL_VERSION = "tx.pytorch.org/version"
LABEL_APP_NAME = "tx.pytorch.org/app-name"
LABEL_ROLE_INDEX = "tx.pytorch.org/role-index"
LABEL_ROLE_NAME = "tx.pytorch.org/role-name"
LABEL_REPLICA_ID = "tx.pytorch.org/replica-id"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "tx"
#: annotations that keep what labels cannot hold (any role name, the role's replica count,
#: retries, min_replicas, the args before macro substitution)
ANNOTATION_ROLE = "tx.pytorch.org/role"
ANNOTATION_APP = "tx.pytorch.org/app-name"
#: the AppDef as submitted (:func:`tx.specs.files.appdef_to_stored`), on the app's top object
ANNOTATION_APPDEF = "tx.pytorch.org/appdef"
#: the most bytes of that annotation: Kubernetes allows 256 KiB (262144 bytes) for all of an
#: object's annotations together, keys and values
#: (https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations/#syntax-and-character-set);
#: this leaves 32 KiB for the others
APPDEF_LIMIT = 229376


def app_annotations(app: Any, cfg: Optional[Mapping[str, Any]] = None) -> Dict[str, str]:
    """The annotations of an app's top object (Job, JobSet, AppWrapper): its name and the
    AppDef as submitted with its run options ``cfg``, left out (with a warning) where it exceeds :data:`APPDEF_LIMIT`
    bytes even compressed; describe then says so."""
    out = {ANNOTATION_APP: app.name}
    stored = appdef_to_stored(app, APPDEF_LIMIT, cfg=cfg)
    if stored is None:
        log.warning(f"the AppDef of {app.name!r} exceeds {APPDEF_LIMIT} bytes compressed: not kept in "
                    f"annotation {ANNOTATION_APPDEF}; describe will rebuild the roles from the job")
    else:
        out[ANNOTATION_APPDEF] = stored
    return out


def app_labels(app_name: str, app_id: str) -> Dict[str, str]:
    """Labels of every object of an app (``app.kubernetes.io/instance`` selects them)."""
    return {
        LABEL_VERSION: _names.label_value(__version__),
        LABEL_APP_NAME: _names.label_value(app_name),
        LABEL_NAME: _names.label_value(app_name),
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_INSTANCE: app_id,
    }


def resources(res: Resource) -> Dict[str, Dict[str, str]]:
    """``Resource`` -> ResourceRequirements (``{}`` for NULL_RESOURCE)."""
    limits: Dict[str, str] = {}
    if res.cpu > 0:
        limits["cpu"] = f"{int(res.cpu * 1000)}m"
    if res.memMB > 0:
        limits["memory"] = f"{int(res.memMB)}Mi"
    requests = dict(limits)
    if res.gpu > 0:
        limits[GPU] = str(int(res.gpu))
    for dev, count in res.devices.items():
        limits[dev] = str(int(count))
    out: Dict[str, Dict[str, str]] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out


def node_selector(res: Resource) -> Dict[str, str]:
    """Capabilities that are node labels (label key -> string value)."""
    return {
        k: str(v) for k, v in res.capabilities.items()
        if isinstance(v, (str, int)) and _names.is_qualified_name(k) and _names.is_label_value(str(v))
    }


def _port_name(name: str) -> Optional[str]:
    # IANA_SVC_NAME: <= 15 lowercase alphanumerics and '-', at least one letter
    norm = _names.normalize(name)[:15].strip("-")
    return norm if norm and any(c.isalpha() for c in norm) else None


def volumes(role: Role) -> tuple:
    """``(volumes, volumeMounts, privileged)`` of a role: ``/dev/shm`` plus its mounts."""
    vols: List[Dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: List[Dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    privileged = False
    for i, m in enumerate(role.mounts):
        name = f"mount-{i}"
        if isinstance(m, BindMount):
            vols.append({"name": name, "hostPath": {"path": m.src_path}})
            mounts.append({"name": name, "mountPath": m.dst_path, "readOnly": m.read_only})
        elif isinstance(m, VolumeMount):
            vols.append({"name": name, "persistentVolumeClaim": {"claimName": m.src, "readOnly": m.read_only}})
            mounts.append({"name": name, "mountPath": m.dst_path, "readOnly": m.read_only})
        elif isinstance(m, DeviceMount):
            vols.append({"name": name, "hostPath": {"path": m.src_path}})
            mounts.append({"name": name, "mountPath": m.dst_path, "readOnly": "w" not in m.permissions})
            privileged = True
        else:  # pragma: no cover - Role validates its mounts
            raise TypeError(f"unknown mount {m!r}")
    return vols, mounts, privileged


def _sub(values: Mapping[str, str], text: str) -> str:
    return string.Template(text).safe_substitute(values) if "$" in text else text


def replica_role(role: Role, app_id: str, k: int) -> Role:
    """``role`` with the macros of replica ``k`` substituted."""
    values = macros.Values(img_root="", app_id=app_id, replica_id=str(k), rank0_env=envc.RANK0_HOST)
    return values.apply(role)


#: how tx marks, in a role's args or env, a reference Kubernetes must expand (``$(NAME)``)
_REF_MARK = "\x00"
_REF = re.compile(_REF_MARK + r"([A-Za-z_][A-Za-z0-9_]*)" + _REF_MARK)


def k8s_ref(name: str) -> str:
    """A reference to the container's variable ``name`` that Kubernetes expands
    (``$(name)`` once :func:`k8s_literal` wrote the text out)."""
    return f"{_REF_MARK}{name}{_REF_MARK}"


def k8s_literal(text: str) -> str:
    """``text`` for a container's command, args or env value, so that the program gets it
    as written: Kubernetes expands ``$(VAR)`` there and reads ``$$`` as ``$``
    (https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/),
    so every ``$`` is written ``$$``; only the references tx placed with :func:`k8s_ref`
    become ``$(NAME)``."""
    text = text.replace("$", "$$")
    return _REF.sub(r"$(\1)", text) if _REF_MARK in text else text


def k8s_unliteral(text: str) -> str:
    """What the program got for ``text`` written by :func:`k8s_literal` (``$$`` is ``$``)."""
    return text.replace("$$", "$")


def literal_command(entrypoint: str, args: List[str]) -> List[str]:
    """A container's ``command``: ``entrypoint`` and ``args`` each through :func:`k8s_literal`."""
    return [k8s_literal(a) for a in (entrypoint, *args)]


def literal_env(env: Mapping[str, Any]) -> Dict[str, str]:
    """A container's env values (name -> value, in order), each through :func:`k8s_literal`."""
    return {k: k8s_literal(str(v)) for k, v in env.items()}


def container(
    role: Role,
    name: str,
    env: Mapping[str, str],
    mounts: List[Dict[str, Any]],
    privileged: bool,
    args: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """The Container of one replica (``args``: the role's, macros substituted)."""
    if role.entrypoint == MISSING or not role.entrypoint:
        raise ValueError(f"role {role.name!r} has no entrypoint")
    c: Dict[str, Any] = {
        "name": name,
        "image": role.image,
        "command": literal_command(role.entrypoint, role.args if args is None else args),
        "env": [{"name": k, "value": v} for k, v in literal_env(env).items()],
        "volumeMounts": mounts,
    }
    res = resources(role.resource)
    if res:
        c["resources"] = res
    ports = []
    for pname, port in role.port_map.items():
        p: Dict[str, Any] = {"containerPort": int(port)}
        n = _port_name(pname)
        if n:
            p["name"] = n
        ports.append(p)
    if ports:
        c["ports"] = ports
    if privileged:
        c["securityContext"] = {"privileged": True}
    return c


def role_annotation(role: Role) -> str:
    """JSON that :func:`role_from_template` reads back: what the pod itself does not say
    (any role name, the replica counts, retries, and args and env before macros)."""
    return json.dumps({
        "name": role.name,
        "num_replicas": role.num_replicas,
        "min_replicas": role.min_replicas,
        "max_retries": role.max_retries,
        "retry_policy": role.retry_policy.value,
        "args": list(role.args),
        "env": dict(role.env),
    }, separators=(",", ":"))


def replica_env_args(role: Role, role_idx: int, k: int, *, app_id: str, rank0_host: str,
                     cfg: Mapping[str, Any], extra_env: Optional[Mapping[str, str]] = None
                     ) -> Tuple[Dict[str, str], List[str]]:
    """``(env, args)`` of replica ``k`` of ``role`` as :func:`pod_template` puts them in its
    container (before :func:`k8s_literal`): the contract variables, ``TX_PREEMPT_GRACE``,
    ``extra_env`` and the role's env over them, macros substituted in the role's env and args.

    Raises:
        InvalidRunConfigException: a bad ``preempt_grace``.
    """
    values = {"img_root": "", "app_id": app_id, "replica_id": str(k), "rank0_env": envc.RANK0_HOST,
              "base_img_root": "DEPRECATED"}
    env = envc.replica_env(
        app_id=app_id, role_name=role.name, replica_id=str(k), rank0_host=rank0_host,
        role_idx=role_idx, num_replicas=role.num_replicas,
    )
    env[_preempt.GRACE_ENV] = str(_preempt.grace(cfg))
    if extra_env:
        env.update(extra_env)
    for key, val in role.env.items():
        env[key] = _sub(values, val)
    return env, [_sub(values, a) for a in role.args]


def pod_template(
    role: Role,
    role_idx: int,
    k: int,
    *,
    app_name: str,
    app_id: str,
    container_name: str,
    rank0_host: str,
    cfg: Mapping[str, Any],
    extra_env: Optional[Mapping[str, str]] = None,
    pod_labels: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """PodTemplateSpec of replica ``k`` of ``role`` (index ``role_idx``).

    ``cfg`` supplies ``service_account``, ``priority_class``, ``image_secret`` and
    ``preempt_grace`` (``terminationGracePeriodSeconds`` and ``TX_PREEMPT_GRACE``).
    The replica's environment is the role's (macros substituted) over the contract of
    :mod:`tx.schedulers.env` (``TX_*`` and ``TORCHX_*``) and ``extra_env``.
    """
    env, args = replica_env_args(role, role_idx, k, app_id=app_id, rank0_host=rank0_host, cfg=cfg,
                                 extra_env=extra_env)
    grace = _preempt.grace(cfg)
    vols, mounts, privileged = volumes(role)
    spec: Dict[str, Any] = {
        "restartPolicy": "Never",
        # the preemption warning: SIGTERM, SIGKILL after this many seconds (tx_scheduler_k8s._preempt)
        "terminationGracePeriodSeconds": grace,
        "containers": [container(role, container_name, env, mounts, privileged, args)],
        "volumes": vols,
    }
    sel = node_selector(role.resource)
    if sel:
        spec["nodeSelector"] = sel
    if cfg.get("service_account"):
        spec["serviceAccountName"] = cfg["service_account"]
    if cfg.get("priority_class"):
        spec["priorityClassName"] = cfg["priority_class"]
    if cfg.get("image_secret"):
        spec["imagePullSecrets"] = [{"name": cfg["image_secret"]}]
    labels = {
        **app_labels(app_name, app_id),
        LABEL_ROLE_INDEX: str(role_idx),
        LABEL_ROLE_NAME: _names.label_value(role.name) or "role",
        LABEL_REPLICA_ID: str(k),
        **(pod_labels or {}),
    }
    annotations = {"sidecar.istio.io/inject": "false"}
    if k == 0:
        annotations[ANNOTATION_ROLE] = role_annotation(role)
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}


def _quantity_milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _quantity_mib(q: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 ** 2, "M": 1e6 / 2 ** 20, "G": 1e9 / 2 ** 20}
    for suffix, mult in units.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * mult)
    return int(int(q) / 2 ** 20)


def mounts_from_spec(spec: Mapping[str, Any], c: Mapping[str, Any]) -> List[Any]:
    """The role's mounts back from the pod's volumes (see :func:`volumes`; ``/dev/shm`` is
    not a role mount)."""
    vols = {v["name"]: v for v in spec.get("volumes") or []}
    privileged = bool((c.get("securityContext") or {}).get("privileged"))
    out: List[Any] = []
    for m in c.get("volumeMounts") or []:
        v = vols.get(m["name"]) or {}
        ro = bool(m.get("readOnly"))
        if "hostPath" in v and privileged and m["mountPath"].startswith("/dev/"):
            out.append(DeviceMount(v["hostPath"]["path"], m["mountPath"], "r" if ro else "rwm"))
        elif "hostPath" in v:
            out.append(BindMount(v["hostPath"]["path"], m["mountPath"], ro))
        elif "persistentVolumeClaim" in v:
            out.append(VolumeMount(v["persistentVolumeClaim"]["claimName"], m["mountPath"], ro))
    return out


def role_from_template(template: Mapping[str, Any], replicas: int) -> Role:
    """Rebuild a Role from the PodTemplateSpec of its replica 0 (see :func:`pod_template`).

    The environment is the role's own (the contract variables are dropped); ``args`` are
    those before macro substitution where the annotation kept them.
    """
    meta = template.get("metadata") or {}
    info = json.loads((meta.get("annotations") or {}).get(ANNOTATION_ROLE) or "{}")
    spec = template.get("spec") or {}
    c = (spec.get("containers") or [{}])[0]
    command = [k8s_unliteral(a) for a in list(c.get("command") or []) + list(c.get("args") or [])]
    contract = set(envc.TORCHX_NAMES) | set(envc.TORCHX_NAMES.values()) | {_preempt.GRACE_ENV}
    env = {e["name"]: k8s_unliteral(e.get("value", "")) for e in c.get("env") or [] if e["name"] not in contract}
    limits = (c.get("resources") or {}).get("limits") or {}
    res = Resource(
        cpu=_quantity_milli(limits["cpu"]) // 1000 if "cpu" in limits else -1,
        gpu=int(limits.get(GPU, 0)),
        memMB=_quantity_mib(limits["memory"]) if "memory" in limits else -1,
        capabilities=dict(spec.get("nodeSelector") or {}),
        devices={k: int(v) for k, v in limits.items() if k not in ("cpu", "memory", GPU)},
    )
    if "cpu" not in limits and "memory" not in limits and not res.gpu:
        res = NULL_RESOURCE
    ports = {p.get("name") or str(p["containerPort"]): int(p["containerPort"]) for p in c.get("ports") or []}
    return Role(
        mounts=mounts_from_spec(spec, c),
        name=info.get("name") or (meta.get("labels") or {}).get(LABEL_ROLE_NAME, "role"),
        image=c.get("image", ""),
        entrypoint=command[0] if command else MISSING,
        args=info.get("args", command[1:]),
        env=info["env"] if isinstance(info.get("env"), dict) else env,
        num_replicas=int(info.get("num_replicas") or replicas or 1),
        min_replicas=info.get("min_replicas"),
        max_retries=int(info.get("max_retries") or 0),
        retry_policy=info.get("retry_policy") or "APPLICATION",
        resource=res,
        port_map=ports,
    )
