"""The ``kubernetes`` scheduler: every app is one Volcano Job (``batch.volcano.sh/v1alpha1``).

* One task per replica of every role (``<role>-<k>``, ``replicas: 1``), so each replica has
  its own stable identity: pod ``<job>-<role>-<k>-0``, host name = pod name, subdomain = job
  (Volcano's ``svc`` plugin makes the headless service), so ``TX_RANK0_HOST`` is
  ``<job>-<role0>-0-0.<job>``.
* Gang scheduling: ``minAvailable`` is the sum of the roles' ``min_replicas`` (elastic) or
  ``num_replicas``; the first ``min_replicas`` tasks of an elastic role have
  ``minAvailable: 1``, the rest 0.
* Retries of the user's failures (``PodFailed``): APPLICATION (and ROLE) -> ``RestartJob``
  with the job's ``maxRetry`` = the smallest ``max_retries``; REPLICA (and HOT_SPARE) ->
  ``RestartTask`` with the task's ``maxRetry``; no retries -> ``TerminateJob`` (the app
  fails as soon as a replica fails).
* Infrastructure failures: Volcano raises ``PodEvicted`` for a pod evicted, preempted or
  lost with its node (the pod's ``DisruptionTarget`` condition); its action is
  ``RestartJob`` (the whole gang starts again: a distributed job cannot go on without a
  rank) within the job's ``maxRetry`` = run option ``infra_retries`` (0: ``TerminateJob``).
  Volcano bounds every ``RestartJob`` by that one ``maxRetry``, so where the roles have
  APPLICATION (or ROLE) retries it stays their ``max_retries`` and an eviction spends one
  of them, as before: a user's failure never gets more restarts than ``max_retries``.
  describe's attempts name the eviction that ended the app (Volcano's ``PodEvicted``
  state, or the pod's condition while it is there).
* Cancel sends Volcano an ``AbortJob`` command (``bus.volcano.sh/v1alpha1`` Command, as
  ``vcctl job suspend`` does): the pods go, the Job stays (phase ``Aborted``: CANCELLED), so
  status, describe and logs of what ran keep working. ``kubectl delete vcjob`` removes it.

API: https://volcano.sh/en/docs/vcjob/, https://github.com/volcano-sh/apis (batch/v1alpha1,
bus/v1alpha1), the CRD in ``tests/data/schemas/volcano``.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import add_infra_retries_opt, infra_retries
from tx.specs import (AppDef, AppDryRunInfo, AppState, CfgVal, FailureKind, InvalidRunConfigException, RetryPolicy, Role,
                      runopts)

from tx_scheduler_k8s import _names, _pod
from tx_scheduler_k8s.scheduler import DISRUPTION_TARGET, KubernetesBase, KubernetesJob, check_namespace, common_runopts

log = get_logger(__name__)

GROUP, VERSION, PLURAL, KIND = "batch.volcano.sh", "v1alpha1", "jobs", "Job"
API_VERSION = f"{GROUP}/{VERSION}"
LABEL_JOB = "volcano.sh/job-name"
LABEL_TASK = "volcano.sh/task-spec"
#: the queue of pods Volcano schedules outside a Volcano Job (a sweep's Indexed Job)
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

#: Volcano job phase -> AppState (https://github.com/volcano-sh/apis batch/v1alpha1 JobPhase)
JOB_STATES = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Aborting": AppState.RUNNING,
    "Terminating": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Aborted": AppState.CANCELLED,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}
_RESTART_JOB = (RetryPolicy.APPLICATION, RetryPolicy.ROLE)


def task_name(role_norm: str, k: int) -> str:
    return f"{role_norm}-{k}"


def pod_name(job: str, role_norm: str, k: int) -> str:
    """The pod Volcano creates for replica ``k``: ``<job>-<task>-<index in task>``."""
    return f"{job}-{task_name(role_norm, k)}-0"


def volcano_runopts() -> runopts:
    opts = runopts()
    opts.add("queue", type_=str, required=True, help="Volcano queue to schedule the job in")
    common_runopts(opts)
    add_infra_retries_opt(opts)
    opts.add("priority_class", type_=str, help="PriorityClass of the job and its pods")
    opts.add("scheduler_name", type_=str, default="volcano", help="scheduler of the pods (schedulerName)")
    return opts


def _policies(role: Role, infra: int, job_restarts: bool) -> List[Dict[str, str]]:
    if role.max_retries <= 0:
        action = "TerminateJob"
    elif role.retry_policy in _RESTART_JOB:
        action = "RestartJob"
    else:
        action = "RestartTask"
    return [{"event": "PodFailed", "action": action},
            {"event": "PodEvicted", "action": "RestartJob" if infra > 0 or job_restarts else "TerminateJob"}]


def app_to_job(app: AppDef, cfg: Mapping[str, CfgVal], app_id: Optional[str] = None,
               defer_appdef: bool = False) -> KubernetesJob:
    """The Volcano Job of ``app`` (see the module docstring).

    Args:
        app_id: the job name (None: a new unique one from the app name).
        defer_appdef: the AppDef's annotation made on first use of ``resource`` (a sweep's
            trials).

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
        InvalidRunConfigException: a bad namespace, queue or object name in ``cfg``.
    """
    ns = check_namespace(cfg)
    infra = infra_retries(cfg)
    queue = str(cfg.get("queue") or "")
    if not _names.is_subdomain(queue):
        raise InvalidRunConfigException(f"run option 'queue': {queue!r} is not a Volcano queue name", "queue", cfg)
    # pod name <job>-<role>-<k>-0 must be a DNS label: leave room for the longest role
    suffix = max(len(str(r.num_replicas - 1)) for r in app.roles) + 3  # "-<k>-0"
    min_job = _names.ID_CHARS + 2
    norms = _names.role_names([r.name for r in app.roles], _names.MAX_LABEL - min_job - 1 - suffix)
    if app_id is None:
        longest = max(len(n) for n in norms.values())
        budget = _names.MAX_LABEL - 1 - longest - suffix
        app_id = _names.app_id(app.name, budget)
        if len(_names.normalize(app.name)) > budget - _names.ID_CHARS - 1:
            log.warning("k8s_app_name_cut", app_name=app.name, app_id=app_id)
    first = app.roles[0]
    rank0 = f"{pod_name(app_id, norms[first.name], 0)}.{app_id}"
    job_retries = [r.max_retries for r in app.roles if r.max_retries > 0 and r.retry_policy in _RESTART_JOB]
    tasks = []
    min_available = 0
    for idx, role in enumerate(app.roles):
        norm = norms[role.name]
        min_reps = role.min_replicas if role.min_replicas is not None else role.num_replicas
        min_available += min(min_reps, role.num_replicas)
        policies = _policies(role, infra, bool(job_retries))
        for k in range(role.num_replicas):
            template = _pod.pod_template(
                role, idx, k, app_name=app.name, app_id=app_id, container_name=norm,
                rank0_host=rank0, cfg=cfg,
            )
            template["spec"]["schedulerName"] = str(cfg.get("scheduler_name") or "volcano")
            task: Dict[str, Any] = {
                "name": task_name(norm, k),
                "replicas": 1,
                "template": template,
                "policies": policies,
            }
            if role.min_replicas is not None:
                task["minAvailable"] = 1 if k < role.min_replicas else 0
            if role.max_retries > 0:
                task["maxRetry"] = role.max_retries
            tasks.append(task)
    spec: Dict[str, Any] = {
        "schedulerName": str(cfg.get("scheduler_name") or "volcano"),
        "queue": queue,
        "minAvailable": min_available,
        "maxRetry": min(job_retries) if job_retries else infra,
        "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
        "tasks": tasks,
    }
    if cfg.get("priority_class"):
        spec["priorityClassName"] = str(cfg["priority_class"])
    resource = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": app_id,
            "namespace": ns,
            "labels": _pod.app_labels(app.name, app_id),
            "annotations": {_pod.ANNOTATION_APP: app.name} if defer_appdef else _pod.app_annotations(app, cfg),
        },
        "spec": spec,
    }
    return KubernetesJob(resource=resource, namespace=ns, later=_annotated(app, dict(cfg)) if defer_appdef else None)


def _annotated(app: AppDef, cfg: Mapping[str, CfgVal]) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """What puts the AppDef's annotation (``app`` with its run options ``cfg``) on its job."""
    def later(resource: Dict[str, Any]) -> Dict[str, Any]:
        resource["metadata"]["annotations"].update(_pod.app_annotations(app, cfg))
        return resource
    return later


