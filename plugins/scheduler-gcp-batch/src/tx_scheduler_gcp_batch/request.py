"""AppDef -> Google Cloud Batch ``Job`` (``google.cloud.batch_v1.Job``), and back.

Pure: the job is built as a dict of the message's fields, without the client libraries
(the scheduler makes the message of it, see :func:`build_job`); reading a job back
(:func:`task_layout`, :func:`roles_of`) only reads its attributes.

Batch runs one task group per job ("Only one TaskGroup is supported now", Job.task_groups in
https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs), so an app
is one task group whose tasks are all the replicas of all roles, in role order:

* task ``i`` is replica ``k`` of role ``r``; ``task_environments[i]`` holds the role's env
  (macros resolved for that replica; ``${app_id}`` is the app id
  ``{project}:{location}:{job_id}``) and the replica environment contract
  (:mod:`tx.schedulers.env`: ``TX_APP_ID``, ``TX_ROLE_NAME``, ``TX_ROLE_IDX``,
  ``TX_REPLICA_ID``, ``TX_NUM_REPLICAS`` and their TorchX names). Batch adds
  ``BATCH_TASK_INDEX`` and ``BATCH_TASK_COUNT``.
* one task per VM (``task_count_per_node=1``), a hosts file (``require_hosts_file``) and
  passwordless SSH between the VMs (``permissive_ssh``), for multi-node training.
* one container runnable per role, run through ``/bin/sh -c`` (the image must have a
  POSIX shell): with several roles it exits 0 at once on tasks of other roles; it exports
  ``TX_RANK0_HOST`` (and ``TORCHX_RANK0_HOST``) from ``BATCH_MAIN_NODE_HOSTNAME``, else the
  first line of ``BATCH_HOSTS_FILE``, else ``localhost`` (task 0, replica 0 of role 0,
  runs on the main node); then it ``exec``\\ s the role's entrypoint and args, with
  ``${replica_id}`` read from ``TX_REPLICA_ID``.
* the task spec's compute resource is the largest role's (``cpu`` -> ``cpu_milli``,
  ``memMB`` -> ``memory_mib``); GPUs pick an A100 machine type (``a2-highgpu-{1,2,4,8}g``,
  ``a2-megagpu-16g``) with driver installation, unless ``machine_type`` is given.
* ``max_retry_count`` is the largest ``max_retries`` of the roles (Batch allows 0-10). A
  task that ends with one of Batch's reserved exit codes for a VM lost under it
  (:data:`INFRA_EXIT_CODES`: Spot preemption, the VM's agent silent, the VM rebooted or
  recreated) is retried up to ``infra_retries`` (run option, default 3; ``spot_retries``,
  its former name, wins where set) more times, on every provisioning model: with no user
  retries a lifecycle policy retries only those exit codes; with user retries the two
  budgets add up (Batch keeps one retry counter per task).
* on Spot VMs (``provisioning_model=SPOT``) every task's environment has
  ``TX_PREEMPT_GRACE=30``: the preemption notice Compute Engine gives (the guest OS shuts
  down, SIGTERM to its processes; power-off 30 s later), so that ``tx.distributed.preempted()``
  jobs know what they can count on; the preempted task ends with exit code 50001.
* the task spec's environment variable ``TX_APPDEF``: the AppDef as submitted
  (:func:`tx.specs.files.appdef_to_stored`; GetJob returns it, labels hold 63 characters);
* labels ``tx_version`` and ``tx_app_name`` (label syntax: lowercase, digits, ``_``, ``-``);
  each role's runnable is labelled with its resource and ``max_retries`` (``tx-cpu``,
  ``tx-gpu``, ``tx-memmb``, ``tx-max-retries``) so that describe gives the roles back;
  logs go to Cloud Logging.

References: https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs,
https://cloud.google.com/batch/docs/create-run-job-multiple-vms,
https://cloud.google.com/batch/docs/troubleshooting#reserved-exit-codes (50001-50006),
https://cloud.google.com/compute/docs/gpus (A100 machine types).
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import attrs

from tx.schedulers import env as envc, infra_retries, make_unique
from tx import get_logger
from tx.specs import AppDef, CfgVal, Resource, Role, appdef_to_stored, macros

#: Batch's reserved exit codes for a task whose VM failed under it, each with the reason tx
#: gives (https://cloud.google.com/batch/docs/troubleshooting#reserved-exit-codes): the
#: infrastructure's failures. 50004 (the task unresponsive) and 50005 (the task ran past its
#: maxRunDuration or a runnable past its timeout) are the task's own, as is every other code.
INFRA_EXIT_CODES: Dict[int, str] = {
    50001: "Spot VM preemption",
    50002: "VM reporting timeout",
    50003: "VM rebooted during execution",
    50006: "VM recreated during execution",
}
#: GPU count -> the A100 machine type that has exactly that many GPUs
A100_MACHINE_TYPES = {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g", 8: "a2-highgpu-8g", 16: "a2-megagpu-16g"}
MAX_RETRY_COUNT = 10
SHELL = "/bin/sh"
#: the seconds Compute Engine gives a Spot VM between its preemption notice (ACPI G2 soft
#: off: the guest shuts down, its processes get SIGTERM) and the hard power-off
#: (https://cloud.google.com/compute/docs/instances/spot#preemption-process); set as
#: ``TX_PREEMPT_GRACE`` in every task of a job on Spot VMs
PREEMPT_GRACE_S = 30
PREEMPT_GRACE_ENV = "TX_PREEMPT_GRACE"

#: the task spec's environment variable that keeps the AppDef as submitted
ENV_APPDEF = "TX_APPDEF"
#: the most bytes of it: Linux refuses to start a program with one environment string over
#: 128 KiB (MAX_ARG_STRLEN), and every task's runnables get this variable; 64 KiB leaves room
APPDEF_LIMIT = 64 * 1024
log = get_logger(__name__)
_REPLICA_SENTINEL = "TXREPLICAIDPLACEHOLDER"
_REPLICA_REF = '"${' + envc.REPLICA_ID + '}"'
_ROLE_LABEL = "tx-role"
_CPU_LABEL = "tx-cpu"
_GPU_LABEL = "tx-gpu"
_MEM_LABEL = "tx-memmb"
_RETRIES_LABEL = "tx-max-retries"
_JOB_ID_MAX = 63


@attrs.define
class TrialSource:
    """What a sweep's trial job was made of (:class:`GcpBatchJob`, made by
    :class:`tx_scheduler_gcp_batch._sweep.TrialJobs`): its app (one role of one replica)
    and resolved run options; ``make()`` builds its job message as :func:`build_job` does,
    without the stored AppDef. A trial whose message is not made yet also has replica 0's
    ``env`` (its app id not yet the sweep task's) and ``argv`` (entrypoint and args, macros
    substituted, ``${replica_id}`` as :data:`_REPLICA_SENTINEL`), as :func:`build_job` would
    put them in the message; ``key`` is what else the message is made of
    (:func:`tx_scheduler_gcp_batch._sweep.alike_key`)."""

    app: AppDef
    cfg: Dict[str, Any]
    make: Callable[[], Any]
    key: Tuple[Any, ...]
    env: Optional[Dict[str, str]] = None
    argv: Optional[List[str]] = None


@attrs.define(eq=False, repr=False)
class GcpBatchJob:
    """What ``gcp_batch`` submits: ``create_job(parent=f"projects/{project}/locations/{location}",
    job=job, job_id=job_id)``.

    Attributes:
        project, location: where the job goes.
        job_id: the Batch job id (``^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$``).
        job: the ``google.cloud.batch_v1.Job`` message. Built with ``stored_from`` (a sweep's
            trials: a sweep's job keeps no trial's AppDef), its stored AppDef
            (:data:`ENV_APPDEF`) is added on first use of ``job``; ``built`` is the message
            without it. A sweep's trial alike an earlier one has its message made on first
            use of ``job`` or ``built`` (``source.make``): a sweep's job reads only its
            ``source``'s env and argv.
        source: a sweep's trial's :class:`TrialSource`, else None.
    """

    project: str
    location: str
    job_id: str
    _job: Any = attrs.field(alias="job")
    _stored_from: Optional[Tuple[AppDef, Dict[str, Any]]] = attrs.field(
        default=None, kw_only=True, alias="stored_from")
    source: Optional[TrialSource] = attrs.field(default=None, kw_only=True)

    @property
    def job(self) -> Any:
        job = self.built
        if self._stored_from is not None:
            app, cfg = self._stored_from
            self._stored_from = None
            _store_appdef(job, app, cfg)
        return job

    @property
    def built(self) -> Any:
        """The job message as built, without a stored AppDef still deferred (made now where
        it was not yet: :attr:`pending`)."""
        if self._job is None:
            self._job = self.source.make()  # type: ignore[union-attr]
        return self._job

    @property
    def pending(self) -> bool:
        """Whether the job message is still to be made (nothing has used it yet)."""
        return self._job is None

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    @property
    def app_id(self) -> str:
        """The app id: ``{project}:{location}:{job_id}`` (TorchX's format)."""
        return f"{self.project}:{self.location}:{self.job_id}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GcpBatchJob):
            return NotImplemented
        return (self.project, self.location, self.job_id, self.built) == (
            other.project, other.location, other.job_id, other.built)

    __hash__ = None  # type: ignore[assignment] - mutable, as an attrs class with eq

    def __repr__(self) -> str:
        return f"GcpBatchJob(project={self.project!r}, location={self.location!r}, job_id={self.job_id!r}, " \
               f"job={self.built!r})"

    def __str__(self) -> str:
        body = type(self.job).to_json(self.job, indent=2, sort_keys=True, use_integers_for_enums=False)
        return f"# create_job parent={self.parent} job_id={self.job_id}\n{body}\n"


def make_job_id(app_name: str) -> str:
    """A unique Batch job id made from ``app_name`` (lowercased; other characters -> ``-``)."""
    base = re.sub(r"[^a-z0-9-]+", "-", app_name.lower()).strip("-") or "app"
    if not base[0].isalpha():
        base = "app-" + base
    unique = make_unique(base[:40])
    return unique[:_JOB_ID_MAX].rstrip("-")


def label_value(value: str) -> str:
    """``value`` as a valid GCP label value (lowercase, ``[a-z0-9_-]``, at most 63)."""
    return re.sub(r"[^a-z0-9_-]", "-", value.lower())[:63]


def _sh_quote(arg: str) -> str:
    """Always single-quote (so a placeholder can be swapped for a variable reference)."""
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def role_argv(role: Role, app_id: str) -> List[str]:
    """``role``'s entrypoint and args with their macros substituted for app ``app_id``,
    ``${replica_id}`` as :data:`_REPLICA_SENTINEL` (:func:`role_script` quotes them)."""
    sub = macros.Values(img_root="", app_id=app_id, replica_id=_REPLICA_SENTINEL, rank0_env=envc.RANK0_HOST).substitute
    return [a if "$" not in a else sub(a) for a in (role.entrypoint, *role.args)]  # as sub(a), without its call


def replica_env(role: Role, role_idx: int, replica: int, app_id: str, spot_vms: bool) -> Dict[str, str]:
    """The environment of replica ``replica`` of ``role`` (role ``role_idx`` of app
    ``app_id``) in its task's ``task_environments`` entry: the role's env, macros
    substituted, and the replica contract (see the module docstring)."""
    sub = macros.Values(img_root="", app_id=app_id, replica_id=str(replica), rank0_env=envc.RANK0_HOST).substitute
    env = {name: v if "$" not in v else sub(v) for name, v in role.env.items()}  # as sub(v), without its call
    env.update(envc.replica_env(app_id=app_id, role_name=role.name, replica_id=str(replica), role_idx=role_idx,
                                num_replicas=role.num_replicas))
    if spot_vms:  # the preemption notice of a Spot VM (PREEMPT_GRACE_S), unless the role sets its own
        env.setdefault(PREEMPT_GRACE_ENV, str(PREEMPT_GRACE_S))
    return env


def role_script(role: Role, role_idx: int, multi_role: bool, app_id: str) -> str:
    """The ``sh -c`` script of ``role``'s container runnable (see the module docstring)."""
    quoted = " ".join(_sh_quote(a).replace(_REPLICA_SENTINEL, "'" + _REPLICA_REF + "'")
                      for a in role_argv(role, app_id))
    rank0, rank0_tx = envc.RANK0_HOST, envc.torchx_name(envc.RANK0_HOST)
    lines = []
    if multi_role:
        lines.append(f'[ "${{{envc.ROLE_IDX}}}" = "{role_idx}" ] || exit 0')
    lines += [
        f'{rank0}="${{BATCH_MAIN_NODE_HOSTNAME:-}}"',
        f'if [ -z "${rank0}" ] && [ -r "${{BATCH_HOSTS_FILE:-}}" ]; then {rank0}="$(head -n 1 "$BATCH_HOSTS_FILE")"; fi',
        f'{rank0}="${{{rank0}:-localhost}}"',
        f'export {rank0} {rank0_tx}="${rank0}"',
        f"exec {quoted}",
    ]
    return "\n".join(lines)


def parse_role_script(script: str) -> Tuple[str, List[str]]:
    """``(entrypoint, args)`` of a script made by :func:`role_script` (``${replica_id}`` back
    in place of the ``TX_REPLICA_ID`` reference)."""
    at = script.find("\nexec ")  # the last statement; an argument may span lines
    if at < 0:
        return SHELL, ["-c", script]
    argv = shlex.split(script[at + len("\nexec "):])
    argv = [a.replace("${" + envc.REPLICA_ID + "}", macros.replica_id) for a in argv]
    return argv[0], argv[1:]


def machine_type_for(gpus: int, role_names: str) -> str:
    """The A100 machine type with ``gpus`` GPUs.

    Raises:
        ValueError: no such machine type (the message lists the counts there are).
    """
    if gpus not in A100_MACHINE_TYPES:
        counts = ", ".join(str(n) for n in A100_MACHINE_TYPES)
        raise ValueError(
            f"gcp_batch: {role_names} asks for {gpus} GPUs per replica but A100 machine types have "
            f"{counts}: use one of those counts, or set the run option machine_type"
        )
    return A100_MACHINE_TYPES[gpus]


def _stored(app: AppDef, cfg: Mapping[str, CfgVal]) -> Optional[str]:
    """``app``'s stored AppDef (with ``cfg``), or None (a warning says so) where it is too
    large to keep."""
    stored = appdef_to_stored(app, APPDEF_LIMIT, cfg=cfg)
    if stored is None:
        log.warning(f"the AppDef of {app.name!r} exceeds {APPDEF_LIMIT} bytes compressed: not kept in "
                    f"{ENV_APPDEF}; describe will rebuild the roles from the job")
    return stored


def _store_appdef(job: Any, app: AppDef, cfg: Mapping[str, CfgVal]) -> None:
    """Add ``app``'s stored AppDef to the job message's task environment (where it can be kept)."""
    stored = _stored(app, cfg)
    if stored is not None:
        job.task_groups[0].task_spec.environment.variables[ENV_APPDEF] = stored


def build_job(
    app: AppDef, cfg: Mapping[str, CfgVal], project: str, location: str, version: str,
    make_job: Callable[[Dict[str, Any]], Any], defer_appdef: bool = False, job_id: Optional[str] = None,
) -> GcpBatchJob:
    """The Batch job for ``app`` (resolved ``cfg``: the run options of ``gcp_batch``).

    The job is built here as the fields of a ``Job`` (a dict in the API's shape, field
    names as in ``google.cloud.batch_v1``, enum values by name), without the client
    libraries; ``make_job`` turns them into the message the client sends
    (:func:`tx_scheduler_gcp_batch._client.job_message`).

    With ``defer_appdef`` (a sweep's trial), the stored AppDef is made on first use of the
    job (:class:`GcpBatchJob`). ``job_id``: the Batch job id (None: a new one,
    :func:`make_job_id`).

    Raises:
        ValueError: the app cannot run on Batch (mounts, a GPU count no machine type has,
            ``max_retries`` above 10, no roles); the message is one line for users.
    """
    if not app.roles:
        raise ValueError(f"gcp_batch: app {app.name!r} has no roles")
    job_id = job_id or make_job_id(app.name)
    app_id = f"{project}:{location}:{job_id}"  # the ${app_id} macro and TX_APP_ID, as tx handles name it
    multi = len(app.roles) > 1
    spot_vms = cfg.get("provisioning_model") == "SPOT"
    runnables = []
    task_envs = []
    for r, role in enumerate(app.roles):
        if role.mounts:
            raise ValueError(f"gcp_batch: role {role.name!r} has mounts, which gcp_batch does not support yet")
        if role.num_replicas < 1:
            raise ValueError(f"gcp_batch: role {role.name!r} needs num_replicas >= 1")
        script = role_script(role, r, multi, app_id)
        labels = {
            _ROLE_LABEL: label_value(role.name),
            _CPU_LABEL: str(max(role.resource.cpu, 0)),
            _GPU_LABEL: str(max(role.resource.gpu, 0)),
            _MEM_LABEL: str(max(role.resource.memMB, 0)),
            _RETRIES_LABEL: str(role.max_retries),
        }
        runnables.append({
            "container": {"image_uri": role.image, "entrypoint": SHELL, "commands": ["-c", script]},
            "display_name": role.name,
            "labels": labels,
        })
        task_envs += [{"variables": replica_env(role, r, k, app_id, spot_vms)} for k in range(role.num_replicas)]

    res = _largest(app.roles)
    compute: Dict[str, int] = {}
    if res.cpu > 0:
        compute["cpu_milli"] = int(res.cpu * 1000)
    if res.memMB > 0:
        compute["memory_mib"] = int(res.memMB)

    retries = max(role.max_retries for role in app.roles)
    if retries < 0 or retries > MAX_RETRY_COUNT:
        raise ValueError(f"gcp_batch: max_retries must be between 0 and {MAX_RETRY_COUNT} on Batch, got {retries}")
    spot = cfg.get("spot_retries")  # the former name of infra_retries
    spares = int(spot) if spot is not None else infra_retries(cfg)
    lifecycle = []
    if retries == 0 and spares > 0:
        lifecycle.append({"action": "RETRY_TASK", "action_condition": {"exit_codes": list(INFRA_EXIT_CODES)}})
    retries = min(MAX_RETRY_COUNT, retries + spares)

    task_spec = {
        "runnables": runnables, "compute_resource": compute, "max_retry_count": retries, "lifecycle_policies": lifecycle,
    }
    stored = None if defer_appdef else _stored(app, cfg)
    if stored is not None:
        task_spec["environment"] = {"variables": {ENV_APPDEF: stored}}
    group = {
        "task_spec": task_spec,
        "task_environments": task_envs,
        "task_count_per_node": 1,
        "require_hosts_file": True,
        "permissive_ssh": True,
    }
    job = {
        "task_groups": [group],
        "allocation_policy": _allocation_policy(app.roles, res, cfg),
        "labels": {"tx_version": label_value(version), "tx_app_name": label_value(app.name)},
        "logs_policy": {"destination": "CLOUD_LOGGING"},
    }
    return GcpBatchJob(project=project, location=location, job_id=job_id, job=make_job(job),
                       stored_from=(app, dict(cfg)) if defer_appdef else None)


def _largest(roles: List[Role]) -> Resource:
    return Resource(
        cpu=max(max(r.resource.cpu, 0) for r in roles),
        gpu=max(max(r.resource.gpu, 0) for r in roles),
        memMB=max(max(r.resource.memMB, 0) for r in roles),
    )


def _allocation_policy(roles: List[Role], res: Resource, cfg: Mapping[str, CfgVal]) -> Dict[str, Any]:
    machine_type = cfg.get("machine_type") or ""
    if res.gpu > 0 and not machine_type:
        names = ", ".join(repr(r.name) for r in roles if r.resource.gpu == res.gpu)
        machine_type = machine_type_for(int(res.gpu), f"role {names}")
    model = "SPOT" if cfg.get("provisioning_model") == "SPOT" else "STANDARD"
    policy: Dict[str, Any] = {"provisioning_model": model}
    if machine_type:
        policy["machine_type"] = str(machine_type)
    instance = {"policy": policy, "install_gpu_drivers": res.gpu > 0}
    alloc: Dict[str, Any] = {"instances": [instance]}
    if cfg.get("service_account"):
        alloc["service_account"] = {"email": str(cfg["service_account"])}
    if cfg.get("network") or cfg.get("subnetwork"):
        nic = {"network": str(cfg.get("network") or ""), "subnetwork": str(cfg.get("subnetwork") or "")}
        alloc["network"] = {"network_interfaces": [nic]}
    return alloc


@attrs.define
class TaskInfo:
    """Which replica task ``index`` of a job is: from its ``task_environments`` entry."""

    index: int
    role: str
    role_idx: int
    replica_id: int


def task_layout(job: Any) -> List[TaskInfo]:
    """Replica of every task of a job this module built (``[]`` for other jobs)."""
    if not job.task_groups:
        return []
    out = []
    for i, env in enumerate(job.task_groups[0].task_environments):
        v = env.variables
        if envc.ROLE_NAME not in v or envc.REPLICA_ID not in v:
            return []
        out.append(TaskInfo(i, v[envc.ROLE_NAME], int(v.get(envc.ROLE_IDX, "0")), int(v[envc.REPLICA_ID])))
    return out


def roles_of(job: Any) -> List[Role]:
    """The roles of a job this module built, as far as the job keeps them (image,
    entrypoint, args, env of replica 0 without the contract variables, replicas,
    resources and max_retries per role, from the runnables' ``tx-*`` labels)."""
    if not job.task_groups:
        return []
    group = job.task_groups[0]
    spec = group.task_spec
    layout = task_layout(job)
    counts: Dict[str, int] = {}
    for t in layout:
        counts[t.role] = counts.get(t.role, 0) + 1
    contract = set(envc.TORCHX_NAMES) | set(envc.TORCHX_NAMES.values()) | {PREEMPT_GRACE_ENV}
    roles = []
    for runnable in spec.runnables:
        name = runnable.display_name
        if not name or "container" not in runnable:
            continue
        entrypoint, args = parse_role_script(list(runnable.container.commands)[-1])
        first = next((t.index for t in layout if t.role == name and t.replica_id == 0), None)
        env: Dict[str, str] = {}
        if first is not None:
            env = {k: v for k, v in group.task_environments[first].variables.items() if k not in contract}
        labels = runnable.labels

        def num(key: str, default: int) -> int:
            value = labels.get(key, "")
            return int(value) if value.isdigit() else default

        roles.append(
            Role(
                name,
                image=runnable.container.image_uri,
                entrypoint=entrypoint,
                args=args,
                env=env,
                num_replicas=counts.get(name, 1),
                max_retries=num(_RETRIES_LABEL, spec.max_retry_count),
                resource=Resource(
                    cpu=num(_CPU_LABEL, spec.compute_resource.cpu_milli // 1000),
                    gpu=num(_GPU_LABEL, 0),
                    memMB=num(_MEM_LABEL, spec.compute_resource.memory_mib),
                ),
            )
        )
    return roles
