"""The request the ray scheduler submits: a Ray job running tx's driver.

An AppDef becomes one Ray job (https://docs.ray.io/en/latest/cluster/running-applications/job-submission/sdk.html):

* ``entrypoint``: ``exec python -m tx_ray_driver`` (:mod:`tx_scheduler_ray.tx_ray_driver`);
* ``runtime_env`` (https://docs.ray.io/en/latest/ray-core/handling-dependencies.html#api-reference):
  ``working_dir`` (the job's code, see :func:`working_dir_of`) with the workspace's
  ``.txignore`` patterns as ``excludes``, ``py_modules`` (the driver package), ``pip`` (the
  lines of the requirements file, when there is one) and ``env_vars``: the driver's spec
  (:data:`tx_scheduler_ray.tx_ray_driver.SPEC_ENV`) and ``RAY_JOB_STOP_WAIT_TIME_S`` (how long
  ``ray job stop`` lets the driver stop its replicas before killing it);
* ``metadata``: ``tx_app``, ``tx_session``, ``tx_version`` and ``tx_appdef``, the AppDef as
  submitted (:func:`tx.specs.files.appdef_to_stored`; Ray keeps the metadata's strings with
  the job, and describe gives it back);
* ``submission_id``: ``<app name>-<random id>``; tx's app id is ``<host>:<port>-<submission_id>``
  (TorchX's format), so that a handle names the cluster it runs on.

The driver spec holds, per role, the command, the environment (with tx's replica variables,
:func:`tx.schedulers.env.replica_env`, ``${replica_id}`` expanded by the driver), the replica
counts, the retry policy and the bundle each replica reserves (``CPU`` = max(1, cpu), ``GPU``,
``memory`` = memMB * 2**20 bytes).
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Dict, List, Mapping, Optional

import attrs

from tx.schedulers import DEFAULT_INFRA_RETRIES, ONE_FAILURE_S, PEER_LOST, env as env_contract, infra_retries
from tx.specs import NULL_RESOURCE, AppDef, CfgVal, InvalidRunConfigException, Role, appdef_to_stored, macros
from tx.workspace import IGNORE_FILE

from tx_scheduler_ray import tx_ray_driver
from tx_scheduler_ray.version import __version__

#: the environment variable that holds the rank-0 replica's address (``${rank0_env}``)
RANK0_ENV = env_contract.RANK0_HOST
#: the job metadata key that holds the AppDef as submitted
METADATA_APPDEF = "tx_appdef"
#: seconds a replica gets between SIGTERM and SIGKILL when the app stops or restarts
STOP_GRACE_S = 5.0
#: the run option ``preempt_grace``'s default: seconds a replica has, once its actor's
#: process is gone (Ray stopped or lost it), between the warning (SIGTERM) and SIGKILL
DEFAULT_PREEMPT_GRACE = 30


def preempt_grace(cfg: Mapping[str, CfgVal]) -> int:
    """The run option ``preempt_grace`` in whole seconds (rounded up; default
    :data:`DEFAULT_PREEMPT_GRACE`).

    Raises:
        InvalidRunConfigException: negative or not a number.
    """
    raw = cfg.get("preempt_grace")
    try:
        grace = float(DEFAULT_PREEMPT_GRACE if raw is None else raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        grace = -1.0
    if not 0 <= grace < float("inf"):
        raise InvalidRunConfigException(f"run option 'preempt_grace' must be seconds >= 0, got {raw!r}",
                                        "preempt_grace", cfg)
    return int(math.ceil(grace))
#: the driver's entrypoint. Ray runs it with ``sh -c`` and, on ``stop_job``, signals that
#: process and the children it has at that moment; Debian's sh (dash) forks for its last
#: command, so a stop right after submit could kill the shell before it forked the driver,
#: which then ran on, unsignalled, while Ray said STOPPED (CI, stop 46: its placement group
#: and replicas held the head's CPUs). ``exec``: the driver is the process Ray signals.
ENTRYPOINT = "exec python -m tx_ray_driver"

_NAME_BAD = re.compile(r"[^a-z0-9-]+")
_ROLE_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")
_MB = 1 << 20


def driver_dir() -> str:
    """The local directory of the driver package (uploaded as a ``py_modules`` entry)."""
    return os.path.dirname(os.path.abspath(tx_ray_driver.__file__))


def submission_name(app_name: str) -> str:
    """The app name as a submission id prefix: lower case letters, digits and ``-``."""
    name = _NAME_BAD.sub("-", app_name.lower()).strip("-")
    return name[:40] or "app"


def ignore_patterns(directory: str) -> List[str]:
    """The gitignore-style patterns of ``<directory>/.txignore`` (Ray's ``excludes`` use
    the same syntax)."""
    path = os.path.join(directory, IGNORE_FILE)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [ln.rstrip("\n") for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


def read_requirements(path: str, cfg: Mapping[str, CfgVal]) -> List[str]:
    """The requirement lines of a pip requirements file (comments and blanks dropped).

    Raises:
        InvalidRunConfigException: the file cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f]
    except OSError as e:
        raise InvalidRunConfigException(
            f"run option 'requirements': cannot read {path!r}: {e.strerror}", "requirements", cfg
        ) from None
    return [ln for ln in lines if ln and not ln.startswith("#")]