def app_to_resource(
    app: AppDef,
    queue: str,
    service_account: Optional[str] = None,
    priority_class: Optional[str] = None,
) -> Dict[str, Any]:
    """TorchX's ``app_to_resource``: the Volcano Job of ``app`` as a dict (namespace
    ``default``); see :func:`app_to_job`."""
    cfg = {"queue": queue, "service_account": service_account, "priority_class": priority_class}
    return app_to_job(app, cfg).resource


class KubernetesScheduler(KubernetesBase):
    """Runs apps as Volcano Jobs on the cluster of ``$KUBECONFIG`` (see the module
    docstring and :class:`tx_scheduler_k8s.scheduler.KubernetesBase` for the arguments)."""

    GVK = (GROUP, VERSION, PLURAL, KIND)

    def __init__(self, session_name: str, client: Any = None, context: Optional[str] = None) -> None:
        super().__init__("kubernetes", session_name, client, context)

    def _run_opts(self) -> runopts:
        return volcano_runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[KubernetesJob]:
        return self._dryrun_job(app, cfg, lambda a, c: app_to_job(a, c, defer_appdef=self._many))

    def _app_state(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> Tuple[AppState, str, int]:
        st = obj.get("status") or {}
        phase = (st.get("state") or {}).get("phase") or ""
        state = JOB_STATES.get(phase, AppState.PENDING if not phase else AppState.UNKNOWN)
        reason = (st.get("state") or {}).get("reason") or ""
        message = (st.get("state") or {}).get("message") or ""
        msg = phase + (f" ({reason})" if reason else "") + (f": {message}" if message else "")
        return state, msg, int(st.get("retryCount") or 0)

    def _restart_kinds(self, obj: Dict[str, Any]) -> List[FailureKind]:
        """INFRA where ``PodEvicted`` restarts the job, USER where ``PodFailed`` does."""
        kinds = []
        actions = {(p.get("event"), p.get("action")) for t in (obj.get("spec") or {}).get("tasks") or []
                   for p in t.get("policies") or []}
        if ("PodEvicted", "RestartJob") in actions:
            kinds.append(FailureKind.INFRA)
        if {("PodFailed", "RestartJob"), ("PodFailed", "RestartTask")} & actions:
            kinds.append(FailureKind.USER)
        return kinds

    def _infra_end(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> str:
        """The job ended on Volcano's ``PodEvicted``: ``DisruptionTarget <reason>`` where its
        message names the condition's reason, else ``PodEvicted``."""
        state = (obj.get("status") or {}).get("state") or {}
        if state.get("reason") != "PodEvicted":
            return ""
        m = re.search(r"DisruptionTarget: (\w+)", str(state.get("message") or ""))
        return f"{DISRUPTION_TARGET} {m.group(1)}" if m else "PodEvicted"

    def _roles(self, obj: Dict[str, Any]) -> List[Role]:
        roles: Dict[int, Tuple[Dict[str, Any], int]] = {}
        for task in (obj.get("spec") or {}).get("tasks") or []:
            labels = ((task.get("template") or {}).get("metadata") or {}).get("labels") or {}
            try:
                idx = int(labels[_pod.LABEL_ROLE_INDEX])
                k = int(labels[_pod.LABEL_REPLICA_ID])
            except (KeyError, ValueError):
                continue
            tmpl, count = roles.get(idx, (task["template"], 0))
            roles[idx] = (task["template"] if k == 0 else tmpl, count + 1)
        return [_pod.role_from_template(t, n) for _, (t, n) in sorted(roles.items())]

    def _sweep_template(self, cfg: Mapping[str, CfgVal]) -> Any:
        """A sweep's Indexed Job goes through Volcano too: its pods name Volcano as their
        scheduler (``schedulerName``) and the queue by annotation
        ``scheduling.volcano.sh/queue-name`` (Volcano's podgroup controller gives the Job
        one PodGroup in that queue)."""
        def extra(template: Dict[str, Any]) -> None:
            template["spec"]["schedulerName"] = str(cfg.get("scheduler_name") or "volcano")
            template["metadata"]["annotations"][QUEUE_ANNOTATION] = str(cfg.get("queue") or "")
        return extra

    def _cancel_existing(self, app_id: str) -> None:
        """Abort the job: a ``bus.volcano.sh/v1alpha1`` Command ``AbortJob`` owned by it."""
        from tx_scheduler_k8s._names import split_app_id

        ns, name = split_app_id(app_id, "default")
        job = self._get(ns, name)
        if job is None:
            return
        target = {"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": job["metadata"].get("uid", "")}
        command = {
            "apiVersion": "bus.volcano.sh/v1alpha1",
            "kind": "Command",
            "metadata": {
                "generateName": f"{name[:50]}-abort-",
                "namespace": ns,
                "ownerReferences": [{**target, "controller": True, "blockOwnerDeletion": True}],
                "labels": {_pod.LABEL_INSTANCE: name, _pod.LABEL_MANAGED_BY: _pod.MANAGED_BY},
            },
            "action": "AbortJob",
            "target": target,
            "reason": "tx cancel",
            "message": "cancelled with tx",
        }
        self.kube.create_object("bus.volcano.sh", "v1alpha1", "commands", ns, command)
        log.info("k8s_cancelled", scheduler=self.backend, app_id=app_id)


#: the factory registered as ``kubernetes`` (:meth:`KubernetesBase.create`)
create_scheduler = KubernetesScheduler.create


__all__ = ["KubernetesJob", "KubernetesScheduler", "app_to_job", "app_to_resource", "create_scheduler", "pod_name"]
