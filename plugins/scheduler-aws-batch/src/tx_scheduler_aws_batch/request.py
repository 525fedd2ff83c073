"""AppDef -> AWS Batch request: a multi-node parallel job definition and its submission.

One node range per role (``targetNodes`` ``"start:end"``, at most :data:`MAX_NODE_RANGES`),
``numNodes`` = all replicas, ``mainNode`` 0 (replica 0 of the first role). Every node
runs its role's command through ``/bin/sh`` (:func:`wrap_command`), which exports the
replica environment contract (:mod:`tx.schedulers.env`) computed at run time from
``AWS_BATCH_JOB_NODE_INDEX`` and ``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS``, and
substitutes the ``${replica_id}`` macro in the arguments and in environment values.

The request's shape is boto3's ``register_job_definition`` and ``submit_job`` keyword
arguments: https://docs.aws.amazon.com/batch/latest/APIReference/API_RegisterJobDefinition.html
and https://docs.aws.amazon.com/batch/latest/APIReference/API_SubmitJob.html.
"""
from __future__ import annotations

import functools
import getpass
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

import attrs

from tx.schedulers import env as env_contract, infra_retries
from tx import get_logger
from tx.specs import AppDef, BindMount, CfgVal, DeviceMount, Role, VolumeMount, appdef_to_stored, macros

from tx_scheduler_aws_batch.resources import EFA_DEVICE, NEURON_DEVICE, instance_type_from_resource

#: AWS Batch accepts at most this many node ranges (so: roles) per multi-node job definition
MAX_NODE_RANGES = 5
#: AWS Batch allows 1 to 10 attempts
MAX_ATTEMPTS = 10
#: status reasons of an attempt that the host ended (a Spot reclaim, an instance that failed
#: or was terminated: ``Host EC2 (instance i-...) terminated.``), an infrastructure failure
HOST_FAILURE_REASON = "Host EC2"
#: the run option that says how long ECS waits between SIGTERM and SIGKILL when it stops a
#: job's container (the compute environment's ``ECS_CONTAINER_STOP_TIMEOUT``, 30 s unless
#: its launch template sets it: a job definition cannot), and the variable the containers get it in
PREEMPT_GRACE_OPT, PREEMPT_GRACE_ENV, DEFAULT_PREEMPT_GRACE = "preempt_grace", "TX_PREEMPT_GRACE", 30
#: CloudWatch Logs group that the ``awslogs`` driver writes Batch jobs to by default
DEFAULT_LOG_GROUP = "/aws/batch/job"
#: placeholder of the ``${replica_id}`` macro, replaced by the node's wrapper at run time
REPLICA_ID_TOKEN = "@@TX_REPLICA_ID@@"
#: tag keys tx puts on job definitions and jobs
TAG_VERSION = "tx/version"
TAG_APP_NAME = "tx/app-name"
TAG_USER = "tx/user"
TAG_SESSION = "tx/session"
#: the SubmitJob parameter that keeps the AppDef as submitted
#: (:func:`tx.specs.files.appdef_to_stored`; DescribeJobs returns a job's ``parameters``)
PARAM_APPDEF = "tx_appdef"
#: the most bytes of that parameter: a SubmitJob payload holds 30 KiB in all
#: (https://docs.aws.amazon.com/batch/latest/userguide/service_limits.html), 6 KiB are left
#: for the rest (name, queue, tags); tags hold only 256 characters a value
APPDEF_LIMIT = 24 * 1024
#: ``argv[0]`` of the ``sh -c`` wrapper; :func:`unwrap_command` recognizes it
WRAPPER_NAME = "tx-aws-batch"

log = get_logger(__name__)
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")


def job_name(app_name: str, share_id: Optional[str] = None) -> str:
    """A valid Batch job (and job definition) name stem for ``app_name``: letters, digits,
    ``-`` and ``_`` (other characters become ``-``), starting with a letter or digit, with
    ``-<share_id>`` appended, short enough for the unique suffix (Batch allows 128
    characters)."""
    stem = _NAME_BAD.sub("-", app_name).strip("-_") or "app"  # must start with a letter or digit
    if share_id:
        stem = f"{stem}-{_NAME_BAD.sub('-', share_id)}"
    return stem[:100]


def make_app_id(queue: str, name: str) -> str:
    """``<queue>:<job name>`` (TorchX's app id); ``queue`` may be a name or an ARN."""
    return f"{queue}:{name}"


def parse_app_id(app_id: str) -> Optional[Tuple[str, str]]:
    """``(queue, job name)`` of an app id, None if it is not of the form ``queue:name``
    (the queue may be an ARN, which holds colons itself)."""
    queue, sep, name = app_id.rpartition(":")
    if not sep or not queue or not name or not _NAME_BAD.sub("", name) == name:
        return None
    return queue, name


