"""Fake controllers for JobSet (jobset.x-k8s.io/v1alpha2), Indexed Jobs (batch/v1) and
Kueue (kueue.x-k8s.io/v1beta1 Workloads of queued JobSets), following their documented
behaviour:

* JobSet (https://jobset.sigs.k8s.io/docs/overview/): a Job ``<jobset>-<rjob>-<i>`` per
  replica of each replicated job, a headless Service named after ``network.subdomain``;
  while ``spec.suspend`` its Jobs are suspended (their running pods deleted); a failed Job
  restarts the JobSet (Jobs recreated, ``status.restarts`` + 1) while restarts <
  ``failurePolicy.maxRestarts``, as the first matching ``failurePolicy.rules`` entry says
  (``FailJobSet``, ``RestartJobSet``, ``RestartJobSetAndIgnoreMaxRestarts``), else the JobSet fails (condition ``Failed``, ``terminalState``);
  all Jobs complete -> condition ``Completed``.
* Job (https://kubernetes.io/docs/concepts/workloads/controllers/job/), Indexed mode: pod
  ``<job>-<index>-<random>`` per index, labelled and annotated
  ``batch.kubernetes.io/job-completion-index``, host name ``<job>-<index>``, env
  ``JOB_COMPLETION_INDEX``; at most ``parallelism`` pods at once (lowest indexes first); a
  failed index is re-run while its failures <= ``backoffLimitPerIndex``, then counts as
  failed (``status.failedIndexes``; succeeded ones in ``status.completedIndexes``): the Job
  fails at once when more indexes failed than ``maxFailedIndexes``, else once every index
  ended; without ``backoffLimitPerIndex`` the Job fails when failures exceed
  ``backoffLimit``; ``podFailurePolicy`` rules on pod conditions (``DisruptionTarget``) and
  exit codes: ``FailJob`` (reason ``PodFailurePolicy``), ``Ignore``, ``Count``. A suspended Job has no running pods and the ``Suspended`` condition. A
  JobSet's Jobs are bound as a gang, a Job of its own pod by pod.
* Kueue (https://kueue.sigs.k8s.io/docs/concepts/workload/): a suspended JobSet labelled
  ``kueue.x-k8s.io/queue-name`` gets a Workload (label ``kueue.x-k8s.io/job-uid``); it is
  admitted when the LocalQueue exists and the pods' requests fit in the ClusterQueue's
  nominal quota left by the other admitted, unfinished Workloads (conditions
  ``QuotaReserved``/``Admitted``, ``status.admission``, the JobSet unsuspended), else
  ``QuotaReserved=False`` says why; a finished JobSet's Workload gets ``Finished`` (its
  quota goes back); a Workload with ``spec.active: false`` is evicted (the JobSet
  suspended, its quota back).
"""
from __future__ import annotations

import copy
import os
from typing import Any, Dict, List

from kubelet import Kubelet, requests_of, set_condition
from store import Store

JOBSETS = "jobset.x-k8s.io/v1alpha2/jobsets"
JOBS = "batch/v1/jobs"
PODS = "v1/pods"
SERVICES = "v1/services"
WORKLOADS = "kueue.x-k8s.io/v1beta1/workloads"
LOCALQUEUES = "kueue.x-k8s.io/v1beta1/localqueues"
CLUSTERQUEUES = "kueue.x-k8s.io/v1beta1/clusterqueues"
CLUSTER_QUEUE = "cluster-queue"
FLAVOR = "default-flavor"
INDEX = "batch.kubernetes.io/job-completion-index"
QUEUE = "kueue.x-k8s.io/queue-name"


