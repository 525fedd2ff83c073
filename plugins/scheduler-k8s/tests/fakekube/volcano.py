"""A fake Volcano job controller (batch.volcano.sh/v1alpha1 Job, bus.volcano.sh/v1alpha1
Command), following Volcano's documented behaviour (https://volcano.sh/en/docs/vcjob/):

* pods ``<job>-<task>-<i>`` from each task's template, labelled ``volcano.sh/job-name`` and
  ``volcano.sh/task-spec``, host name = pod name, subdomain = job name (``svc`` plugin, which
  also makes a headless Service named after the job), ``VC_TASK_INDEX`` (``env`` plugin);
* gang scheduling of ``minAvailable`` pods;
* ``policies`` on ``PodFailed``/``PodEvicted`` (a failed pod with the ``DisruptionTarget``
  condition, evicted: :meth:`kubelet.Kubelet.evict`): ``RestartJob`` (bounded by the job's
  ``maxRetry``; ``status.retryCount``), ``RestartTask`` (bounded by the task's ``maxRetry``),
  ``TerminateJob``, ``AbortJob``; a failed pod without a policy fails the job once every pod
  has ended;
* a Command ``AbortJob`` kills the running pods (finished ones are kept) -> ``Aborted``;
* phases Pending, Running, Restarting, Aborting, Aborted, Terminating, Terminated,
  Completed, Failed in ``status.state.phase``, counts in ``status``.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List

from kubelet import Kubelet, set_condition
from store import Store, now

JOBS = "batch.volcano.sh/v1alpha1/jobs"
COMMANDS = "bus.volcano.sh/v1alpha1/commands"
PODS = "v1/pods"
SERVICES = "v1/services"
FINAL = {"Completed", "Aborted", "Terminated", "Failed"}


def evicted_by(pod: Dict[str, Any]) -> str:
    """The reason of a failed pod's ``DisruptionTarget`` condition (``EvictionByEvictionAPI``
    ...), "" if it has none: Volcano raises ``PodEvicted`` for such a pod, ``PodFailed``
    for another failed one."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            return str(c.get("reason") or "DisruptionTarget")
    return ""


def _owner(job: Dict[str, Any]) -> Dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