def working_dir_of(app: AppDef, cfg: Optional[Mapping[str, CfgVal]] = None) -> str:
    """The directory uploaded as the job's ``working_dir`` (absolute): run option
    ``working_dir`` (TorchX's ``RayJob.working_dir``, ``~`` expanded), else the first role's
    image when it is a local directory (``--workspace`` puts it there, as TorchX's ray
    scheduler did), else the current directory (TorchX's default workspace).

    Raises:
        InvalidRunConfigException: run option ``working_dir`` is not a directory, or names
            another directory than the workspace (the job has one working_dir).
    """
    image = app.roles[0].image if app.roles else ""
    workspace = os.path.abspath(image) if image and os.path.isdir(image) else None
    given = (cfg or {}).get("working_dir")
    if given:
        path = os.path.abspath(os.path.expanduser(str(given)))
        if not os.path.isdir(path):
            raise InvalidRunConfigException(
                f"run option 'working_dir': {given!r} is not a directory", "working_dir", cfg or {})
        if workspace is not None and workspace != path:
            raise InvalidRunConfigException(
                f"run option 'working_dir' ({path}) and the workspace ({workspace}) are different "
                f"directories; the job uploads one: drop one of them", "working_dir", cfg or {})
        return path
    return workspace or os.getcwd()


def requirements_of(working_dir: str, cfg: Mapping[str, CfgVal]) -> Optional[str]:
    """The requirements file of the job: run option ``requirements`` (``~`` expanded; a
    relative path is read from the current directory, as TorchX and Ray do, else from
    ``working_dir``), else ``requirements.txt`` of ``working_dir`` when there is one, else None.

    Raises:
        InvalidRunConfigException: the ``requirements`` file is in neither place.
    """
    given = cfg.get("requirements")
    if not given:
        default = os.path.join(working_dir, "requirements.txt")
        return default if os.path.isfile(default) else None
    path = os.path.expanduser(str(given))
    if os.path.isabs(path) or os.path.isfile(path):
        return os.path.abspath(path)
    in_working_dir = os.path.join(working_dir, path)
    if os.path.isfile(in_working_dir):
        return os.path.normpath(in_working_dir)
    raise InvalidRunConfigException(
        f"run option 'requirements': no file {given!r} in the current directory nor in the "
        f"working_dir {working_dir}", "requirements", cfg)


def bundle_of(role: Role) -> Dict[str, float]:
    """What each replica of ``role`` reserves: ``{"CPU": n, "GPU": n, "memory": bytes}``
    (Ray's resource names; a role without a resource asks for 1 CPU)."""
    res = role.resource
    if res == NULL_RESOURCE:
        return {"CPU": 1.0}
    out: Dict[str, float] = {"CPU": float(max(1, res.cpu))}
    if res.gpu > 0:
        out["GPU"] = float(res.gpu)
    if res.memMB > 0:
        out["memory"] = float(res.memMB * _MB)
    return out