@attrs.define
class BatchJob:
    """What ``aws_batch`` submits.

    Attributes:
        name: the job name (also the job definition's name), unique per app.
        queue: the job queue (name or ARN).
        job_def: ``register_job_definition`` keyword arguments.
        submit: ``submit_job`` keyword arguments other than ``jobDefinition`` (the ARN
            returned by the registration); its ``parameters`` hold the stored AppDef
            (:data:`PARAM_APPDEF`), made on first use where the request was built with
            ``stored_from`` (a sweep's trials: an array job keeps none).
        app_id: ``<queue>:<name>``.
    """

    name: str
    queue: str
    job_def: Dict[str, Any]
    _submit: Dict[str, Any] = attrs.field(alias="submit")
    app_id: str = attrs.field(kw_only=True)
    _stored_from: Optional[Tuple[AppDef, Dict[str, Any]]] = attrs.field(
        default=None, repr=False, eq=False, kw_only=True, alias="stored_from")

    @property
    def submit(self) -> Dict[str, Any]:
        if self._stored_from is not None:
            app, cfg = self._stored_from
            self._stored_from = None
            self._submit = _with_appdef(self._submit, app, cfg)
        return self._submit

    def __repr__(self) -> str:
        import yaml

        return yaml.safe_dump(
            {"app_id": self.app_id, "register_job_definition": self.job_def, "submit_job": self.submit},
            sort_keys=False, default_flow_style=False, width=120,
        )


def _shell_quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def wrap_command(role: Role, start: int, env_with_macro: List[str]) -> List[str]:
    """The container command of a role's node range: ``/bin/sh -c SCRIPT tx-aws-batch
    ENTRYPOINT ARGS...``. SCRIPT computes the replica id (``AWS_BATCH_JOB_NODE_INDEX`` -
    ``start``; a role with one replica is replica 0 without it), exports ``TX_REPLICA_ID``
    and ``TX_RANK0_HOST`` (``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS``, which AWS sets
    on every node but the main one, which uses ``localhost``) under both names, replaces
    :data:`REPLICA_ID_TOKEN` in the arguments and in the variables ``env_with_macro``, and
    ``exec``s the entrypoint (so its exit code is the node's)."""
    rid, rid_alias = env_contract.REPLICA_ID, env_contract.torchx_name(env_contract.REPLICA_ID)
    rank0, rank0_alias = env_contract.RANK0_HOST, env_contract.torchx_name(env_contract.RANK0_HOST)
    if role.num_replicas == 1:
        index = "r=0"
    else:
        index = (
            'if [ -n "${AWS_BATCH_JOB_NODE_INDEX:-}" ]; then '
            f"r=$((AWS_BATCH_JOB_NODE_INDEX - {start})); "
            "else r=0; "
            f"echo \"tx: AWS_BATCH_JOB_NODE_INDEX is not set: role {role.name} cannot tell its "
            "replicas apart; assuming replica 0\" >&2; fi"
        )
    lines = [
        index,
        f"export {rid}=$r {rid_alias}=$r",
        f'{rank0}="${{AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS:-localhost}}"',
        f'export {rank0} {rank0_alias}="${{{rank0}}}"',
        # replace the replica id placeholder in $1 of tx_sub (POSIX sh: no arrays, no ${//})
        f"tx_sub() {{ a=$1; b=; while :; do case $a in *{REPLICA_ID_TOKEN}*) "
        f"b=$b${{a%%{REPLICA_ID_TOKEN}*}}$r; a=${{a#*{REPLICA_ID_TOKEN}}};; *) break;; esac; done; "
        "printf '%s' \"$b$a\"; }",
    ]
    # "$(...; printf .)" then "${x%.}": command substitution would drop trailing newlines
    for name in env_with_macro:
        lines.append(f'{name}=$(tx_sub "${name}"; printf .); {name}=${{{name}%.}}; export {name}')
    lines.append(
        f'n=$#; for x do case $x in *{REPLICA_ID_TOKEN}*) x=$(tx_sub "$x"; printf .); x=${{x%.}};; esac; '
        'set -- "$@" "$x"; done; shift "$n"'
    )
    lines.append('exec "$@"')
    return ["/bin/sh", "-c", "; ".join(lines), WRAPPER_NAME, role.entrypoint, *role.args]


def unwrap_command(command: List[str]) -> Tuple[str, List[str]]:
    """``(entrypoint, args)`` of a container command made by :func:`wrap_command` (the
    command itself, split, when it is not one); the placeholder is shown as the macro."""
    if len(command) >= 5 and command[:2] == ["/bin/sh", "-c"] and command[3] == WRAPPER_NAME:
        command = command[4:]
    parts = [c.replace(REPLICA_ID_TOKEN, macros.replica_id) for c in command]
    return (parts[0], parts[1:]) if parts else ("", [])