def owner(obj: Dict[str, Any], api_version: str, kind: str) -> Dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _cond_true(obj: Dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


class JobController:
    def __init__(self, store: Store, kubelet: Kubelet) -> None:
        self.store = store
        self.kubelet = kubelet
        self.failures: Dict[tuple, int] = {}  # (job uid, index) -> failed pods
        self.seen: set = set()  # uids of failed pods counted
        self.ignored: set = set()  # uids of failed pods a podFailurePolicy Ignore rule took off the count

    def _pods(self, job: Dict[str, Any]) -> List[Dict[str, Any]]:
        uid = job["metadata"]["uid"]
        return [p for p in self.store.items(PODS, job["metadata"]["namespace"])
                if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]

    def _new_pod(self, job: Dict[str, Any], idx: int) -> None:
        tmpl = copy.deepcopy(job["spec"]["template"])
        meta = tmpl.get("metadata") or {}
        jname = job["metadata"]["name"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{jname}-{idx}-{os.urandom(3).hex()[:5]}",
            "labels": {**(meta.get("labels") or {}), INDEX: str(idx), "batch.kubernetes.io/job-name": jname},
            "annotations": {**(meta.get("annotations") or {}), INDEX: str(idx)},
            "ownerReferences": [owner(job, "batch/v1", "Job")]},
            "spec": tmpl["spec"], "status": {"phase": "Pending"}}
        pod["spec"]["hostname"] = f"{jname}-{idx}"
        for c in pod["spec"].get("containers") or []:
            c.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": str(idx)})
        self.store.create(PODS, job["metadata"]["namespace"], pod)

    def sync(self) -> None:
        for job in list(self.store.items(JOBS)):
            self._sync(job)

    def _sync(self, job: Dict[str, Any]) -> None:
        st = job.setdefault("status", {})
        if _cond_true(job, "Complete") or _cond_true(job, "Failed"):
            return
        spec, uid, ns = job["spec"], job["metadata"]["uid"], job["metadata"]["namespace"]
        pods = self._pods(job)
        if spec.get("suspend"):
            for p in pods:
                if p["status"].get("phase") not in ("Succeeded", "Failed"):
                    self.store.delete(PODS, ns, p["metadata"]["name"])
            st.update(active=0)
            self._suspended(job, True)
            return
        self._suspended(job, False)
        n = int(spec.get("completions", 1))
        by_idx: Dict[int, List[Dict[str, Any]]] = {}
        for p in pods:
            by_idx.setdefault(int(p["metadata"]["labels"][INDEX]), []).append(p)
        per_index = spec.get("backoffLimitPerIndex")
        failed_job = ""
        for p in pods:
            if p["status"].get("phase") == "Failed" and p["metadata"]["uid"] not in self.seen | self.ignored:
                self.seen.add(p["metadata"]["uid"])
                key = (uid, int(p["metadata"]["labels"][INDEX]))
                self.failures[key] = self.failures.get(key, 0) + 1
        policy_failed = self._pod_failure_policy(job, pods)
        total_failed = sum(v for (u, _), v in self.failures.items() if u == uid)
        failed_idx = self._failed_indexes(job, n)
        room = self._room(job, pods)
        for idx in range(n):
            ps = by_idx.get(idx, [])
            if any(p["status"].get("phase") == "Succeeded" for p in ps):
                continue
            if any(p["status"].get("phase") not in ("Failed",) for p in ps):
                continue
            if idx in failed_idx:
                continue
            if per_index is None and total_failed > int(spec.get("backoffLimit", 6)):
                failed_job = f"Job has reached the specified backoff limit ({spec.get('backoffLimit', 6)})"
                continue
            if room <= 0:
                continue
            room -= 1
            self._new_pod(job, idx)
        pods = self._pods(job)
        phases = [p["status"].get("phase") for p in pods]
        unbound = [p for p in pods if not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending"]
        if unbound:
            self._bind(job, unbound)
        st.update(active=sum(ph in ("Pending", "Running") for ph in phases),
                  succeeded=sum(ph == "Succeeded" for ph in phases), failed=total_failed)
        done = {int(p["metadata"]["labels"][INDEX]) for p in pods if p["status"].get("phase") == "Succeeded"}
        reason = "BackoffLimitExceeded"
        if per_index is not None:
            reason, failed_job = self._index_status(job, n, done, failed_idx, per_index)
        if policy_failed:
            reason, failed_job = "PodFailurePolicy", policy_failed
        if failed_job:
            for p in pods:
                if p["status"].get("phase") not in ("Succeeded", "Failed"):
                    self.store.delete(PODS, ns, p["metadata"]["name"])
            set_condition(job, "Failed", "True", reason, failed_job)
        elif len(done) == n:
            set_condition(job, "Complete", "True", "", "")
        self.store.touch(job)

    def _pod_failure_policy(self, job: Dict[str, Any], pods: List[Dict[str, Any]]) -> str:
        """``spec.podFailurePolicy`` (https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy):
        the rules in order, the first whose ``onPodConditions`` (or ``onExitCodes``)
        matches a failed pod decides: ``FailJob`` fails the Job (reason ``PodFailurePolicy``,
        the message returned), ``Ignore`` takes the failure off the backoff count, ``Count``
        counts it; "" when no FailJob rule matched."""
        rules = (job["spec"].get("podFailurePolicy") or {}).get("rules") or []
        uid, ns = job["metadata"]["uid"], job["metadata"]["namespace"]
        for p in pods:
            if p["status"].get("phase") != "Failed" or not rules:
                continue
            conds = {(c["type"], c["status"]) for c in p["status"].get("conditions") or []}
            term = next((cs["state"]["terminated"] for cs in p["status"].get("containerStatuses") or []
                         if (cs.get("state") or {}).get("terminated")), {})
            for i, rule in enumerate(rules):
                on = rule.get("onPodConditions") or []
                codes = rule.get("onExitCodes") or {}
                hit = any((c["type"], c.get("status", "True")) in conds for c in on)
                if codes and "exitCode" in term:
                    inside = term["exitCode"] in (codes.get("values") or [])
                    hit = inside if codes.get("operator") == "In" else not inside
                if not hit:
                    continue
                if rule["action"] == "Ignore" and p["metadata"]["uid"] in self.seen:
                    key = (uid, int(p["metadata"]["labels"][INDEX]))
                    self.failures[key] -= 1
                    self.seen.discard(p["metadata"]["uid"])
                    self.ignored.add(p["metadata"]["uid"])
                if rule["action"] == "FailJob":
                    what = next((c["type"] for c in on if (c["type"], c.get("status", "True")) in conds), "exit code")
                    return f"Pod {ns}/{p['metadata']['name']} has condition {what} matching FailJob rule at index {i}"
                break
        return ""

    # -- Indexed Jobs of their own (a sweep's trials): parallelism, per-index failures ------
    def _room(self, job: Dict[str, Any], pods: List[Dict[str, Any]]) -> int:
        """How many more pods may start: ``parallelism`` (default 1; a JobSet's Jobs set it
        to ``completions``) less the active ones."""
        par = int(job["spec"].get("parallelism", 1))
        return par - sum(p["status"].get("phase") in ("Pending", "Running") for p in pods)

    def _bind(self, job: Dict[str, Any], unbound: List[Dict[str, Any]]) -> None:
        """A JobSet's Job is a gang (bound all at once); a Job of its own is not: each pod
        is bound where it fits, as kube-scheduler binds the pods of a plain Job."""
        if any(o.get("kind") == "JobSet" for o in job["metadata"].get("ownerReferences") or []):
            self.kubelet.schedule_gang(unbound)
            return
        for p in unbound:
            self.kubelet.schedule_gang([p])

    def _failed_indexes(self, job: Dict[str, Any], n: int) -> set:
        """Indexes whose failures exceed ``backoffLimitPerIndex`` (none without it)."""
        per_index = job["spec"].get("backoffLimitPerIndex")
        if per_index is None:
            return set()
        uid = job["metadata"]["uid"]
        return {i for i in range(n) if self.failures.get((uid, i), 0) > int(per_index)}

    def _index_status(self, job: Dict[str, Any], n: int, done: set, failed_idx: set, per_index: Any) -> tuple:
        """``status.completedIndexes`` and ``status.failedIndexes`` (interval strings such as
        ``1,3-5``) of a Job with ``backoffLimitPerIndex``; returns ``(reason, message)`` of
        its failure, or ``("", "")``: more failed indexes than ``maxFailedIndexes`` fail it
        at once (``MaxFailedIndexesExceeded``, its running pods deleted); else it fails with
        ``FailedIndexes`` once every other index completed
        (https://kubernetes.io/docs/concepts/workloads/controllers/job/#backoff-limit-per-index)."""
        st = job["status"]
        st["completedIndexes"] = _intervals(done)
        st["failedIndexes"] = _intervals(failed_idx)
        limit = job["spec"].get("maxFailedIndexes")
        if limit is not None and len(failed_idx) > int(limit):
            return "MaxFailedIndexesExceeded", f"Job has exceeded the specified maximal number of failed indexes ({limit})"
        if failed_idx and len(done | failed_idx) == n:
            return "FailedIndexes", f"Job has failed indexes ({_intervals(failed_idx)})"
        return "", ""

    def _suspended(self, job: Dict[str, Any], suspended: bool) -> None:
        """The ``Suspended`` condition of a Job of its own (a JobSet's Jobs keep none, as before)."""
        if any(o.get("kind") == "JobSet" for o in job["metadata"].get("ownerReferences") or []):
            return
        if suspended:
            set_condition(job, "Suspended", "True", "JobSuspended", "Job suspended")
            self.store.touch(job)
        elif _cond_true(job, "Suspended"):
            set_condition(job, "Suspended", "False", "JobResumed", "Job resumed")
            self.store.touch(job)


def _intervals(indexes: Any) -> str:
    """Indexes as the Job status writes them: sorted intervals, ``0-2,5``."""
    out: List[str] = []
    for i in sorted(indexes):
        if out and "-" not in out[-1] and int(out[-1]) == i - 1:
            out[-1] = f"{out[-1]}-{i}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


class JobSetController:
    def __init__(self, store: Store, kubelet: Kubelet) -> None:
        self.store = store
        self.kubelet = kubelet

    def _jobs(self, js: Dict[str, Any]) -> List[Dict[str, Any]]:
        uid = js["metadata"]["uid"]
        return [j for j in self.store.items(JOBS, js["metadata"]["namespace"])
                if any(o.get("uid") == uid for o in j["metadata"].get("ownerReferences") or [])]

    def _create_jobs(self, js: Dict[str, Any]) -> None:
        ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
        sub = (js["spec"].get("network") or {}).get("subdomain") or name
        for rj in js["spec"]["replicatedJobs"]:
            for i in range(int(rj.get("replicas", 1))):
                tmpl = copy.deepcopy(rj["template"])
                spec = tmpl["spec"]
                spec["template"]["spec"]["subdomain"] = sub
                spec["suspend"] = bool(js["spec"].get("suspend"))
                labels = {**((tmpl.get("metadata") or {}).get("labels") or {}), "jobset.sigs.k8s.io/jobset-name": name,
                          "jobset.sigs.k8s.io/replicatedjob-name": rj["name"], "jobset.sigs.k8s.io/job-index": str(i)}
                pl = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
                pl.update({k: v for k, v in labels.items() if k.startswith("jobset.sigs.k8s.io/")})
                self.store.create(JOBS, ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
                    "name": f"{name}-{rj['name']}-{i}", "labels": labels,
                    "ownerReferences": [owner(js, "jobset.x-k8s.io/v1alpha2", "JobSet")]}, "spec": spec})

    def sync(self) -> None:
        for js in list(self.store.items(JOBSETS)):
            self._sync(js)

    def _sync(self, js: Dict[str, Any]) -> None:
        st = js.setdefault("status", {})
        ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
        if st.get("terminalState"):
            return
        jobs = self._jobs(js)
        if "restarts" not in st:
            st["restarts"] = 0
            net = js["spec"].get("network") or {}
            if net.get("enableDNSHostnames"):
                self.store.create(SERVICES, ns, {"apiVersion": "v1", "kind": "Service", "metadata": {
                    "name": net.get("subdomain") or name, "ownerReferences": [owner(js, "jobset.x-k8s.io/v1alpha2", "JobSet")]},
                    "spec": {"clusterIP": "None", "publishNotReadyAddresses": net.get("publishNotReadyAddresses", True),
                             "selector": {"jobset.sigs.k8s.io/jobset-name": name}}})
            self._create_jobs(js)
            jobs = self._jobs(js)
        suspend = bool(js["spec"].get("suspend"))
        for j in jobs:
            if bool(j["spec"].get("suspend")) != suspend:
                j["spec"]["suspend"] = suspend
                self.store.touch(j)
        set_condition(js, "Suspended", "True" if suspend else "False", "SuspendedJobs" if suspend else "ResumeJobs",
                      "jobset is suspended" if suspend else "jobset is resumed", style="meta")
        failed = [j for j in jobs if _cond_true(j, "Failed")]
        if failed:
            policy = js["spec"].get("failurePolicy") or {}
            maxr = int(policy.get("maxRestarts", 0))
            action = _rule_action(policy, failed[0])
            counted = int(st.get("restartsCountTowardsMax", 0))
            if action == "RestartJobSetAndIgnoreMaxRestarts" or (action == "RestartJobSet" and counted < maxr):
                st["restarts"] += 1
                if action == "RestartJobSet":
                    st["restartsCountTowardsMax"] = counted + 1
                for j in jobs:
                    self.store.delete(JOBS, ns, j["metadata"]["name"])
                self._create_jobs(js)
            else:
                msg = f"job {failed[0]['metadata']['name']} failed: " + next(
                    (c.get("message", "") for c in failed[0]["status"].get("conditions", []) if c["type"] == "Failed"), "")
                for j in jobs:
                    j["spec"]["suspend"] = True  # stops the other Jobs' pods
                set_condition(js, "Failed", "True", "FailedJobs", msg, style="meta")
                st["terminalState"] = "Failed"
        elif jobs and all(_cond_true(j, "Complete") for j in jobs):
            set_condition(js, "Completed", "True", "AllJobsCompleted", "jobset completed successfully", style="meta")
            st["terminalState"] = "Completed"
        st["replicatedJobsStatus"] = [
            {"name": rj["name"], "ready": 0, "suspended": sum(1 for j in jobs if j["spec"].get("suspend")),
             "active": sum(1 for j in jobs if j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rj["name"]
                           and (j.get("status") or {}).get("active")),
             "succeeded": sum(1 for j in jobs if j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rj["name"]
                              and _cond_true(j, "Complete")),
             "failed": sum(1 for j in jobs if j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rj["name"]
                           and _cond_true(j, "Failed"))}
            for rj in js["spec"]["replicatedJobs"]]
        self.store.touch(js)


