"""The fake cluster's nodes, scheduler and kubelet.

* Nodes have a capacity (cpu millicores, memory MiB, ``nvidia.com/gpu``); the scheduler
  binds a pod to the first node where its requests fit, and otherwise leaves it Pending with
  the ``PodScheduled=False`` condition and kube-scheduler's message
  (``0/2 nodes are available: 2 Insufficient nvidia.com/gpu.``). Gangs (a Volcano job, a
  JobSet) are bound all at once or not at all.
* The kubelet runs a bound pod's container as a local process: the container's
  ``command`` + ``args`` with its ``env`` (the image is not pulled: tests use commands that
  exist on the host, such as ``sh``), in a directory of its own (working directory, HOME,
  TMPDIR: what one pod writes there no other pod, and no retry, sees), stdout and stderr
  captured line by line with their times, so pod logs, exit codes and phases are real.
  Pods share files only through the hostPath volumes they declare; each has a /tmp of its
  own (:mod:`podfs`). Deleting or evicting a pod sends SIGTERM to its process group, then
  SIGKILL after the grace period (the pod's ``terminationGracePeriodSeconds``, as a kubelet).
* Each pod has an address, a host name and name resolution of its own, as with cluster DNS
  (:mod:`podnet`): a headless Service's name resolves to the running pods it selects.
"""
from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Dict, List, Optional, Tuple

import podfs
import podnet
from store import Store, now

GPU = "nvidia.com/gpu"


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mib(q: str) -> int:
    for suffix, mult in (("Ki", 1 / 1024), ("Mi", 1), ("Gi", 1024), ("Ti", 1 << 20), ("M", 1e6 / 2 ** 20),
                         ("G", 1e9 / 2 ** 20)):
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * mult)
    return int(int(q) / 2 ** 20)


