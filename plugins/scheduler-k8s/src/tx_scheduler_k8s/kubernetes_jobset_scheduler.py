"""The ``kubernetes_jobset`` scheduler: every app is one JobSet (``jobset.x-k8s.io/v1alpha2``),
optionally queued by Kueue.

* One replicated job per role (``replicas: 1``), an Indexed Job with ``parallelism`` =
  ``completions`` = the role's replicas: pod ``k`` of it is replica ``k``. Host names are
  ``<jobset>-<role>-0-<k>`` in the JobSet's headless service (``network.enableDNSHostnames``,
  subdomain = the JobSet's name), so ``TX_RANK0_HOST`` is ``<jobset>-<role0>-0-0.<jobset>``.
* Replicas of a role share one pod template, so the replica's index comes from the pod:
  ``TX_REPLICA_ID`` is read from the ``batch.kubernetes.io/job-completion-index``
  annotation (downward API) and the ``${replica_id}`` macro becomes ``$(TX_REPLICA_ID)``,
  which Kubernetes expands in ``command``, ``args`` and env values.
* Retries: APPLICATION (and ROLE) -> ``failurePolicy.maxRestarts`` = the smallest
  ``max_retries`` (the whole JobSet is recreated); REPLICA (and HOT_SPARE) -> the Job's
  ``backoffLimitPerIndex`` = ``max_retries`` with ``maxFailedIndexes: 0`` (only the failed
  replica is re-run; when it runs out, the JobSet fails).
* Infrastructure failures: each Job has the ``podFailurePolicy`` rule ``FailJob`` on the
  pod condition ``DisruptionTarget`` (a pod evicted, preempted or lost with its node), so
  such a pod fails its Job at once with reason ``PodFailurePolicy`` (it spends no
  ``backoffLimit``/``backoffLimitPerIndex``, the user's retries); the JobSet's
  ``failurePolicy.rules`` then restart the whole JobSet for it (``RestartJobSet`` on
  ``PodFailurePolicy``, ``maxRestarts`` = run option ``infra_retries``; 0: ``FailJobSet``)
  and fail it on any other Job failure. Where the roles have APPLICATION (or ROLE)
  retries, ``maxRestarts`` is their ``max_retries`` (a user's failure never gets more) and
  the eviction rule is ``RestartJobSetAndIgnoreMaxRestarts``: evictions then restart the
  JobSet without spending them, but JobSet has no second bound, so ``infra_retries`` > 0
  leaves them unbounded (``status.restarts`` less ``restartsCountTowardsMax`` counts them).
* Kueue: run option ``queue`` sets the ``kueue.x-k8s.io/queue-name`` label and the JobSet
  is created suspended; Kueue unsuspends it on admission. While suspended and not
  admitted, describe says PENDING with Kueue's reason (the Workload's ``QuotaReserved``
  condition).
* Cancel suspends the JobSet (the JobSet controller removes its running pods; finished
  pods and their logs stay) and marks it ``tx.pytorch.org/cancelled``; a Kueue Workload
  is deactivated (``spec.active: false``) so that Kueue does not start it again. The JobSet
  stays (status, describe and logs keep working) until ``kubectl delete jobset``.

API: https://jobset.sigs.k8s.io/docs/reference/jobset.v1alpha2/,
https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/, the CRDs in ``tests/data/schemas``.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.schedulers import add_infra_retries_opt, env as envc, infra_retries
from tx.specs import (AppDef, AppDryRunInfo, AppState, CfgVal, FailureKind, InvalidRunConfigException, RetryPolicy, Role,
                      runopts)

from tx_scheduler_k8s import _names, _pod
from tx_scheduler_k8s.scheduler import DISRUPTION_TARGET, KubernetesBase, KubernetesJob, check_namespace, common_runopts

log = get_logger(__name__)

GROUP, VERSION, PLURAL, KIND = "jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"
API_VERSION = f"{GROUP}/{VERSION}"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = ("kueue.x-k8s.io", "v1beta1", "workloads")
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CANCELLED = "tx.pytorch.org/cancelled"
_RESTART_ALL = (RetryPolicy.APPLICATION, RetryPolicy.ROLE)
#: the Job failure reason of a pod failure policy's FailJob rule
POD_FAILURE_POLICY = "PodFailurePolicy"
#: the JobSet failure policy rules tx writes: infrastructure failures, then the user's
RULE_INFRA, RULE_USER = "txInfrastructure", "txUser"
_MACRO = re.compile(r"\$\{replica_id\}|\$replica_id\b")


def pod_host(jobset: str, role_norm: str, k: int) -> str:
    """Host name of replica ``k``: ``<jobset>-<replicated job>-<job index 0>-<pod index k>``."""
    return f"{jobset}-{role_norm}-0-{k}"


def jobset_runopts() -> runopts:
    opts = runopts()
    opts.add("queue", type_=str, help="Kueue LocalQueue to submit to (label kueue.x-k8s.io/queue-name; "
             "the JobSet starts suspended until Kueue admits it); none: the JobSet starts at once")
    common_runopts(opts)
    add_infra_retries_opt(opts)
    opts.add("priority_class", type_=str, help="PriorityClass of the pods")
    return opts


def _per_replica(role: Role) -> Role:
    """``role`` with ``${replica_id}`` as ``$(TX_REPLICA_ID)`` (expanded by Kubernetes)."""
    import attrs

    sub = lambda s: _MACRO.sub(_pod.k8s_ref(envc.REPLICA_ID), s)  # noqa: E731
    return attrs.evolve(role, args=[sub(a) for a in role.args], env={k: sub(v) for k, v in role.env.items()})


def app_to_jobset(app: AppDef, cfg: Mapping[str, CfgVal], app_id: Optional[str] = None) -> KubernetesJob:
    """The JobSet of ``app`` (see the module docstring).

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
        InvalidRunConfigException: a bad namespace, queue or object name in ``cfg``.
    """
    ns = check_namespace(cfg)
    queue = cfg.get("queue")
    if queue and not _names.is_label(str(queue)):
        raise InvalidRunConfigException(f"run option 'queue': {queue!r} is not a Kueue LocalQueue name", "queue", cfg)
    suffix = max(len(str(r.num_replicas - 1)) for r in app.roles) + 3  # "-0-<k>"
    min_js = _names.ID_CHARS + 2
    norms = _names.role_names([r.name for r in app.roles], _names.MAX_LABEL - min_js - 1 - suffix)
    if app_id is None:
        longest = max(len(n) for n in norms.values())
        budget = _names.MAX_LABEL - 1 - longest - suffix
        if len(_names.normalize(app.name)) > budget - _names.ID_CHARS - 1:
            log.warning("k8s_app_name_cut", app_name=app.name)
        app_id = _names.app_id(app.name, budget)
    rank0 = f"{pod_host(app_id, norms[app.roles[0].name], 0)}.{app_id}"
    rjobs = []
    for idx, role in enumerate(app.roles):
        norm = norms[role.name]
        template = _pod.pod_template(
            _per_replica(role), idx, 0, app_name=app.name, app_id=app_id, container_name=norm,
            rank0_host=rank0, cfg=cfg,
        )
        # every replica shares this template: the replica id comes from the pod's index
        labels = template["metadata"]["labels"]
        del labels[_pod.LABEL_REPLICA_ID]
        template["metadata"]["annotations"][_pod.ANNOTATION_ROLE] = _pod.role_annotation(role)
        c = template["spec"]["containers"][0]
        index_ref = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
        env = [e for e in c["env"] if e["name"] not in (envc.REPLICA_ID, envc.TORCHX_NAMES[envc.REPLICA_ID])]
        c["env"] = [{"name": envc.REPLICA_ID, "valueFrom": index_ref},
                    {"name": envc.TORCHX_NAMES[envc.REPLICA_ID], "valueFrom": index_ref}, *env]
        job_spec: Dict[str, Any] = {
            "parallelism": role.num_replicas,
            "completions": role.num_replicas,
            "completionMode": "Indexed",
            "template": template,
        }
        if role.max_retries > 0 and role.retry_policy not in _RESTART_ALL:
            job_spec["backoffLimitPerIndex"] = role.max_retries
            job_spec["maxFailedIndexes"] = 0
        else:
            job_spec["backoffLimit"] = 0
        job_spec["podFailurePolicy"] = {"rules": [
            {"action": "FailJob", "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}]}]}
        rjobs.append({"name": norm, "replicas": 1, "template": {
            "metadata": {"labels": {_pod.LABEL_ROLE_INDEX: str(idx), _pod.LABEL_INSTANCE: app_id}},
            "spec": job_spec}})
    restarts = [r.max_retries for r in app.roles if r.max_retries > 0 and r.retry_policy in _RESTART_ALL]
    infra = infra_retries(cfg)
    if restarts:  # the user's restarts count towards maxRestarts, the infrastructure's do not
        rules = [{"name": RULE_INFRA, "action": "RestartJobSetAndIgnoreMaxRestarts" if infra > 0 else "FailJobSet",
                  "onJobFailureReasons": [POD_FAILURE_POLICY]}]
    else:  # only the infrastructure's restart the JobSet, within maxRestarts = infra_retries
        rules = [{"name": RULE_INFRA, "action": "RestartJobSet" if infra > 0 else "FailJobSet",
                  "onJobFailureReasons": [POD_FAILURE_POLICY]}, {"name": RULE_USER, "action": "FailJobSet"}]
    meta: Dict[str, Any] = {
        "name": app_id,
        "namespace": ns,
        "labels": _pod.app_labels(app.name, app_id),
        "annotations": _pod.app_annotations(app, cfg),
    }
    spec: Dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "subdomain": app_id, "publishNotReadyAddresses": True},
        "failurePolicy": {"maxRestarts": min(restarts) if restarts else infra, "rules": rules},
        "successPolicy": {"operator": "All"},
        "replicatedJobs": rjobs,
    }
    if queue:
        meta["labels"][QUEUE_LABEL] = str(queue)
        spec["suspend"] = True
    resource = {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}
    return KubernetesJob(resource=resource, namespace=ns)


def _condition(obj: Mapping[str, Any], type_: str) -> Optional[Dict[str, Any]]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


class KubernetesJobSetScheduler(KubernetesBase):
    """Runs apps as JobSets (queued by Kueue with run option ``queue``) on the cluster of
    ``$KUBECONFIG`` (see the module docstring)."""

    GVK = (GROUP, VERSION, PLURAL, KIND)
    #: the Job controller labels each pod of an Indexed Job with its index
    REPLICA_LABEL = COMPLETION_INDEX

    def __init__(self, session_name: str, client: Any = None, context: Optional[str] = None) -> None:
        super().__init__("kubernetes_jobset", session_name, client, context)

    def _run_opts(self) -> runopts:
        return jobset_runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[KubernetesJob]:
        return self._dryrun_job(app, cfg, app_to_jobset)

    def _sweep_unsupported(self, cfg: Mapping[str, CfgVal]) -> Optional[str]:
        """With run option ``queue``, Kueue admits each trial as a JobSet of its own."""
        if cfg.get("queue"):
            return "run option queue: Kueue admits each trial as a JobSet of its own"
        return None

    def _app_state(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> Tuple[AppState, str, int]:
        st = obj.get("status") or {}
        restarts = int(st.get("restarts") or 0)
        for type_, state in (("Completed", AppState.SUCCEEDED), ("Failed", AppState.FAILED)):
            c = _condition(obj, type_)
            if c and c.get("status") == "True":
                return state, f"{c.get('reason', type_)}: {c.get('message', '')}".rstrip(": "), restarts
        if (obj["metadata"].get("annotations") or {}).get(CANCELLED):
            return AppState.CANCELLED, "cancelled with tx", restarts
        if (obj.get("spec") or {}).get("suspend"):
            queue = (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL)
            return AppState.PENDING, f"suspended, waiting for Kueue to admit it to queue {queue!r}" if queue else "suspended", restarts
        active = sum(int(r.get("active") or 0) for r in st.get("replicatedJobsStatus") or [])
        running = any((p.get("status") or {}).get("phase") == "Running" for p in pods)
        return (AppState.RUNNING if running or active else AppState.PENDING), "", restarts

    def describe(self, app_id: str) -> Any:
        """As :meth:`KubernetesBase.describe`; a suspended, queued JobSet's ``msg`` also
        holds Kueue's reason (its Workload's ``QuotaReserved`` condition)."""
        desc = super().describe(app_id)
        if desc is not None and desc.state == AppState.PENDING and "Kueue" in desc.msg:
            ns, name = _names.split_app_id(app_id, "default")
            obj = self._get(ns, name)
            uid = (obj or {}).get("metadata", {}).get("uid", "")
            for wl in self.kube.list_objects(*KUEUE, ns, f"{KUEUE_JOB_UID}={uid}") if uid else []:
                c = _condition(wl, "QuotaReserved")
                if c and c.get("status") == "False" and c.get("message"):
                    desc.msg = f"{desc.msg}: {c['message']}"
                    break
        return desc

    def _restart_kinds(self, obj: Dict[str, Any]) -> List[FailureKind]:
        """INFRA where the infrastructure rule restarts the JobSet, USER where no rule fails
        it on the user's failures."""
        rules = {r.get("name"): r.get("action") for r in ((obj.get("spec") or {}).get("failurePolicy") or {}).get("rules") or []}
        kinds = [FailureKind.INFRA] if rules.get(RULE_INFRA, "").startswith("RestartJobSet") else []
        return kinds + ([] if rules.get(RULE_USER) == "FailJobSet" else [FailureKind.USER])

    def _infra_end(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> str:
        """A Job of the failed JobSet failed on its pod failure policy (a pod's
        ``DisruptionTarget``): ``DisruptionTarget`` (the pod, and with it the condition's
        reason, may be gone)."""
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        for job in self.kube.list_objects("batch", "v1", "jobs", ns, f"jobset.sigs.k8s.io/jobset-name={name}"):
            for c in (job.get("status") or {}).get("conditions") or []:
                if c.get("type") == "Failed" and c.get("status") == "True" and c.get("reason") == POD_FAILURE_POLICY:
                    return DISRUPTION_TARGET
        return ""

    def _roles(self, obj: Dict[str, Any]) -> List[Role]:
        out = []
        for rj in (obj.get("spec") or {}).get("replicatedJobs") or []:
            job = rj["template"]["spec"]
            out.append(_pod.role_from_template(job["template"], int(job.get("completions") or 1)))
        return out

    def _cancel_existing(self, app_id: str) -> None:
        """Suspend the JobSet, mark it cancelled, deactivate its Kueue Workload."""
        ns, name = _names.split_app_id(app_id, "default")
        obj = self.kube.patch_object(GROUP, VERSION, PLURAL, ns, name, {
            "metadata": {"annotations": {CANCELLED: "true"}}, "spec": {"suspend": True}})
        uid = obj["metadata"].get("uid", "")
        if (obj["metadata"].get("labels") or {}).get(QUEUE_LABEL) and uid:
            for wl in self.kube.list_objects(*KUEUE, ns, f"{KUEUE_JOB_UID}={uid}"):
                self.kube.patch_object(*KUEUE, ns, wl["metadata"]["name"], {"spec": {"active": False}})
        log.info("k8s_cancelled", scheduler=self.backend, app_id=app_id)


#: the factory registered as ``kubernetes_jobset`` (:meth:`KubernetesBase.create`)
create_scheduler = KubernetesJobSetScheduler.create