def _resource_requirements(role: Role) -> List[Dict[str, str]]:
    res = role.resource
    if res.memMB is None or res.memMB <= 0:
        raise ValueError(
            f"role {role.name!r}: AWS Batch needs a memory size; set resource.memMB (> 0) "
            "or use a named resource such as aws_m5.2xlarge"
        )
    reqs = [
        {"type": "VCPU", "value": str(max(1, int(res.cpu)))},
        {"type": "MEMORY", "value": str(int(res.memMB))},
    ]
    if res.gpu > 0:
        reqs.append({"type": "GPU", "value": str(int(res.gpu))})
    return reqs


def _devices(role: Role) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for name, count in role.resource.devices.items():
        if name == EFA_DEVICE:
            paths = [f"/dev/infiniband/uverbs{i}" for i in range(count)]
        elif name == NEURON_DEVICE:
            paths = [f"/dev/neuron{i}" for i in range(count)]
        else:
            raise ValueError(
                f"role {role.name!r}: device {name!r} is unknown to aws_batch "
                f"(known: {EFA_DEVICE}, {NEURON_DEVICE}); mount it with a DeviceMount instead"
            )
        out += [{"hostPath": p, "containerPath": p, "permissions": ["READ", "WRITE", "MKNOD"]} for p in paths]
    for m in role.mounts:
        if isinstance(m, DeviceMount):
            perms = [{"r": "READ", "w": "WRITE", "m": "MKNOD"}[c] for c in m.permissions]
            out.append({"hostPath": m.src_path, "containerPath": m.dst_path, "permissions": perms})
    return out


def _volumes(role: Role) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    volumes: List[Dict[str, Any]] = []
    points: List[Dict[str, Any]] = []
    for i, m in enumerate(role.mounts):
        name = f"mount_{i}"
        if isinstance(m, BindMount):
            volumes.append({"name": name, "host": {"sourcePath": m.src_path}})
        elif isinstance(m, VolumeMount):
            volumes.append({"name": name, "efsVolumeConfiguration": {"fileSystemId": m.src}})
        else:
            continue
        points.append({"containerPath": m.dst_path, "readOnly": m.read_only, "sourceVolume": name})
    return volumes, points


def preempt_grace(cfg: Mapping[str, CfgVal]) -> int:
    """The run option ``preempt_grace`` (s; :data:`DEFAULT_PREEMPT_GRACE` if unset).

    Raises:
        InvalidRunConfigException: not whole seconds >= 0.
    """
    from tx.specs import InvalidRunConfigException

    value = cfg.get(PREEMPT_GRACE_OPT)
    if value is None:
        return DEFAULT_PREEMPT_GRACE
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRunConfigException(f"run option {PREEMPT_GRACE_OPT} must be whole seconds >= 0, got {value!r}",
                                        PREEMPT_GRACE_OPT, cfg)
    return value


def _retry_strategy(app: AppDef, infra: int) -> Dict[str, Any]:
    """``retryStrategy``: max ``max_retries`` + 1 attempts plus ``infra`` (run option
    ``infra_retries``) spare attempts for host failures (at most :data:`MAX_ATTEMPTS`)."""
    retries = max(r.max_retries for r in app.roles)
    attempts = min(MAX_ATTEMPTS, retries + 1 + infra)
    rules: List[Dict[str, str]] = [{"onStatusReason": f"{HOST_FAILURE_REASON}*", "action": "RETRY"}]
    # with no retries asked for, every other failure ends the job at once; with some, Batch
    # has one attempt counter, so the spares may also serve a failing program
    rules.append({"onReason": "*", "action": "RETRY" if retries > 0 else "EXIT"})
    return {"attempts": attempts, "evaluateOnExit": rules}


