"""The ``kubernetes_mcad`` scheduler: every app is one AppWrapper of the Multi-Cluster App
Dispatcher (MCAD), in either API group: ``workload.codeflare.dev/v1beta1`` (default) or
``mcad.ibm.com/v1beta1`` (TorchX's, run option ``api_group``).

* Generic items: a Pod per replica of every role (``<app_id>-<role>-<k>``, host name = pod
  name, subdomain = app id) with its ``custompodresources``, and one headless Service named
  after the app (selector ``app.kubernetes.io/instance``) for rendezvous:
  ``TX_RANK0_HOST`` is ``<app_id>-<role0>-0.<app_id>``. With ``coscheduler_name``, a
  ``scheduling.x-k8s.io/v1alpha1`` PodGroup ``<app_id>-pg<role_idx>`` per role
  (``minMember`` = replicas) and pods scheduled by that scheduler.
* App ids are cut so that every object name stays within 63 characters (a warning when
  the app name itself must be cut).
* Retries are MCAD's requeuing of the whole app: ``schedulingSpec.minAvailable`` = all
  pods, ``requeuing`` exponential from 300 s, ``maxNumRequeuings`` = the smallest
  ``max_retries``.
* Infrastructure failures: MCAD requeues the whole app for any failed or lost pod,
  whatever ended it, within the one ``maxNumRequeuings``; a budget for evictions apart
  from ``max_retries`` would requeue a user's failures as well, so this scheduler has no
  run option ``infra_retries``: an evicted pod spends a requeue like any failure. An app
  that fails on one is an infrastructure failure (describe's last attempt; failover moves
  it): a pod with the ``DisruptionTarget`` condition, or, the evicted pod being deleted,
  a failed AppWrapper that keeps no failed pod (a user's failed pod stays).
* Status: the AppWrapper's ``status.state`` (Pending, Running, Completed, Failed,
  Deleted) and its pods (MCAD does not mark an app whose pods all succeeded as
  Completed: tx reads the pods). A pending app's ``msg`` is MCAD's last condition
  (``Insufficient resources to dispatch AppWrapper ...``).
* Cancel deletes the AppWrapper and, with it, its pods (foreground propagation), as
  TorchX does: MCAD has no way to stop an app and keep it, so afterwards describe knows
  nothing of it.

API: https://github.com/project-codeflare/multi-cluster-app-dispatcher (AppWrapper
v1beta1), the CRDs in ``tests/data/schemas/mcad``.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tx import get_logger
from tx.specs import AppDef, AppDryRunInfo, AppState, CfgVal, InvalidRunConfigException, Role, runopts

from tx_scheduler_k8s import _names, _pod
from tx_scheduler_k8s.scheduler import KubernetesBase, KubernetesJob, check_namespace, common_runopts

log = get_logger(__name__)

GROUPS = ("workload.codeflare.dev", "mcad.ibm.com")
VERSION, PLURAL, KIND = "v1beta1", "appwrappers", "AppWrapper"
REQUEUE_SECONDS = 300
DEFAULT_PORT = 29500
#: AppWrapper state -> AppState (before looking at the pods)
STATES = {"Pending": AppState.PENDING, "": AppState.PENDING, "Running": AppState.RUNNING,
          "Completed": AppState.SUCCEEDED, "Failed": AppState.FAILED, "Deleted": AppState.CANCELLED}


def mcad_runopts() -> runopts:
    opts = runopts()
    common_runopts(opts)
    opts.add("api_group", type_=str, default=GROUPS[0],
             help=f"AppWrapper API group: {GROUPS[0]} (current MCAD) or {GROUPS[1]} (MCAD before 2023, TorchX's)")
    opts.add("priority", type_=int, help="AppWrapper priority (spec.priority)")
    opts.add("priority_class_name", type_=str, help="PriorityClass of the pods")
    opts.add("coscheduler_name", type_=str, help="secondary scheduler of the pods: one PodGroup per role")
    opts.add("network", type_=str, help="Multus network of the pods (annotation k8s.v1.cni.cncf.io/networks)")
    return opts


def pod_name(app_id: str, role_norm: str, k: int) -> str:
    return f"{app_id}-{role_norm}-{k}"


def app_to_appwrapper(app: AppDef, cfg: Mapping[str, CfgVal], app_id: Optional[str] = None) -> KubernetesJob:
    """The AppWrapper of ``app`` (see the module docstring).

    Raises:
        ValueError: a role name that cannot be made a Kubernetes name, or no entrypoint.
        InvalidRunConfigException: a bad namespace, API group or object name in ``cfg``.
    """
    ns = check_namespace(cfg)
    group = str(cfg.get("api_group") or GROUPS[0])
    if group not in GROUPS:
        raise InvalidRunConfigException(f"run option 'api_group': {group!r} is not one of {', '.join(GROUPS)}",
                                        "api_group", cfg)
    suffix = max(len(str(r.num_replicas - 1)) for r in app.roles) + 1  # "-<k>"
    pg_suffix = len(f"-pg{len(app.roles) - 1}")
    min_id = _names.ID_CHARS + 2
    norms = _names.role_names([r.name for r in app.roles], _names.MAX_LABEL - min_id - 1 - suffix)
    if app_id is None:
        longest = max(len(n) for n in norms.values())
        budget = min(_names.MAX_LABEL - 1 - longest - suffix, _names.MAX_LABEL - pg_suffix)
        if len(_names.normalize(app.name)) > budget - _names.ID_CHARS - 1:
            log.warning("k8s_app_name_cut", app_name=app.name)
        app_id = _names.app_id(app.name, budget)
    aw_label = f"appwrapper.{group}"
    rank0 = f"{pod_name(app_id, norms[app.roles[0].name], 0)}.{app_id}"
    pod_cfg = {**cfg, "priority_class": cfg.get("priority_class_name")}
    items: List[Dict[str, Any]] = []
    port = DEFAULT_PORT
    for role in app.roles:
        for p in role.port_map.values():
            if 0 < int(p) < 65536:
                port = int(p)
                break
        else:
            continue
        break
    total = 0
    for idx, role in enumerate(app.roles):
        norm = norms[role.name]
        pg = f"{app_id}-pg{idx}"
        if cfg.get("coscheduler_name"):
            items.append({"replicas": 1, "generictemplate": {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": pg, "namespace": ns, "labels": {**_pod.app_labels(app.name, app_id), aw_label: app_id}},
                "spec": {"minMember": role.num_replicas}}})
        for k in range(role.num_replicas):
            name = pod_name(app_id, norm, k)
            extra = {aw_label: app_id}
            if cfg.get("coscheduler_name"):
                extra["scheduling.x-k8s.io/pod-group"] = pg
            tmpl = _pod.pod_template(role, idx, k, app_name=app.name, app_id=app_id, container_name=norm,
                                     rank0_host=rank0, cfg=pod_cfg, pod_labels=extra)
            spec = tmpl["spec"]
            spec["hostname"] = name
            spec["subdomain"] = app_id
            if cfg.get("coscheduler_name"):
                spec["schedulerName"] = str(cfg["coscheduler_name"])
            if cfg.get("network"):
                tmpl["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] = str(cfg["network"])
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": ns, **tmpl["metadata"]}, "spec": spec}
            res = spec["containers"][0].get("resources") or {}
            item: Dict[str, Any] = {"replicas": 1, "generictemplate": pod}
            if res:
                item["custompodresources"] = [{"replicas": 1, "requests": dict(res.get("requests") or {}),
                                               "limits": dict(res.get("limits") or {})}]
            items.append(item)
            total += 1
    items.append({"replicas": 1, "generictemplate": {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": app_id, "namespace": ns, "labels": {**_pod.app_labels(app.name, app_id), aw_label: app_id}},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {_pod.LABEL_INSTANCE: app_id}, "ports": [{"name": "rdzv", "port": port, "targetPort": port}]}}})
    scheduling: Dict[str, Any] = {"minAvailable": total}
    retries = [r.max_retries for r in app.roles]
    if min(retries) > 0:
        scheduling["requeuing"] = {"timeInSeconds": REQUEUE_SECONDS, "maxTimeInSeconds": 0,
                                   "growthType": "exponential", "maxNumRequeuings": min(retries)}
    spec: Dict[str, Any] = {"schedulingSpec": scheduling, "resources": {"GenericItems": items}}
    if cfg.get("priority") is not None:
        spec["priority"] = int(cfg["priority"])  # type: ignore[arg-type]
    resource = {
        "apiVersion": f"{group}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": app_id, "namespace": ns, "labels": _pod.app_labels(app.name, app_id),
                     "annotations": _pod.app_annotations(app, cfg)},
        "spec": spec,
    }
    return KubernetesJob(resource=resource, namespace=ns)


class KubernetesMCADScheduler(KubernetesBase):
    """Runs apps as MCAD AppWrappers on the cluster of ``$KUBECONFIG`` (see the module
    docstring). Apps of both API groups are found by describe, list and logs."""

    #: a sweep's trials are AppWrappers, one each (MCAD queues AppWrappers, not Jobs)
    SWEEP_ARRAYS = False

    GVK = (GROUPS[0], VERSION, PLURAL, KIND)

    def __init__(self, session_name: str, client: Any = None, context: Optional[str] = None) -> None:
        super().__init__("kubernetes_mcad", session_name, client, context)

    def _run_opts(self) -> runopts:
        return mcad_runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[KubernetesJob]:
        return AppDryRunInfo(app_to_appwrapper(app, cfg), str)

    def _create(self, req: KubernetesJob) -> Dict[str, Any]:
        group = req.resource["apiVersion"].split("/")[0]
        return self.kube.create_object(group, VERSION, PLURAL, req.namespace, req.resource)

    def _get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        for group in GROUPS:
            try:
                obj = self.kube.get_object(group, VERSION, PLURAL, namespace, name)
            except Exception as e:  # noqa: BLE001 - an API group this cluster does not serve
                if getattr(e, "status", 0) in (404, 403) or "could not find" in str(e):
                    continue
                raise
            if obj is not None:
                return obj
        return None

    def list(self) -> List[Any]:
        out: List[Any] = []
        for group in GROUPS:
            self.GVK = (group, VERSION, PLURAL, KIND)
            try:
                out.extend(super().list())
            except Exception as e:  # noqa: BLE001 - a group the cluster does not serve
                if getattr(e, "status", 0) != 404:
                    raise
            finally:
                self.GVK = (GROUPS[0], VERSION, PLURAL, KIND)
        return out

    def _app_state(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> Tuple[AppState, str, int]:
        st = obj.get("status") or {}
        raw = str(st.get("state") or "")
        state = STATES.get(raw, AppState.UNKNOWN)
        requeues = int(st.get("numberOfRequeueings") or 0)
        msg = raw
        conds = st.get("conditions") or []
        if state == AppState.PENDING and conds and conds[-1].get("message"):
            msg = f"{raw or 'Pending'}: {conds[-1].get('reason', '')}: {conds[-1]['message']}"
        if state == AppState.RUNNING and pods:
            phases = [(p.get("status") or {}).get("phase") for p in pods]
            spec_req = ((obj.get("spec") or {}).get("schedulingSpec") or {}).get("requeuing") or {}
            if all(ph == "Succeeded" for ph in phases) and len(pods) >= int(
                    ((obj.get("spec") or {}).get("schedulingSpec") or {}).get("minAvailable") or 0):
                state = AppState.SUCCEEDED
            elif "Failed" in phases and requeues >= int(spec_req.get("maxNumRequeuings") or 0):
                state = AppState.FAILED
        return state, msg, requeues

    def _infra_end(self, obj: Dict[str, Any], pods: List[Dict[str, Any]]) -> str:
        """A failed AppWrapper whose failed pod is gone (an evicted pod is deleted; a pod
        that failed on its own stays): why, naming the pod MCAD's condition names."""
        if any((p.get("status") or {}).get("phase") == "Failed" for p in pods):
            return ""
        conds = (obj.get("status") or {}).get("conditions") or []
        m = re.search(r"pod (\S+) failed", str(conds[-1].get("message") or "")) if conds else None
        who = f"pod {m.group(1)}" if m else "a pod"
        return f"{who} deleted (evicted, preempted or lost with its node)"

    def _roles(self, obj: Dict[str, Any]) -> List[Role]:
        by_idx: Dict[int, Tuple[Dict[str, Any], int]] = {}
        for item in ((obj.get("spec") or {}).get("resources") or {}).get("GenericItems") or []:
            t = item.get("generictemplate") or {}
            if t.get("kind") != "Pod":
                continue
            labels = t["metadata"].get("labels") or {}
            idx, k = int(labels[_pod.LABEL_ROLE_INDEX]), int(labels[_pod.LABEL_REPLICA_ID])
            tmpl, n = by_idx.get(idx, (t, 0))
            by_idx[idx] = (t if k == 0 else tmpl, n + 1)
        return [_pod.role_from_template(t, n) for _, (t, n) in sorted(by_idx.items())]

    def _cancel_existing(self, app_id: str) -> None:
        """Delete the AppWrapper and its pods (foreground propagation)."""
        ns, name = _names.split_app_id(app_id, "default")
        obj = self._get(ns, name)
        if obj is None:
            return
        group = obj["apiVersion"].split("/")[0]
        self.kube.delete_object(group, VERSION, PLURAL, ns, name, propagation="Foreground")
        log.info("k8s_cancelled", scheduler=self.backend, app_id=app_id)


#: the factory registered as ``kubernetes_mcad`` (:meth:`KubernetesBase.create`)
create_scheduler = KubernetesMCADScheduler.create