def validate_app(app: AppDef) -> None:
    """Raises ValueError for what the driver cannot run: no roles, a role name unusable
    in file names, ``min_replicas`` above ``num_replicas``, a missing entrypoint."""
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    seen = set()
    for role in app.roles:
        if not _ROLE_NAME.match(role.name):
            raise ValueError(f"role name {role.name!r}: use letters, digits, '_', '.' and '-'")
        if role.name in seen:
            raise ValueError(f"two roles are named {role.name!r}")
        seen.add(role.name)
        if role.min_replicas is not None and role.min_replicas > role.num_replicas:
            raise ValueError(
                f"role {role.name!r}: min_replicas ({role.min_replicas}) > num_replicas ({role.num_replicas})"
            )
        if not role.entrypoint or role.entrypoint == "<MISSING>":
            raise ValueError(f"role {role.name!r} has no entrypoint")


@attrs.define
class RayJob:
    """What ``schedule`` submits.

    Attributes:
        address: the dashboard's URL (``http://host:port``).
        submission_id: the Ray job's submission id (``<app name>-<random id>``).
        entrypoint: the job's shell command.
        runtime_env: the job's runtime environment (``working_dir`` a local path until
            the client uploads it).
        metadata: the job's metadata.
        spec: the driver's spec (also in ``runtime_env["env_vars"]``, as JSON).
        cluster_config_file, cluster_name: how the address was found, where it came from a
            Ray cluster launcher config.
    """

    address: str
    submission_id: str
    entrypoint: str
    runtime_env: Dict[str, Any]
    metadata: Dict[str, str]
    spec: Dict[str, Any]
    cluster_config_file: Optional[str] = None
    cluster_name: Optional[str] = None

    @property
    def app_id(self) -> str:
        """tx's app id: ``<host>:<port>-<submission_id>``."""
        return f"{hostport(self.address)}-{self.submission_id}"

    def __repr__(self) -> str:
        env = {k: v for k, v in self.runtime_env.get("env_vars", {}).items() if k != tx_ray_driver.SPEC_ENV}
        shown = {**self.runtime_env, "env_vars": {**env, tx_ray_driver.SPEC_ENV: "<the spec below, as JSON>"}}
        lines = [
            f"# Ray job of tx-scheduler-ray {__version__}",
            f"app_id: {self.app_id}",
            f"dashboard: {self.address}",
            f"entrypoint: {self.entrypoint}",
            "runtime_env: " + json.dumps(shown, indent=2, sort_keys=True),
            "metadata: " + json.dumps(self.metadata, sort_keys=True),
            "spec: " + json.dumps(self.spec, indent=2, sort_keys=True),
        ]
        if self.cluster_config_file:
            lines.insert(3, f"cluster_config_file: {self.cluster_config_file} (cluster_name: {self.cluster_name})")
        return "\n".join(lines) + "\n"


def hostport(address: str) -> str:
    """``host:port`` of a dashboard URL (``http://127.0.0.1:8265`` -> ``127.0.0.1:8265``)."""
    from urllib.parse import urlparse

    u = urlparse(address if "://" in address else f"http://{address}")
    return u.netloc


def spec_json(spec: Dict[str, Any]) -> str:
    """``spec`` as JSON with every ``$`` written ``\\u0024``: Ray expands the runtime env's
    ``env_vars`` values (``os.path.expandvars``, then every unknown ``${NAME}`` removed:
    ``ray._private.utils.update_envs``), which would rewrite a role's ``$HOME`` or
    ``${TX_ROLE_NAME}`` with the driver's environment before the replica's shell sees it;
    ``json.loads`` reads the escape back as ``$``."""
    return json.dumps(spec, sort_keys=True).replace("$", "\\u0024")