def requests_of(pod: Dict[str, Any]) -> Dict[str, int]:
    """cpu (millicores), memory (MiB) and extended resources a pod asks for."""
    out: Dict[str, int] = {"cpu": 0, "memory": 0}
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        req = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for k, v in req.items():
            if k == "cpu":
                out["cpu"] += _milli(str(v))
            elif k == "memory":
                out["memory"] += _mib(str(v))
            else:
                out[k] = out.get(k, 0) + int(v)
    return out


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def expand(text: str, env: Dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command, args and env values (``$$`` escapes;
    an undefined reference stays as written)."""
    def sub(m: "re.Match[str]") -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _REF.sub(sub, text)


def field(pod: Dict[str, Any], path: str) -> str:
    """A downward API ``fieldRef``."""
    m = _FIELD.match(path)
    if m:
        return str((pod["metadata"].get(m.group(1)) or {}).get(m.group(2), ""))
    return {"metadata.name": pod["metadata"]["name"], "metadata.namespace": pod["metadata"]["namespace"],
            "metadata.uid": pod["metadata"]["uid"], "spec.nodeName": pod["spec"].get("nodeName", ""),
            "status.podIP": (pod.get("status") or {}).get("podIP", "127.0.0.1"), "status.hostIP": "127.0.0.1"}.get(path, "")


class Node:
    def __init__(self, name: str, capacity: Dict[str, int]) -> None:
        self.name = name
        self.capacity = capacity
        self.used: Dict[str, int] = {}

    def fits(self, req: Dict[str, int]) -> List[str]:
        """Resources that do not fit ([] if the pod fits)."""
        return [k for k, v in req.items() if v and self.used.get(k, 0) + v > self.capacity.get(k, 0)]

    def add(self, req: Dict[str, int], sign: int = 1) -> None:
        for k, v in req.items():
            self.used[k] = self.used.get(k, 0) + sign * v


class Container:
    """One running container: its process and its log records ``(time, stream, bytes)``."""

    def __init__(self, pod: Dict[str, Any], workdir: str, sandbox: Optional[List[str]] = None,
                 on_exit: Optional[Any] = None) -> None:
        """``sandbox``: the argv prefix (:func:`podnet.sandbox_prefix`) and its argument, the
        pod's setup script (:func:`podfs.script`), that run the command in the pod's namespaces;
        ``on_exit``: called (no arguments) once the process ended and its output is read."""
        self._on_exit = on_exit
        c = pod["spec"]["containers"][0]
        argv = list(c.get("command") or []) + list(c.get("args") or [])
        # the pod's own directory is its working directory, home and temporary directory:
        # pods share nothing through the host's file system but the hostPath volumes they
        # declare (see :mod:`podfs`)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir, "TMPDIR": workdir,
               "HOSTNAME": pod["spec"].get("hostname") or pod["metadata"]["name"]}
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
            elif (e.get("valueFrom") or {}).get("fieldRef"):
                env[e["name"]] = field(pod, e["valueFrom"]["fieldRef"]["fieldPath"])
        argv = [expand(a, env) for a in argv]
        self.records: List[Tuple[str, str, bytes]] = []
        self.cond = threading.Condition()
        self.started = now()
        self.exit_code: Optional[int] = None
        self.signal: Optional[int] = None
        self.finished = ""
        self.proc = subprocess.Popen([*(sandbox or []), *argv], env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, "Stdout"), daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, "Stderr"), daemon=True)]
        for t in self._readers:
            t.start()
        threading.Thread(target=self._wait, daemon=True).start()

    def _read(self, pipe: Any, stream: str) -> None:
        for line in iter(pipe.readline, b""):
            with self.cond:
                self.records.append((now(), stream, line))
                self.cond.notify_all()
        pipe.close()

    def _wait(self) -> None:
        rc = self.proc.wait()
        for t in self._readers:
            t.join()
        with self.cond:
            if rc < 0:
                self.signal = -rc
                self.exit_code = 128 - rc
            else:
                self.exit_code = rc
            self.finished = now()
            self.cond.notify_all()
        if self._on_exit is not None:
            self._on_exit()

    def kill(self, grace: float) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return

        def hard() -> None:
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        threading.Thread(target=hard, daemon=True).start()


class Kubelet:
    """Schedules and runs the pods of the store (see the module docstring)."""

    def __init__(self, store: Store, nodes: List[Node], workdir: str, grace: float = 2.0) -> None:
        self.store = store
        self.nodes = nodes
        self.workdir = workdir
        self.grace = grace
        self.containers: Dict[str, Container] = {}  # pod uid -> container
        self.released: set = set()  # pod uids whose resources went back to their node
        self.ending: Dict[str, int] = {}  # uid of an evicted pod that ended -> the sync that saw it end
        self._syncs = 0
        store.on_delete.append(self._deleted)
        self._net_init()

    # -- scheduling ---------------------------------------------------------------------------
    def schedule_gang(self, pods: List[Dict[str, Any]]) -> bool:
        """Bind all ``pods`` (stored objects, lock held) or none; unbound pods get the
        PodScheduled=False condition with the reason."""
        plan: List[Tuple[Dict[str, Any], Node, Dict[str, int]]] = []
        short: Dict[str, int] = {}
        for pod in pods:
            req = requests_of(pod)
            sel = pod["spec"].get("nodeSelector") or {}
            placed = False
            for node in self.nodes:
                if any(node_label(node, k) != v for k, v in sel.items()):
                    short["didn't match Pod's node affinity/selector"] = short.get("didn't match Pod's node affinity/selector", 0) + 1
                    continue
                missing = node.fits(req)
                if not missing:
                    node.add(req)
                    plan.append((pod, node, req))
                    placed = True
                    break
                for m in missing:
                    short[f"Insufficient {m}"] = short.get(f"Insufficient {m}", 0) + 1
            if not placed:
                for _, node, r in plan:
                    node.add(r, -1)
                reasons = ", ".join(f"{min(n, len(self.nodes))} {why}" for why, n in sorted(short.items()))
                msg = f"0/{len(self.nodes)} nodes are available: {reasons}."
                for p in pods:
                    set_condition(p, "PodScheduled", "False", "Unschedulable", msg)
                    self.store.touch(p)
                return False
        for pod, node, _ in plan:
            pod["spec"]["nodeName"] = node.name
            set_condition(pod, "PodScheduled", "True", "", "")
            self.store.touch(pod)
        return True

    # -- running ------------------------------------------------------------------------------
    def sync(self) -> None:
        """Start bound pods, record ended containers, remove evicted pods that ended
        (lock held by the caller)."""
        self._syncs += 1
        for pod in self.store.items("v1/pods"):
            st = pod.setdefault("status", {})
            uid = pod["metadata"]["uid"]
            if pod["spec"].get("nodeName") and uid not in self.containers and st.get("phase") == "Pending":
                maps = self._config_maps(pod)
                if maps is None:  # a ConfigMap to mount is missing: the kubelet retries the mount
                    continue
                d = tempfile.mkdtemp(prefix=pod["metadata"]["name"][:40] + "-", dir=self.workdir)
                c0 = pod["spec"]["containers"][0]
                # what a kubelet reports of the container's image (its digest made up from its name)
                image = {"name": c0["name"], "image": c0.get("image", ""),
                         "imageID": f"{c0.get('image', '')}@sha256:{hashlib.sha256(c0.get('image', '').encode()).hexdigest()}"}
                try:
                    why = podfs.volume_error(pod, self.sandbox is not None)
                    if why:
                        raise OSError(why)
                    for vol, data in maps.items():
                        os.makedirs(podfs.configmap_dir(d, vol))
                        for key, text in data.items():
                            with open(os.path.join(podfs.configmap_dir(d, vol), key), "w") as f:
                                f.write(text)
                    self.containers[uid] = Container(pod, d, self._net_start(pod, d), self.store.changed.set)
                except OSError as e:
                    st.update(phase="Failed", containerStatuses=[{**image, "ready": False, "restartCount": 0, "state": {
                        "terminated": {"exitCode": 128, "reason": "StartError", "message": str(e),
                                       "startedAt": now(), "finishedAt": now()}}}])
                    self.store.touch(pod)
                    continue
                st.update(phase="Running", startTime=now(), hostIP="127.0.0.1", podIP=st.get("podIP", "127.0.0.1"),
                          containerStatuses=[{**image, "ready": True, "restartCount": 0,
                                              "state": {"running": {"startedAt": self.containers[uid].started}}}])
                set_condition(pod, "Ready", "True", "", "")
                self.store.touch(pod)
            elif st.get("phase") == "Running" and uid in self.containers:
                c = self.containers[uid]
                if c.exit_code is None:
                    continue
                term = {"exitCode": c.exit_code, "reason": "Completed" if c.exit_code == 0 else "Error",
                        "startedAt": c.started, "finishedAt": c.finished}
                if c.signal:
                    term["signal"] = c.signal
                cs = st["containerStatuses"][0]
                cs.update(ready=False, state={"terminated": term})
                st["phase"] = "Succeeded" if c.exit_code == 0 else "Failed"
                set_condition(pod, "Ready", "False", "PodCompleted", "")
                self._release(pod)
                self.store.touch(pod)
                if pod["metadata"].get("deletionTimestamp"):
                    self.ending[uid] = self._syncs
        self._reap()
        self._net_sync()

    def _config_maps(self, pod: Dict[str, Any]) -> Optional[Dict[str, Dict[str, str]]]:
        """``{volume: the data of its ConfigMap}`` of the pod's configMap volumes; None when
        one of them (not ``optional``) does not exist (lock held)."""
        out: Dict[str, Dict[str, str]] = {}
        for v in pod["spec"].get("volumes") or []:
            ref = v.get("configMap")
            if ref is None:
                continue
            cm = self.store.live("v1/configmaps", pod["metadata"]["namespace"], ref.get("name", ""))
            if cm is None and not ref.get("optional"):
                return None
            out[v["name"]] = dict((cm or {}).get("data") or {})
        return out

    # -- eviction (the Eviction API, preemption, a node lost) -----------------------------------
    def evict(self, pod: Dict[str, Any], reason: str, message: str, grace: Optional[int] = None) -> None:
        """Evict ``pod`` (the stored object, lock held) as a cluster with pod disruption
        conditions does (https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions):
        the condition ``DisruptionTarget`` (status True, ``reason`` such as
        ``EvictionByEvictionAPI``, ``PreemptionByScheduler``, ``DeletionByTaintManager``),
        graceful deletion (``deletionTimestamp``, ``deletionGracePeriodSeconds``), the
        container stopped (SIGTERM, SIGKILL after ``grace`` seconds: the Eviction's
        ``deleteOptions.gracePeriodSeconds``, else the pod's ``terminationGracePeriodSeconds``,
        else the kubelet's default);
        the pod then ends with its container's status (Failed: killed by SIGTERM) and is
        removed once the controllers' reconcile pass saw it ended, as the API server removes
        it once the kubelet reports it terminated. A pod not started yet ends Failed at once."""
        meta, st = pod["metadata"], pod.setdefault("status", {})
        if meta.get("deletionTimestamp") or st.get("phase") in ("Succeeded", "Failed"):
            return
        set_condition(pod, "DisruptionTarget", "True", reason, message)
        wait = int(grace) if grace is not None else self.pod_grace(pod)
        meta.update(deletionTimestamp=now(), deletionGracePeriodSeconds=wait)
        c = self.containers.get(meta["uid"])
        if c is not None:
            c.kill(wait)
        else:
            st["phase"] = "Failed"
            self._release(pod)
            self.ending[meta["uid"]] = self._syncs
        self.store.touch(pod)

    def pod_grace(self, pod: Dict[str, Any]) -> int:
        """The seconds between SIGTERM and SIGKILL when ``pod`` is deleted: its
        ``terminationGracePeriodSeconds`` as the kubelet honours it, else this kubelet's
        default (a real API server defaults the field to 30; this one keeps tests short)."""
        g = pod["spec"].get("terminationGracePeriodSeconds")
        return int(g) if isinstance(g, int) and g >= 0 else int(self.grace)

    def _reap(self) -> None:
        """Remove the evicted pods that ended before the controllers' last pass."""
        for pod in list(self.store.items("v1/pods")):
            seen = self.ending.get(pod["metadata"]["uid"])
            if seen is not None and self._syncs - seen >= 2:
                del self.ending[pod["metadata"]["uid"]]
                self.store.delete("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"])

    # -- the pod network (podnet) ---------------------------------------------------------------
    def _net_init(self) -> None:
        self.addresses = podnet.Addresses()
        self.sandbox, why = podnet.sandbox_prefix()
        if self.sandbox is None:
            sys.stderr.write(f"NO POD DNS: pods run without their own names, /etc/hosts and /tmp: {why}\n")
        self.hosts: Dict[str, Tuple[str, str]] = {}  # uid of a running pod -> (its hosts file, text written)
        self._net_version = ""
        self.image_paths = podfs.image_paths()

    def _net_start(self, pod: Dict[str, Any], workdir: str) -> Optional[List[str]]:
        """Give ``pod`` its address and, with namespaces, its hosts file; the argv prefix
        that runs its command in them (None: as a plain process)."""
        pod["status"]["podIP"] = self.addresses.next()
        if self.sandbox is None:
            return None
        path = workdir + ".hosts"  # beside the pod's directory, not in it
        self.hosts[pod["metadata"]["uid"]] = (path, "")
        self._net_version = ""
        self._net_sync()
        # the pod's file system (podfs): its /tmp is built at an empty directory beside its own
        stage, setup = workdir + ".root", workdir + ".sh"
        os.mkdir(stage)
        keep = [p for p in [*self.image_paths, os.path.realpath(workdir)] if p.startswith(podfs.TMP + "/")]
        with open(setup, "w") as f:
            f.write(podfs.script(path, pod["spec"].get("hostname") or pod["metadata"]["name"], stage, keep,
                                 podfs.mounts(pod, workdir)))
        return [*self.sandbox, setup]

    def _net_sync(self) -> None:
        """Rewrite the hosts file of each running pod whose records changed (lock held)."""
        if not self.hosts or self._net_version == self.store.version:
            return
        self._net_version = self.store.version
        pods = {p["metadata"]["uid"]: p for p in self.store.items("v1/pods")}
        records = podnet.dns_records(self.store.items("v1/services"), pods.values())
        for uid, (path, old) in list(self.hosts.items()):
            pod = pods.get(uid)
            if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                del self.hosts[uid]
                continue
            text = podnet.hosts_file(pod, records.get(pod["metadata"]["namespace"], []))
            if text != old:
                podnet.rewrite(path, text)
                self.hosts[uid] = (path, text)

    def _release(self, pod: Dict[str, Any]) -> None:
        node = next((n for n in self.nodes if n.name == pod["spec"].get("nodeName")), None)
        uid = pod["metadata"]["uid"]
        if node is not None and uid not in self.released:
            node.add(requests_of(pod), -1)
            self.released.add(uid)

    def _deleted(self, resource: str, obj: Dict[str, Any]) -> None:
        if resource != "v1/pods":
            return
        c = self.containers.get(obj["metadata"]["uid"])
        if c is not None:
            c.kill(self.pod_grace(obj))
        if (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            self._release(obj)

    def stop(self) -> None:
        """SIGKILL every container's process group (the server is going away)."""
        for c in self.containers.values():
            if c.proc.poll() is None:
                try:
                    os.killpg(c.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def node_label(node: Node, key: str) -> str:
    return {"kubernetes.io/hostname": node.name, "node.kubernetes.io/instance-type": "fake.large"}.get(key, "")


def set_condition(obj: Dict[str, Any], type_: str, status: str, reason: str, message: str, style: str = "pod") -> None:
    """Set a condition of ``obj.status.conditions`` (its transition time moves on change),
    shaped as the object's schema wants it (``style``):

    * ``pod``: a Pod's or Job's condition (``reason`` and ``message`` only when set);
    * ``meta``: ``metav1.Condition`` (JobSet, Kueue): ``reason`` (CamelCase, required) and
      ``message`` (possibly empty) always there;
    * ``mcad``: an AppWrapper's condition: ``lastTransitionMicroTime`` and
      ``lastUpdateMicroTime`` instead of ``lastTransitionTime``.
    """
    conds = obj.setdefault("status", {}).setdefault("conditions", [])
    stamp = "lastTransitionMicroTime" if style == "mcad" else "lastTransitionTime"
    new = {"type": type_, "status": status, stamp: now()}
    if style == "meta":
        if not reason:
            raise ValueError(f"condition {type_} needs a reason")
        new.update(reason=reason, message=message)
    else:
        if reason:
            new["reason"] = reason
        if message:
            new["message"] = message
    if style == "mcad":
        new["lastUpdateMicroTime"] = new[stamp]
    for i, c in enumerate(conds):
        if c["type"] == type_:
            if c["status"] == status:
                new[stamp] = c[stamp]
            conds[i] = new
            return
    conds.append(new)