def _rule_action(policy: Dict[str, Any], job: Dict[str, Any]) -> str:
    """The action of the first ``failurePolicy.rules`` entry matching the failed Job's
    reason (``onJobFailureReasons``, empty: any) and replicated job
    (``targetReplicatedJobs``); ``RestartJobSet`` when none matches, as JobSet does."""
    cond = next((c for c in job["status"].get("conditions", []) if c["type"] == "Failed"), {})
    rjob = job["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name", "")
    for rule in policy.get("rules") or []:
        if rule.get("onJobFailureReasons") and cond.get("reason") not in rule["onJobFailureReasons"]:
            continue
        if rule.get("targetReplicatedJobs") and rjob not in rule["targetReplicatedJobs"]:
            continue
        return str(rule["action"])
    return "RestartJobSet"


def _quantity(resource: str, value: int) -> str:
    """A quantity in the fake's units (cpu millicores, memory MiB, others counts) as
    Kubernetes writes it."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource == "memory":
        return f"{value}Mi"
    return str(value)


class KueueController:
    """Kueue with one ClusterQueue (``cluster-queue``, flavor ``default-flavor``) whose
    nominal quota covers ``quota``'s resources: a Workload is admitted when its pods'
    requests fit in what the quota leaves after the admitted, unfinished Workloads (free
    node capacity does not matter: the pods then wait for nodes, as on a real cluster); a
    resource the ClusterQueue does not cover cannot be admitted."""

    def __init__(self, store: Store, kubelet: Kubelet, quota: Dict[str, int]) -> None:
        self.store = store
        self.kubelet = kubelet
        self.quota = quota
        store.create(CLUSTERQUEUES, "", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": sorted(quota), "flavors": [{"name": FLAVOR, "resources": [
                    {"name": k, "nominalQuota": _quantity(k, v)} for k, v in sorted(quota.items())]}]}]}})

    @staticmethod
    def _need(wl: Dict[str, Any]) -> Dict[str, int]:
        need: Dict[str, int] = {}
        for ps in wl["spec"]["podSets"]:
            for k, v in requests_of({"spec": ps["template"]["spec"]}).items():
                if v:
                    need[k] = need.get(k, 0) + v * ps["count"]
        return need

    def _usage(self) -> Dict[str, int]:
        used: Dict[str, int] = {}
        for wl in self.store.items(WORKLOADS):
            if _cond_true(wl, "QuotaReserved") and not _cond_true(wl, "Finished"):
                for k, v in self._need(wl).items():
                    used[k] = used.get(k, 0) + v
        return used

    def sync(self) -> None:
        for js in list(self.store.items(JOBSETS)):
            queue = (js["metadata"].get("labels") or {}).get(QUEUE)
            if not queue:
                continue
            ns, uid = js["metadata"]["namespace"], js["metadata"]["uid"]
            wls = list(self.store.items(WORKLOADS, ns, f"kueue.x-k8s.io/job-uid={uid}"))
            terminal = (js.get("status") or {}).get("terminalState")
            if terminal:
                for wl in wls:  # the job finished: its quota goes back
                    if not _cond_true(wl, "Finished"):
                        set_condition(wl, "Finished", "True", "Succeeded" if terminal == "Completed" else "Failed",
                                      f"jobset {terminal.lower()}", style="meta")
                        self.store.touch(wl)
                continue
            if not wls:
                pod_sets = [{"name": rj["name"], "count": int(rj["template"]["spec"].get("parallelism", 1)) * int(rj.get("replicas", 1)),
                             "template": rj["template"]["spec"]["template"]} for rj in js["spec"]["replicatedJobs"]]
                self.store.create(WORKLOADS, ns, {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload", "metadata": {
                    "name": f"jobset-{js['metadata']['name'][:40]}-{os.urandom(3).hex()[:5]}",
                    "labels": {"kueue.x-k8s.io/job-uid": uid},
                    "ownerReferences": [owner(js, "jobset.x-k8s.io/v1alpha2", "JobSet")]},
                    "spec": {"queueName": queue, "podSets": pod_sets, "active": True}})
                continue
            wl = wls[0]
            if wl["spec"].get("active") is False:
                if not js["spec"].get("suspend"):
                    js["spec"]["suspend"] = True
                    self.store.touch(js)
                if not _cond_true(wl, "Evicted"):
                    set_condition(wl, "Evicted", "True", "Deactivated", "The workload is deactivated", style="meta")
                    set_condition(wl, "QuotaReserved", "False", "Pending", "The workload is deactivated", style="meta")
                    if any(c["type"] == "Admitted" for c in wl["status"]["conditions"]):
                        set_condition(wl, "Admitted", "False", "NoReservation", "The workload has no reservation",
                                      style="meta")
                    wl["status"].pop("admission", None)
                    self.store.touch(wl)
                continue
            if _cond_true(wl, "Admitted"):
                continue
            if not self.store.exists(LOCALQUEUES, ns, queue):
                set_condition(wl, "QuotaReserved", "False", "Inadmissible", f"LocalQueue {queue} doesn't exist",
                              style="meta")
                self.store.touch(wl)
                continue
            need = self._need(wl)
            used = self._usage()
            first = wl["spec"]["podSets"][0]["name"]
            uncovered = sorted(k for k in need if k not in self.quota)
            short = sorted(k for k in need if k in self.quota and used.get(k, 0) + need[k] > self.quota[k])
            if uncovered:
                set_condition(wl, "QuotaReserved", "False", "Pending",
                              f"couldn't assign flavors to pod set {first}: resource {uncovered[0]} unavailable in "
                              f"ClusterQueue", style="meta")
                self.store.touch(wl)
                continue
            if short:
                k = short[0]
                more = used.get(k, 0) + need[k] - self.quota[k]
                set_condition(wl, "QuotaReserved", "False", "Pending",
                              f"couldn't assign flavors to pod set {first}: insufficient unused quota for {k} in "
                              f"flavor {FLAVOR}, {_quantity(k, more)} more needed", style="meta")
                self.store.touch(wl)
                continue
            wl.setdefault("status", {})["admission"] = {"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": [
                {"name": ps["name"], "count": ps["count"],
                 "flavors": {k: FLAVOR for k, v in requests_of({"spec": ps["template"]["spec"]}).items() if v},
                 "resourceUsage": {k: _quantity(k, v * ps["count"])
                                   for k, v in requests_of({"spec": ps["template"]["spec"]}).items() if v}}
                for ps in wl["spec"]["podSets"]]}
            set_condition(wl, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}",
                          style="meta")
            set_condition(wl, "Admitted", "True", "Admitted", "The workload is admitted", style="meta")
            js["spec"]["suspend"] = False
            self.store.touch(wl)
            self.store.touch(js)