def build_request(
    app: AppDef, cfg: Mapping[str, CfgVal], name: str, session: str, tx_version: str, defer_appdef: bool = False,
) -> BatchJob:
    """The :class:`BatchJob` for ``app`` named ``name`` (already unique); ``defer_appdef``:
    its stored AppDef made on first use of ``submit`` (a sweep's trials).

    Every node's container has ``TX_PREEMPT_GRACE`` (run option ``preempt_grace``): the
    seconds ECS gives a stopped container between SIGTERM and SIGKILL.

    Raises:
        ValueError: more than :data:`MAX_NODE_RANGES` roles, a role without memory, an
            unknown device.
        InvalidRunConfigException: a bad ``preempt_grace`` or ``infra_retries``.
    """
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    if len(app.roles) > MAX_NODE_RANGES:
        raise ValueError(
            f"app {app.name!r} has {len(app.roles)} roles but an AWS Batch multi-node job has "
            f"at most {MAX_NODE_RANGES} node ranges (one per role): merge roles"
        )
    queue = str(cfg["queue"])
    app_id = make_app_id(queue, name)
    grace = preempt_grace(cfg)
    # ${app_id} is the whole app id (TorchX put the job name alone), so that the Runner's
    # TX_JOB_ID (`aws_batch://<session>/${app_id}`) is a handle tx can resolve
    values = macros.Values(img_root="", app_id=app_id, replica_id=REPLICA_ID_TOKEN, rank0_env=env_contract.RANK0_HOST)
    ranges = []
    start = 0
    for role_idx, role in enumerate(app.roles):
        role = values.apply(role)
        static = env_contract.replica_env(
            app_id=app_id, role_name=role.name, replica_id="0",
            role_idx=role_idx, num_replicas=role.num_replicas,
        )
        for key in (env_contract.REPLICA_ID, env_contract.torchx_name(env_contract.REPLICA_ID)):
            static.pop(key, None)  # computed per node by the wrapper
        env = {**role.env, **static}
        env.setdefault(PREEMPT_GRACE_ENV, str(grace))  # the warning's grace (a role's own wins)
        with_macro = sorted(k for k, v in env.items() if REPLICA_ID_TOKEN in v)
        volumes, points = _volumes(role)
        container: Dict[str, Any] = {
            "image": role.image,
            "command": wrap_command(role, start, with_macro),
            "environment": [{"name": k, "value": v} for k, v in env.items()],
            "resourceRequirements": _resource_requirements(role),
            "privileged": bool(cfg.get("privileged")),
            # an init process as PID 1 (docker run --init) forwards signals and reaps
            # zombies: the wrapper execs the role's command, and a PID 1 ignores every
            # signal it has no handler for, so `kill -9 $$` in a replica did nothing
            "linuxParameters": {"sharedMemorySize": int(role.resource.memMB), "initProcessEnabled": True},
            "logConfiguration": {"logDriver": "awslogs"},
            "volumes": volumes,
            "mountPoints": points,
        }
        devices = _devices(role)
        if devices:
            container["linuxParameters"]["devices"] = devices
        itype = instance_type_from_resource(role.resource)
        if itype:
            container["instanceType"] = itype
        if cfg.get("job_role_arn"):
            container["jobRoleArn"] = str(cfg["job_role_arn"])
        if cfg.get("execution_role_arn"):
            container["executionRoleArn"] = str(cfg["execution_role_arn"])
        end = start + role.num_replicas - 1
        ranges.append({"targetNodes": f"{start}:{end}", "container": container})
        start = end + 1
    user = str(cfg.get("user") or _user())
    tags = {
        TAG_VERSION: tx_version,
        TAG_APP_NAME: app.name,
        TAG_USER: user,
        TAG_SESSION: session,
        **{str(k): str(v) for k, v in app.metadata.items()},
    }
    job_def: Dict[str, Any] = {
        "jobDefinitionName": name,
        "type": "multinode",
        "nodeProperties": {"numNodes": start, "mainNode": 0, "nodeRangeProperties": ranges},
        "retryStrategy": _retry_strategy(app, infra_retries(cfg)),
        "propagateTags": True,
        "tags": tags,
    }
    submit: Dict[str, Any] = {"jobName": name, "jobQueue": queue, "tags": dict(tags)}
    if cfg.get("share_id"):
        submit["shareIdentifier"] = str(cfg["share_id"])
        submit["schedulingPriorityOverride"] = int(cfg.get("priority") or 0)
        job_def["schedulingPriority"] = int(cfg.get("priority") or 0)
    if defer_appdef:
        return BatchJob(name=name, queue=queue, job_def=job_def, submit=submit, app_id=app_id,
                        stored_from=(app, dict(cfg)))
    return BatchJob(name=name, queue=queue, job_def=job_def, submit=_with_appdef(submit, app, cfg), app_id=app_id)


def _with_appdef(submit: Dict[str, Any], app: AppDef, cfg: Mapping[str, CfgVal]) -> Dict[str, Any]:
    """``submit`` with the stored AppDef in its ``parameters`` (after its tags), or as it is
    (with a warning) where the AppDef exceeds :data:`APPDEF_LIMIT` bytes compressed.

    Raises:
        TypeError: the app's metadata holds values JSON cannot represent.
    """
    stored = appdef_to_stored(app, APPDEF_LIMIT, cfg=cfg)
    if stored is None:
        log.warning(f"the AppDef of {app.name!r} exceeds {APPDEF_LIMIT} bytes compressed: not kept in the "
                    f"job's parameter {PARAM_APPDEF}; describe will rebuild the roles from the job definition")
        return submit
    out: Dict[str, Any] = {}
    for key, value in submit.items():
        out[key] = value
        if key == "tags":
            out["parameters"] = {PARAM_APPDEF: stored}
    return out


@functools.lru_cache(maxsize=1)
def _user() -> str:
    """The submitting user's name (once per process: a sweep asks it for every trial)."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry, no USER: still submit
        return "unknown"
