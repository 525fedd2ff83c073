"""AppDef -> the ``local_docker`` request: one network and one container per replica.

Pure: building a request talks to no engine and imports no ``docker`` SDK, so a dryrun and
the tests build requests offline. Containers are plain data (image, command and the keyword
arguments of ``docker.models.containers.ContainerCollection.create``); the SDK's own types
(a GPU ``DeviceRequest``) are made by the scheduler when it creates the containers.

Labels carry everything tx needs later (describe, list, logs, cancel from another process):
no state is kept on the submitting host.
"""
from __future__ import annotations

import fnmatch
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional

import attrs

from tx.config import CHECKPOINT_DIR
from tx import get_logger
from tx.schedulers import RANK0_HOST, make_unique, replica_env
from tx.specs import NULL_RESOURCE, AppDef, BindMount, CfgVal, DeviceMount, Role, VolumeMount, appdef_to_stored, macros
from tx_scheduler_docker.version import __version__

log = get_logger(__name__)

LABEL_VERSION = "tx.version"
LABEL_APP_ID = "tx.app-id"
LABEL_APP_NAME = "tx.app-name"
LABEL_SESSION = "tx.session"
LABEL_ROLE_NAME = "tx.role-name"
LABEL_ROLE_IDX = "tx.role-idx"
LABEL_REPLICA_ID = "tx.replica-id"
LABEL_NUM_REPLICAS = "tx.num-replicas"
LABEL_MEM_MB = "tx.mem-mb"
#: the preemption warning's grace (docs/recovery.md, "Preemption"): the seconds between the
#: engine's stop signal and its SIGKILL, set in every container's environment
PREEMPT_GRACE_ENV = "TX_PREEMPT_GRACE"
#: where the job's ``tx.distributed.preempted()`` notes the warning (the time it came): a file
#: :func:`preempt_note` names in the run's checkpoint directory, when that is a host path
PREEMPT_NOTE_ENV = "TX_PREEMPT_NOTE"
#: the run option ``preempt_grace``'s default (seconds; Docker's own default stop timeout is 10)
DEFAULT_PREEMPT_GRACE = 30
#: the AppDef as submitted (:func:`tx.specs.files.appdef_to_stored`), on every container
LABEL_APPDEF = "tx.appdef"
#: named devices of ``Resource.devices`` -> the host device files one unit stands for
#: (as TorchX maps them for Docker and AWS Batch)
_DEVICE_PATHS = {
    "vpc.amazonaws.com/efa": "/dev/infiniband/uverbs{}",
    "aws.amazon.com/neurondevice": "/dev/neuron{}",
}


@attrs.define
class DockerContainer:
    """One replica: ``image``, ``command`` (argv) and the keyword arguments of
    ``docker.models.containers.ContainerCollection.create`` (plain data: the SDK's types are
    made when the container is created)."""

    image: str
    command: List[str]
    kwargs: Dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class DockerJob:
    """The request of one app: its id, its network, one container per replica, and the
    host directories to create before the containers (``host_dirs``: the run's checkpoint
    location, bind-mounted at the same path)."""

    app_id: str
    network: str
    containers: List[DockerContainer] = attrs.field(factory=list)
    host_dirs: List[str] = attrs.field(factory=list)

    def __str__(self) -> str:
        import yaml

        return yaml.safe_dump(
            {"app_id": self.app_id, "network": self.network, "host_dirs": self.host_dirs,
             "containers": [attrs.asdict(c) for c in self.containers]},
            sort_keys=False, default_flow_style=False,
        )

    __repr__ = __str__


def _dns_name(text: str) -> str:
    """``text`` lower-cased with every character outside ``[a-z0-9-]`` made ``-``."""
    out = "".join(c if c.isalnum() and c.isascii() else "-" for c in text.lower()).strip("-")
    return out or "x"