def build_spec(app: AppDef, app_id: str, address: str, infra: int = DEFAULT_INFRA_RETRIES,
               grace: int = DEFAULT_PREEMPT_GRACE) -> Dict[str, Any]:
    """The driver's spec (JSON-able) for ``app`` with id ``app_id``; ``infra``: the run
    option ``infra_retries`` (restarts after a replica lost to the infrastructure);
    ``grace``: ``preempt_grace`` (each replica's ``TX_PREEMPT_GRACE``)."""
    roles = []
    for i, role in enumerate(app.roles):
        contract = env_contract.replica_env(
            app_id=app_id, role_name=role.name, replica_id=macros.replica_id,
            role_idx=i, num_replicas=role.num_replicas,
        )
        roles.append({
            "name": role.name,
            "entrypoint": role.entrypoint,
            "args": list(role.args),
            "env": {**role.env, **contract, "TX_PREEMPT_GRACE": str(grace)},
            "num_replicas": role.num_replicas,
            "min_replicas": role.min_replicas,
            "max_retries": role.max_retries,
            "retry_policy": str(role.retry_policy),
            "resources": bundle_of(role),
            "image": role.image,
        })
    rank0 = [RANK0_ENV, env_contract.TORCHX_NAMES[RANK0_ENV]]
    return {
        "version": tx_ray_driver.FORMAT_VERSION,
        "app_id": app_id,
        "address": hostport(address),
        "rank0_env": rank0,
        "drop_env": [tx_ray_driver.SPEC_ENV],
        "stop_grace_s": STOP_GRACE_S,
        "placement_strategy": "SPREAD",
        "infra_retries": infra,
        "preempt_grace_s": grace,
        # a replica that only lost its peer: the driver waits this long for the others' own ends
        "peer_lost": PEER_LOST.pattern,
        "one_failure_s": ONE_FAILURE_S,
        "roles": roles,
    }


def build_request(
    app: AppDef, cfg: Mapping[str, CfgVal], address: str, submission_id: str, session: str
) -> RayJob:
    """The Ray job for ``app``.

    Args:
        address: the dashboard URL the job goes to.
        submission_id: the job's submission id.
        session: the tx session name (recorded in the job's metadata).

    Raises:
        InvalidRunConfigException: ``working_dir`` is not a directory or is not the
            workspace; the requirements file cannot be found or read; ``infra_retries``
            is not an integer >= 0; ``preempt_grace`` is negative.
    """
    working_dir = working_dir_of(app, cfg)
    app_id = f"{hostport(address)}-{submission_id}"
    spec = build_spec(app, app_id, address, infra_retries(cfg), preempt_grace(cfg))
    runtime_env: Dict[str, Any] = {
        "working_dir": working_dir,
        "py_modules": [driver_dir()],
        "env_vars": {
            tx_ray_driver.SPEC_ENV: spec_json(spec),
            # ray job stop: SIGTERM to the driver, SIGKILL after this many seconds
            "RAY_JOB_STOP_WAIT_TIME_S": str(int(STOP_GRACE_S + 25)),
        },
    }
    excludes = ignore_patterns(working_dir)
    if excludes:
        runtime_env["excludes"] = excludes
    req_path = requirements_of(working_dir, cfg)
    if req_path:
        pip = read_requirements(req_path, cfg)
        if pip:
            runtime_env["pip"] = pip
    metadata = {"tx_app": app.name, "tx_session": session, "tx_version": __version__,
                METADATA_APPDEF: appdef_to_stored(app, cfg=cfg) or ""}
    return RayJob(
        address=address, submission_id=submission_id, entrypoint=ENTRYPOINT, runtime_env=runtime_env,
        metadata=metadata, spec=spec,
        cluster_config_file=str(cfg["cluster_config_file"]) if cfg.get("cluster_config_file") else None,
        cluster_name=str(cfg["cluster_name"]) if cfg.get("cluster_name") else None,
    )