class VolcanoController:
    def __init__(self, store: Store, kubelet: Kubelet) -> None:
        self.store = store
        self.kubelet = kubelet
        self.aborts: set = set()  # (namespace, job) with an AbortJob command
        self.handled: set = set()  # uids of failed pods whose policy ran
        self.retries: Dict[tuple, int] = {}  # (namespace, pod) -> RestartTask count

    def _set_phase(self, job: Dict[str, Any], phase: str, reason: str = "", message: str = "") -> None:
        st = job.setdefault("status", {})
        if (st.get("state") or {}).get("phase") != phase:
            st["state"] = {"phase": phase, "lastTransitionTime": now()}
            if reason:
                st["state"]["reason"] = reason
            if message:
                st["state"]["message"] = message
            self.store.touch(job)

    def _pods(self, job: Dict[str, Any]) -> List[Dict[str, Any]]:
        return list(self.store.items(PODS, job["metadata"]["namespace"], f"volcano.sh/job-name={job['metadata']['name']}"))

    def _create_pod(self, job: Dict[str, Any], task: Dict[str, Any], i: int) -> None:
        ns, jname = job["metadata"]["namespace"], job["metadata"]["name"]
        tmpl = copy.deepcopy(task["template"])
        name = f"{jname}-{task['name']}-{i}"
        meta = tmpl.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), "volcano.sh/job-name": jname, "volcano.sh/job-namespace": ns,
                  "volcano.sh/queue-name": job["spec"].get("queue", "default"), "volcano.sh/task-spec": task["name"]}
        annotations = {**(meta.get("annotations") or {}), "volcano.sh/task-index": str(i),
                       "scheduling.k8s.io/group-name": jname}
        spec = tmpl["spec"]
        spec.setdefault("hostname", name)
        spec.setdefault("subdomain", jname)
        for c in spec.get("containers") or []:
            c.setdefault("env", []).extend([{"name": "VC_TASK_INDEX", "value": str(i)},
                                            {"name": "VK_TASK_INDEX", "value": str(i)}])
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "labels": labels, "annotations": annotations, "ownerReferences": [_owner(job)]},
               "spec": spec, "status": {"phase": "Pending"}}
        self.store.create(PODS, ns, pod)

    def _create_all(self, job: Dict[str, Any]) -> None:
        for task in job["spec"]["tasks"]:
            for i in range(int(task.get("replicas", 1))):
                if not self.store.exists(PODS, job["metadata"]["namespace"], f"{job['metadata']['name']}-{task['name']}-{i}"):
                    self._create_pod(job, task, i)

    def _kill(self, job: Dict[str, Any], keep_finished: bool = True) -> bool:
        """Delete the job's pods (finished ones kept); True when none is left running."""
        left = False
        for pod in self._pods(job):
            if keep_finished and pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            self.store.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            left = True
        return not left

    def sync(self) -> None:
        """One reconcile pass (store lock held)."""
        for cmd in list(self.store.items(COMMANDS)):
            target = cmd.get("target") or {}
            job = self.store.live(JOBS, cmd["metadata"]["namespace"], target.get("name", ""))
            if job is not None and cmd.get("action") == "AbortJob":
                self.aborts.add((cmd["metadata"]["namespace"], target.get("name", "")))
            self.store.delete(COMMANDS, cmd["metadata"]["namespace"], cmd["metadata"]["name"])
        for job in list(self.store.items(JOBS)):
            self._sync_job(job)

    def _sync_job(self, job: Dict[str, Any]) -> None:
        st = job.setdefault("status", {})
        phase = (st.get("state") or {}).get("phase")
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        if phase is None:
            st.update(minAvailable=job["spec"].get("minAvailable", 0), retryCount=0)
            self.store.create(SERVICES, ns, {"apiVersion": "v1", "kind": "Service", "metadata": {
                "name": name, "ownerReferences": [_owner(job)]}, "spec": {
                "clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"volcano.sh/job-name": name}}})
            self._create_all(job)
            self._set_phase(job, "Pending")
            phase = "Pending"
        if phase in FINAL:
            return
        if (ns, name) in self.aborts:
            self.aborts.discard((ns, name))
            self._set_phase(job, "Aborting", "AbortJob", "the job was aborted by a command")
            phase = "Aborting"
        if phase == "Aborting":
            if self._kill(job):
                self._set_phase(job, "Aborted", "AbortJob", "the job was aborted by a command")
            self._count(job)
            return
        if phase == "Terminating":
            if self._kill(job):
                self._set_phase(job, "Terminated", st["state"].get("reason", "PodFailed"), st["state"].get("message", ""))
            self._count(job)
            return
        if phase == "Restarting":
            if self._kill(job, keep_finished=False):
                self._create_all(job)
                self._set_phase(job, "Pending")
            return
        pods = self._pods(job)
        unbound = [p for p in pods if not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending"]
        if unbound:
            self.kubelet.schedule_gang(unbound)
        self._count(job)
        tasks = {t["name"]: t for t in job["spec"]["tasks"]}
        for pod in pods:
            if pod["status"].get("phase") != "Failed" or pod["metadata"]["uid"] in self.handled:
                continue
            task = tasks.get(pod["metadata"]["labels"].get("volcano.sh/task-spec", ""), {})
            disruption = evicted_by(pod)
            event = "PodEvicted" if disruption else "PodFailed"
            action = next((p.get("action") for p in task.get("policies") or job["spec"].get("policies") or []
                           if p.get("event") in (event, "*")), None)
            self.handled.add(pod["metadata"]["uid"])
            who = pod["metadata"]["name"]
            what = f"pod {who} evicted (DisruptionTarget: {disruption})" if disruption else f"pod {who} failed"
            if action == "RestartJob":
                if st.get("retryCount", 0) < int(job["spec"].get("maxRetry", 3)):
                    st["retryCount"] = st.get("retryCount", 0) + 1
                    self._set_phase(job, "Restarting", event, f"{what}: restarting the job")
                else:
                    self._set_phase(job, "Terminating", event, f"{what} and maxRetry is reached")
                return
            if action == "RestartTask":
                retries = self.retries.get((ns, who), 0)
                if retries < int(task.get("maxRetry", 3)):
                    self.store.delete(PODS, ns, who)
                    self._create_pod(job, task, int(pod["metadata"]["annotations"]["volcano.sh/task-index"]))
                    self.retries[(ns, who)] = retries + 1
                    st["retryCount"] = st.get("retryCount", 0) + 1
                    return
                self._set_phase(job, "Terminating", event, f"{what} and its task's maxRetry is reached")
                return
            if action in ("TerminateJob", "AbortJob"):
                nxt = "Terminating" if action == "TerminateJob" else "Aborting"
                self._set_phase(job, nxt, event, what)
                return
        phases = [p["status"].get("phase") for p in pods]
        if phases and all(p in ("Succeeded", "Failed") for p in phases):
            if all(p == "Succeeded" for p in phases):
                self._set_phase(job, "Completed")
            else:
                self._set_phase(job, "Failed", "PodFailed", "some pods failed")
        elif any(p == "Running" for p in phases):
            self._set_phase(job, "Running")

    def _count(self, job: Dict[str, Any]) -> None:
        st = job["status"]
        counts = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0}
        per_task: Dict[str, Dict[str, int]] = {}
        for pod in self._pods(job):
            phase = pod["status"].get("phase", "Pending")
            counts[phase.lower()] = counts.get(phase.lower(), 0) + 1
            t = per_task.setdefault(pod["metadata"]["labels"]["volcano.sh/task-spec"], {})
            t[phase] = t.get(phase, 0) + 1
        new = {**counts, "taskStatusCount": {k: {"phase": v} for k, v in per_task.items()}}
        if any(st.get(k) != v for k, v in new.items()):
            st.update(new)
            self.store.touch(job)


__all__ = ["VolcanoController", "set_condition"]