def container_name(app_id: str, role: str, replica_id: int) -> str:
    """``<app_id>-<role>-<k>``: the container's name and its host name on the app's network
    (the role part shortened so that the name fits a 63-character DNS label)."""
    tail = f"-{replica_id}"
    room = max(1, 63 - len(app_id) - 1 - len(tail))
    return f"{app_id}-{_dns_name(role)[:room].rstrip('-') or 'r'}{tail}"


def _copy_env(patterns: Iterable[str]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for pat in patterns:
        for k, v in os.environ.items():
            if fnmatch.fnmatchcase(k, pat):
                out[k] = v
    return out


def _resources(role: Role) -> Dict[str, Any]:
    """Container kwargs from ``role.resource``: memMB -> memory limit and /dev/shm size, cpu
    -> CPU quota (nano CPUs), gpu -> a device request of that many GPUs, named devices ->
    device files."""
    res = role.resource
    kw: Dict[str, Any] = {}
    if res == NULL_RESOURCE:
        return kw
    if res.memMB and res.memMB > 0:
        kw["mem_limit"] = f"{int(res.memMB)}m"
        kw["memswap_limit"] = f"{int(res.memMB)}m"
        kw["shm_size"] = f"{int(res.memMB)}m"
    if res.cpu and res.cpu > 0:
        kw["nano_cpus"] = int(res.cpu * 1e9)
    if res.gpu and res.gpu > 0:
        kw["device_requests"] = [{"Driver": "", "Count": int(res.gpu), "Capabilities": [["gpu"]]}]
    devices: List[str] = []
    for name, count in (res.devices or {}).items():
        pattern = _DEVICE_PATHS.get(name)
        if pattern is None:
            log.warning("unknown device; not mounted", device=name, known=sorted(_DEVICE_PATHS))
            continue
        devices += [f"{pattern.format(i)}:{pattern.format(i)}:rwm" for i in range(int(count))]
    if devices:
        kw["devices"] = devices
    return kw


def _mounts(role: Role) -> Dict[str, Any]:
    """Container kwargs from ``role.mounts``: bind and named-volume mounts, device files."""
    volumes: Dict[str, Dict[str, str]] = {}
    devices: List[str] = []
    for m in role.mounts:
        if isinstance(m, BindMount):
            volumes[m.src_path] = {"bind": m.dst_path, "mode": "ro" if m.read_only else "rw"}
        elif isinstance(m, VolumeMount):
            volumes[m.src] = {"bind": m.dst_path, "mode": "ro" if m.read_only else "rw"}
        elif isinstance(m, DeviceMount):
            devices.append(f"{m.src_path}:{m.dst_path}:{m.permissions}")
        else:  # pragma: no cover - Role's type forbids it
            raise ValueError(f"role {role.name!r}: unsupported mount {m!r}")
    kw: Dict[str, Any] = {}
    if volumes:
        kw["volumes"] = volumes
    if devices:
        kw["devices"] = devices
    return kw


def parse_volumes(specs: Iterable[str]) -> Dict[str, Dict[str, str]]:
    """The run option ``volumes`` (``docker run -v`` syntax, one entry each:
    ``SRC:DST[:ro|rw]``, SRC a host path (``~`` expanded) or a named volume) as the SDK's
    ``volumes`` mapping ``{src: {"bind": dst, "mode": mode}}``
    (https://docker-py.readthedocs.io/en/stable/containers.html).

    Raises:
        ValueError: an entry without a destination, a relative destination or a mode
            other than ``ro``/``rw`` (message for users).
    """
    out: Dict[str, Dict[str, str]] = {}
    for spec in specs:
        parts = spec.strip().split(":")
        mode = "rw"
        if len(parts) == 3 and parts[2] in ("ro", "rw"):
            mode = parts.pop()
        if len(parts) != 2 or not parts[0] or not parts[1].startswith("/"):
            raise ValueError(f"run option 'volumes': {spec!r} is not SRC:DST[:ro|rw] with an absolute DST")
        src = os.path.expanduser(parts[0]) if parts[0].startswith(("/", "~")) else parts[0]
        out[src] = {"bind": parts[1], "mode": mode}
    return out


def _host_checkpoint_dir(env: Mapping[str, str]) -> str:
    """The replica's ``TX_CHECKPOINT_DIR`` when it is a path of this host (absolute, or a
    ``file://`` URL), else ""."""
    url = env.get(CHECKPOINT_DIR, "")
    path = url[len("file://"):] if url.startswith("file://") else url
    return os.path.normpath(path) if path.startswith("/") else ""


def preempt_note(checkpoint_dir: str, name: str, attempt: int) -> str:
    """The note of container ``name``'s attempt ``attempt`` in a host checkpoint directory:
    ``<dir>/.tx-preempt-<name>.<attempt>`` (bind-mounted at the same path: the engine's
    stop reaches the job, the job's warning handler appends the time, tx reads it)."""
    return os.path.join(checkpoint_dir, f".tx-preempt-{name}.{attempt}")


def _covered(path: str, volumes: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether a volume's destination is ``path`` or a directory above it."""
    return _host_path_under(path, volumes) is not None


def _host_path_under(path: str, volumes: Mapping[str, Mapping[str, str]]) -> Optional[str]:
    """For a ``path`` of the containers that a volume covers: its path on this host where
    that volume is a bind mount of a host directory (``""`` where it is a named volume);
    None where no volume covers it."""
    for src, v in volumes.items():
        dst = v["bind"].rstrip("/")
        if path == dst or path.startswith(dst + "/"):
            return os.path.normpath(src + path[len(dst):]) if src.startswith("/") else ""
    return None


def stop_timeout(cfg: Mapping[str, CfgVal]) -> int:
    """The containers' ``StopTimeout`` (whole seconds, rounded up) from the run option
    ``preempt_grace`` (default :data:`DEFAULT_PREEMPT_GRACE`).

    Raises:
        ValueError: a negative or non-numeric ``preempt_grace`` (message for users).
    """
    raw = cfg.get("preempt_grace")
    try:
        grace = float(DEFAULT_PREEMPT_GRACE if raw is None else raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        grace = -1.0
    if not grace >= 0 or math.isinf(grace):
        raise ValueError(f"run option 'preempt_grace' must be seconds >= 0, got {raw!r}")
    return int(math.ceil(grace))


def build_request(app: AppDef, cfg: Mapping[str, CfgVal], session_name: str) -> DockerJob:
    """The request for ``app``: a unique app id, its network ``tx-<app_id>`` and one
    container per replica (named by :func:`container_name`, labelled with the app, role
    and replica, environment from ``copy_env``, ``env``, the role and tx's replica
    contract, limits from the role's resource, its mounts, ports and retries).

    Args:
        cfg: resolved run options of ``local_docker`` (``copy_env``, ``env``, ``volumes``,
            ``privileged``, ``preempt_grace``: each container's ``StopTimeout`` and its
            ``TX_PREEMPT_GRACE``).
        session_name: the session recorded in the containers' labels.

    ``volumes`` come first, then the role's mounts. The run's checkpoint location
    (``TX_CHECKPOINT_DIR``, docs/recovery.md), when it is a path of this host that no
    volume or mount covers, is bind-mounted read-write at the same path, so that a container
    reads and writes the checkpoints every attempt of the run shares; it is listed in
    ``host_dirs`` (created before the containers), and so is its host path where a bind
    mount of the role or of ``volumes`` covers it: the containers' preemption notes
    (``TX_PREEMPT_NOTE``) are written there from the start, before the job's first save.

    Raises:
        ValueError: a malformed ``volumes`` entry, a negative ``preempt_grace``.
    """
    grace = stop_timeout(cfg)
    app_id = make_unique(_dns_name(app.name)[:40])
    network = f"tx-{app_id}"
    base_env: Dict[str, str] = {}
    copy_env = cfg.get("copy_env")
    if copy_env:
        base_env.update(_copy_env(copy_env))  # type: ignore[arg-type]
    base_env.update(cfg.get("env") or {})  # type: ignore[arg-type]
    cfg_volumes = parse_volumes(cfg.get("volumes") or [])  # type: ignore[arg-type]
    rank0 = container_name(app_id, app.roles[0].name, 0)
    job = DockerJob(app_id=app_id, network=network)
    # the run options less ``env``: its values may be credentials (tokens, passwords)
    stored = appdef_to_stored(app, cfg={k: v for k, v in cfg.items() if k != "env"})
    for idx, role in enumerate(app.roles):
        for k in range(role.num_replicas):
            values = macros.Values(img_root="", app_id=app_id, replica_id=str(k), rank0_env=RANK0_HOST)
            r = values.apply(role)
            name = container_name(app_id, role.name, k)
            env = dict(base_env)
            env.update(r.env)
            env.update(replica_env(app_id=app_id, role_name=role.name, replica_id=str(k), rank0_host=rank0,
                                   role_idx=idx, num_replicas=role.num_replicas))
            env[PREEMPT_GRACE_ENV] = str(grace)  # what the engine's stop gives the job
            labels = {
                LABEL_VERSION: __version__,
                LABEL_APP_ID: app_id,
                LABEL_APP_NAME: app.name,
                LABEL_SESSION: session_name,
                LABEL_ROLE_NAME: role.name,
                LABEL_ROLE_IDX: str(idx),
                LABEL_REPLICA_ID: str(k),
                LABEL_NUM_REPLICAS: str(role.num_replicas),
                LABEL_APPDEF: stored,
            }
            if role.resource != NULL_RESOURCE and role.resource.memMB > 0:
                labels[LABEL_MEM_MB] = str(role.resource.memMB)
            kwargs: Dict[str, Any] = {
                "name": name,
                "hostname": name[:63],
                "labels": labels,
                "environment": env,
                "network": network,
                # an init process as PID 1 forwards SIGTERM (cancel) to the program and
                # reaps zombies: without it `sh -c` ignores SIGTERM until SIGKILL
                "init": True,
                "privileged": bool(cfg.get("privileged")),
                "stop_signal": "SIGTERM",
                # the engine's stop (docker stop, podman stop, an engine shutting down)
                # without its own timeout: SIGTERM, then SIGKILL after this many seconds
                "stop_timeout": grace,
            }
            kwargs.update(_resources(role))
            mounts = _mounts(role)
            if "devices" in mounts and "devices" in kwargs:
                mounts["devices"] = kwargs.pop("devices") + mounts["devices"]
            mounts["volumes"] = {**cfg_volumes, **mounts.get("volumes", {})}
            ckpt = _host_checkpoint_dir(env)
            if ckpt:
                env[PREEMPT_NOTE_ENV] = preempt_note(ckpt, name, 0)
            host = _host_path_under(ckpt, mounts["volumes"]) if ckpt else None
            if ckpt and host is None:
                mounts["volumes"][ckpt] = {"bind": ckpt, "mode": "rw"}
                host = ckpt
            # made before the containers, under a bind mount of the user's too: the job's
            # preemption note (TX_PREEMPT_NOTE) goes there, from before its first save
            if host and host not in job.host_dirs:
                job.host_dirs.append(host)
            if not mounts["volumes"]:
                del mounts["volumes"]
            kwargs.update(mounts)
            if role.port_map:
                kwargs["ports"] = {f"{int(p)}/tcp": None for p in role.port_map.values()}
            if role.max_retries > 0:
                kwargs["restart_policy"] = {"Name": "on-failure", "MaximumRetryCount": int(role.max_retries)}
            job.containers.append(DockerContainer(image=role.image, command=[r.entrypoint, *r.args], kwargs=kwargs))
    return job
