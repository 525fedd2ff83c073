"""A fake MCAD dispatcher for AppWrappers (``workload.codeflare.dev/v1beta1`` and
``mcad.ibm.com/v1beta1``), following MCAD's documented behaviour
(https://github.com/project-codeflare/multi-cluster-app-dispatcher):

* an AppWrapper is dispatched when all its pods fit the cluster's free capacity (state
  ``Running``, ``isdispatched``): its generic items (Pods and Services) are created, owned
  by it and labelled ``appwrapper.<group>``; otherwise it stays ``Pending`` with the
  condition ``Backoff``/``AppWrapperNotRunnable`` saying which resource is short;
* a failed pod requeues the whole app (items deleted and created again,
  ``numberOfRequeueings`` + 1) while ``schedulingSpec.requeuing.maxNumRequeuings`` allows
  (MCAD waits ``timeInSeconds`` first; the fake does not wait); then its state is
  ``Failed``, its failed pods kept (an evicted pod is deleted all the same: see
  :meth:`kubelet.Kubelet.evict`), the others stopped;
* counts ``running``, ``pending``, ``failed``, ``Succeeded`` in ``status``.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List

from kubelet import Kubelet, requests_of, set_condition
from store import Store, now

GROUPS = ("workload.codeflare.dev", "mcad.ibm.com")
PODS = "v1/pods"
SERVICES = "v1/services"


class MCADController:
    def __init__(self, store: Store, kubelet: Kubelet) -> None:
        self.store = store
        self.kubelet = kubelet
        self.handled: set = set()

    def sync(self) -> None:
        for group in GROUPS:
            for aw in list(self.store.items(f"{group}/v1beta1/appwrappers")):
                self._sync(group, aw)

    def _items(self, aw: Dict[str, Any]) -> List[Dict[str, Any]]:
        return [i.get("generictemplate") or {} for i in aw["spec"]["resources"].get("GenericItems") or []]

    def _pods(self, aw: Dict[str, Any]) -> List[Dict[str, Any]]:
        uid = aw["metadata"]["uid"]
        return [p for p in self.store.items(PODS, aw["metadata"]["namespace"])
                if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]

    def _dispatch(self, group: str, aw: Dict[str, Any]) -> bool:
        need: Dict[str, int] = {}
        for t in self._items(aw):
            if t.get("kind") == "Pod":
                for k, v in requests_of(t).items():
                    need[k] = need.get(k, 0) + v
        free: Dict[str, int] = {}
        for node in self.kubelet.nodes:
            for k, v in node.capacity.items():
                free[k] = free.get(k, 0) + v - node.used.get(k, 0)
        short = [f"{k} (requested {v}, free {free.get(k, 0)})" for k, v in need.items() if v > free.get(k, 0)]
        if short:
            set_condition(aw, "Backoff", "True", "AppWrapperNotRunnable",
                          "Insufficient resources to dispatch AppWrapper: " + ", ".join(short), style="mcad")
            return False
        ns, name = aw["metadata"]["namespace"], aw["metadata"]["name"]
        ref = {"apiVersion": f"{group}/v1beta1", "kind": "AppWrapper", "name": name, "uid": aw["metadata"]["uid"],
               "controller": True, "blockOwnerDeletion": True}
        for t in self._items(aw):
            kind = t.get("kind")
            if kind not in ("Pod", "Service"):
                continue  # PodGroups: no coscheduler in the fake cluster
            obj = copy.deepcopy(t)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("labels", {})[f"appwrapper.{group}"] = name
            meta["ownerReferences"] = [ref]
            meta.pop("namespace", None)
            if kind == "Pod":
                obj["status"] = {"phase": "Pending"}
            res = PODS if kind == "Pod" else SERVICES
            if not self.store.exists(res, ns, meta["name"]):
                self.store.create(res, ns, obj)
        return True

    def _sync(self, group: str, aw: Dict[str, Any]) -> None:
        st = aw.setdefault("status", {})
        if st.get("state") in ("Failed", "Completed", "Deleted"):
            return
        if not st.get("isdispatched"):
            st.setdefault("state", "Pending")
            st.setdefault("numberOfRequeueings", 0)
            st.setdefault("controllerfirsttimestamp", now())
            if self._dispatch(group, aw):
                st.update(state="Running", isdispatched=True)
                set_condition(aw, "Dispatched", "True", "AppWrapperRunnable", "AppWrapper dispatched", style="mcad")
            self.store.touch(aw)
            return
        pods = self._pods(aw)
        unbound = [p for p in pods if not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending"]
        if unbound:
            self.kubelet.schedule_gang(unbound)
        phases = [p["status"].get("phase") for p in pods]
        st.update(running=phases.count("Running"), pending=phases.count("Pending"), failed=phases.count("Failed"),
                  Succeeded=phases.count("Succeeded"))
        failed = [p for p in pods if p["status"].get("phase") == "Failed" and p["metadata"]["uid"] not in self.handled]
        if failed:
            for p in failed:
                self.handled.add(p["metadata"]["uid"])
            req = (aw["spec"].get("schedulingSpec") or {}).get("requeuing") or {}
            if st["numberOfRequeueings"] < int(req.get("maxNumRequeuings") or 0):
                st["numberOfRequeueings"] += 1
                st["requeueingTimeInSeconds"] = int(req.get("timeInSeconds", 300)) * 2 ** st["numberOfRequeueings"]
                for p in pods:
                    self.store.delete(PODS, aw["metadata"]["namespace"], p["metadata"]["name"])
                st.update(state="Pending", isdispatched=False)
                set_condition(aw, "Requeuing", "True", "PodsFailed", f"pod {failed[0]['metadata']['name']} failed",
                              style="mcad")
            else:
                for p in pods:  # the app cannot succeed: stop the rest (MCAD's dispatchDuration would)
                    if p["status"].get("phase") in ("Pending", "Running"):
                        self.store.delete(PODS, aw["metadata"]["namespace"], p["metadata"]["name"])
                st["state"] = "Failed"
                set_condition(aw, "Failed", "True", "PodsFailed",
                              f"pod {failed[0]['metadata']['name']} failed and maxNumRequeuings is reached", style="mcad")
        self.store.touch(aw)
