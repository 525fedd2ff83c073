"""A fake Kubernetes API server for the tx-scheduler-k8s tests.

    python -m fakekube.server --port 0 --workdir DIR --schemas DIR --token admin=SECRET \
        [--token viewer=SECRET2:get,list] [--nodes 2 --node-cpu 8 --node-memory 16Gi --node-gpu 0]

It speaks the REST API for the calls the plugin makes, with the documented request and
response shapes (https://kubernetes.io/docs/reference/using-api/api-concepts/):

* ``/api/v1/namespaces/{ns}``: GET;
* ``/api/v1/namespaces/{ns}/{pods,services,configmaps}[/{name}]``: POST, GET (one, or a list
  with ``labelSelector``), DELETE (a ConfigMap also PATCH; its data at most 1 MiB); ``/pods/{name}/log`` with ``follow``, ``timestamps``,
  ``sinceSeconds``, ``tailLines``, streamed chunked: stdout and stderr in one log, as a
  cluster without alpha features keeps it (``stream`` is ignored, as without the alpha
  feature gate ``PodLogsQuerySplitStreams``); ``POST /pods/{name}/eviction``: the Eviction
  API (a ``policy/v1`` Eviction, validated): the pod gets the condition ``DisruptionTarget``
  (reason ``EvictionByEvictionAPI``) and is deleted gracefully (:meth:`Kubelet.evict`), as
  https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions
  describes;
* ``/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}]``: POST, GET, LIST, DELETE
  (``propagationPolicy``: dependents go too) and PATCH (``application/merge-patch+json``)
  of the custom resources whose CRDs are in ``--schemas`` (Volcano, JobSet, Kueue, MCAD)
  and of ``bus.volcano.sh`` Commands and ``batch/v1`` Jobs.

It answers as an API server of Kubernetes 1.37 (``schemas.KUBE_VERSION``): every object
it is sent, and every object its own controllers create, is validated before it is stored:
core kinds (Pods, Services, Jobs, ...) against that version's OpenAPI schemas as
kubernetes-validate carries them, custom resources against their CRDs in ``--schemas``
(status included), labels and annotations as ObjectMeta validation checks them, and the
pod and Job templates inside Volcano Jobs, JobSets and AppWrappers against the core
schemas (a real cluster rejects those when its controller creates the pods; here the
create fails at once, so the test that sent it fails). Unknown fields are rejected, as with
``fieldValidation=Strict``. A create ignores ``status`` and a patch of the main resource
keeps it (every kind served has a status subresource). The statuses its own controllers
write are validated against the same schemas after each reconcile pass; one that does not
validate is a bug of the fake, printed as an ``INVALID STATUS`` line (the tests fail on it).

Errors are ``Status`` objects with the API server's codes and reasons: 401 without a
token, 403 ``Forbidden`` for a verb the token's user may not use, 404 ``NotFound`` (also
for an unknown namespace), 409 ``AlreadyExists``, 422 ``Invalid`` naming the field for an
object that does not validate (``<Kind> "<name>" is invalid: <field>: <why>``).

For the tests that count calls at the server (issue 40): ``GET /fakekube/requests`` answers
the API requests served so far by ``"<verb> <resource>"`` (``list v1/pods``) and the ones
answered 429 (``throttled``); ``POST /fakekube/requests/reset`` sets them to zero;
``POST /fakekube/throttle?times=N&retryAfter=S`` answers the next ``N`` API requests
``429 TooManyRequests`` with ``Retry-After: S``, as the API server's priority and fairness
does (https://kubernetes.io/docs/concepts/cluster-administration/flow-control/).

Behind it, a fake cluster (:mod:`kubelet`, :mod:`volcano`) schedules and runs the pods as
local processes, so phases, exit codes and logs are real. It prints ``PORT <n>`` once it
listens. Nothing is persisted: the cluster lives as long as the process.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlparse

from kubelet import Kubelet, Node, _mib, _milli
from schemas import KUBE_VERSION, CoreSchemas, first_error, load_crds, meta_error
from store import Store, now
from jobset import JobController, JobSetController, KueueController
from mcad import MCADController
from volcano import VolcanoController

#: resource -> kind of the resources served besides the CRDs
BUILTIN = {
    "v1/pods": "Pod",
    "v1/services": "Service",
    "v1/configmaps": "ConfigMap",
    "bus.volcano.sh/v1alpha1/commands": "Command",
    "batch/v1/jobs": "Job",
}
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PATH = re.compile(
    r"^/(?:api/(?P<cv>v1)|apis/(?P<g>[^/]+)/(?P<v>[^/]+))/namespaces/(?P<ns>[^/]+)"
    r"(?:/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>log|status|eviction))?)?)?$"
)


class Cluster:
    """The store, the kubelet and the controllers, reconciled by one background thread."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.store = Store()
        self.store.namespaces.update(args.namespace or [])
        cap = {"cpu": int(args.node_cpu * 1000), "memory": _mib(args.node_memory), "nvidia.com/gpu": args.node_gpu,
               "pods": 110}
        self.kubelet = Kubelet(self.store, [Node(f"node{i + 1}", dict(cap)) for i in range(args.nodes)], args.workdir)
        quota = {"cpu": 0, "memory": 0, "nvidia.com/gpu": 0}
        for item in filter(None, (args.cluster_queue or "").split(",")):
            k, _, v = item.partition("=")
            quota[k] = _milli(v) if k == "cpu" else _mib(v) if k == "memory" else int(v)
        self.controllers = [VolcanoController(self.store, self.kubelet), KueueController(self.store, self.kubelet, quota),
                            JobSetController(self.store, self.kubelet), JobController(self.store, self.kubelet),
                            MCADController(self.store, self.kubelet)]
        for spec in args.localqueue or []:
            ns, _, name = spec.partition("/")
            self.store.create("kueue.x-k8s.io/v1beta1/localqueues", ns, {
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": name},
                "spec": {"clusterQueue": "cluster-queue"}})
        self.crds = load_crds(args.schemas)
        self.core = CoreSchemas(KUBE_VERSION)
        self.store.check = self.problem
        self._audited: Dict[Tuple[str, str, str], Tuple[str, str]] = {}  # object -> (resourceVersion, status) checked
        self._audited_version = ""  # the store's version at the last audit
        self.users: Dict[str, Tuple[str, Optional[set]]] = {}
        for spec in args.token or []:
            user, _, rest = spec.partition("=")
            token, _, verbs = rest.partition(":")
            self.users[token] = (user, set(verbs.split(",")) if verbs else None)
        self._stop = threading.Event()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        """The controllers' and kubelet's reconcile loop: every 50 ms while their syncs change
        objects, else when an object is written or a container ends (:attr:`Store.changed`),
        and at least every 0.5 s. It ran every 50 ms over every object whatever happened,
        which cost a test session minutes of CPU (two servers, x8: 92 s in 15 minutes)."""
        while not self._stop.is_set():
            before = self.store.version
            try:
                with self.store.lock:
                    self.kubelet.sync()
                    for c in self.controllers:
                        c.sync()
                    self.kubelet.sync()
                    self._audit()
            except Exception:  # noqa: BLE001 - a controller bug must show, not stop the cluster
                traceback.print_exc()
            if self.store.version != before:  # things move: as a controller requeues
                time.sleep(0.05)
                continue
            self.store.changed.clear()
            if self.store.version == before:  # a write after the clear sets it again
                self.store.changed.wait(0.5)

    def _audit(self) -> None:
        """Validate every object whose status the fake's controllers changed (lock held), as
        the API server validates a controller's status update: a status the schema rejects
        is a bug of the fake, written to stderr as ``INVALID STATUS <resource> <name>:
        <why>`` (the tests' fixture fails on such a line)."""
        if self.store.version == self._audited_version:
            return
        self._audited_version = self.store.version
        for (resource, ns, name), obj in self.store.objects.items():
            rv = obj["metadata"].get("resourceVersion")
            key = (resource, ns, name)
            if self._audited.get(key, ("",))[0] == rv:
                continue
            digest = json.dumps(obj.get("status"), sort_keys=True)
            if self._audited.get(key, ("", ""))[1] != digest:
                why = self.problem(resource, obj)
                if why:
                    sys.stderr.write(f"INVALID STATUS {resource} {ns}/{name}: {why}\n")
            self._audited[key] = (rv, digest)

    def problem(self, resource: str, obj: Dict[str, Any]) -> Optional[str]:
        """What the API server of Kubernetes :data:`KUBE_VERSION` rejects in ``obj``
        (``"<field>: <why>"``), or None: a core kind against its strict OpenAPI schema, a
        custom resource against its CRD's schema (status included, unknown fields
        rejected), labels and annotations as ObjectMeta validation checks them, and the
        pod and job templates inside custom resources against the core schemas (a real
        cluster rejects those later, when the controller creates the pods)."""
        why = meta_error(obj.get("metadata") or {})
        if why:
            return why
        crd = self.crds.get(resource)
        if crd is not None:
            return first_error(crd[1], obj) or self._embedded(resource, obj)
        v = self.core.validator(resource.rsplit("/", 1)[0], BUILTIN.get(resource, ""))
        why = first_error(v, obj) if v is not None else None
        if why is None and resource == "v1/configmaps":
            size = sum(len(k) + len(str(d).encode()) for k, d in (obj.get("data") or {}).items())
            if size > 1024 * 1024:
                return "[]: Too long: must have at most 1048576 bytes"
        return why

    def _embedded(self, resource: str, obj: Dict[str, Any]) -> Optional[str]:
        spec = obj.get("spec") or {}
        checks: List[Tuple[str, Dict[str, Any], str]] = []  # (path, object as a core kind, path prefix to cut)
        if resource.startswith("batch.volcano.sh/"):
            for i, t in enumerate(spec.get("tasks") or []):
                checks.append((f"spec.tasks[{i}].template", {
                    "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                    "template": t.get("template") or {}}, "template"))
        elif resource.startswith("jobset.x-k8s.io/"):
            for i, rj in enumerate(spec.get("replicatedJobs") or []):
                t = rj.get("template") or {}
                checks.append((f"spec.replicatedJobs[{i}].template", {
                    "apiVersion": "batch/v1", "kind": "Job", "metadata": {**(t.get("metadata") or {}), "name": "t"},
                    "spec": t.get("spec") or {}}, ""))
        elif resource.endswith("/appwrappers"):
            for i, item in enumerate((spec.get("resources") or {}).get("GenericItems") or []):
                t = item.get("generictemplate") or {}
                if t.get("kind") in ("Pod", "Service") and t.get("apiVersion") == "v1":
                    checks.append((f"spec.resources.GenericItems[{i}].generictemplate", t, ""))
        for path, o, cut in checks:
            why = meta_error(o.get("metadata") or {}, "metadata")
            if why is None:
                v = self.core.validator(o["apiVersion"], o["kind"])
                why = first_error(v, o) if v is not None else None
                if why is None and "template" in o:
                    why = meta_error((o["template"] or {}).get("metadata") or {}, "template.metadata")
                if why is None and o["kind"] == "Job":
                    why = meta_error(((o["spec"] or {}).get("template") or {}).get("metadata") or {},
                                     "spec.template.metadata")
            if why:
                if cut and why.startswith(cut):
                    why = why[len(cut):].lstrip(".")
                return f"{path}.{why}" if not why.startswith("[") else f"{path}{why}"
        return None

    def kind(self, resource: str) -> Optional[str]:
        if resource in BUILTIN:
            return BUILTIN[resource]
        crd = self.crds.get(resource)
        return crd[0] if crd else None

    def stop(self) -> None:
        self._stop.set()
        self.kubelet.stop()


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}


def status(code: int, reason: str, message: str, details: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure" if code >= 400 else "Success",
            "message": message, "reason": reason, "details": details or {}, "code": code}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cluster: Cluster
    #: API requests served by "<verb> <resource>", and "throttled" (429s sent)
    counts: Dict[str, int] = {}
    #: requests still to answer 429, and the Retry-After they carry
    throttle: List[Any] = [0, "1"]
    count_lock = threading.Lock()

    def _admin(self, method: str) -> bool:
        """The counting and throttling endpoints (``/fakekube/...``); False for others."""
        url = urlparse(self.path)
        if not url.path.startswith("/fakekube/"):
            return False
        with Handler.count_lock:
            if url.path == "/fakekube/requests" and method == "GET":
                self._send(200, dict(Handler.counts))
            elif url.path == "/fakekube/requests/reset" and method == "POST":
                Handler.counts.clear()
                self._send(200, {})
            elif url.path == "/fakekube/throttle" and method == "POST":
                q = parse_qs(url.query)
                Handler.throttle[:] = [int((q.get("times") or ["1"])[0]), (q.get("retryAfter") or ["1"])[0]]
                self._send(200, {})
            else:
                self._send(404, status(404, "NotFound", "no such fakekube endpoint"))
        return True

    def _count(self, verb: str, resource: str) -> bool:
        """Count the request; True when it is to be answered 429 (see the module's doc)."""
        with Handler.count_lock:
            if Handler.throttle[0] > 0:
                Handler.throttle[0] -= 1
                Handler.counts["throttled"] = Handler.counts.get("throttled", 0) + 1
                return True
            key = f"{verb} {resource}"
            Handler.counts[key] = Handler.counts.get(key, 0) + 1
            return False

    def log_message(self, fmt: str, *args: Any) -> None:  # one line per request on stderr
        sys.stderr.write(f"{now()} {self.command} {self.path} {fmt % args}\n")

    # -- plumbing ---------------------------------------------------------------------------
    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            raise ApiError(400, "BadRequest", "the request body is not JSON") from None

    def _auth(self, verb: str, resource: str, ns: str) -> None:
        header = self.headers.get("Authorization", "")
        token = header[len("Bearer "):] if header.startswith("Bearer ") else ""
        if token not in self.cluster.users:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        user, verbs = self.cluster.users[token]
        if verbs is not None and verb not in verbs:
            group, _, plural = resource.rpartition("/")
            group = group.rsplit("/", 1)[0] if "/" in group else ""
            raise ApiError(403, "Forbidden",
                           f'{plural}{"." + group if group else ""} is forbidden: User "{user}" cannot {verb} '
                           f'resource "{plural}" in API group "{group}" in the namespace "{ns}"',
                           {"kind": plural, "group": group})

    def _route(self) -> Tuple[str, str, Optional[str], Optional[str], Dict[str, List[str]]]:
        url = urlparse(self.path)
        m = _PATH.match(url.path)
        if not m:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = m["ns"]
        if m["plural"] is None:
            return "v1/namespaces", ns, None, None, parse_qs(url.query)
        resource = f"v1/{m['plural']}" if m["cv"] else f"{m['g']}/{m['v']}/{m['plural']}"
        if self.cluster.kind(resource) is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return resource, ns, m["name"], m["sub"], parse_qs(url.query)

    def _dispatch(self, method: str) -> None:
        if self._admin(method):
            return
        try:
            resource, ns, name, sub, query = self._route()
            if resource == "v1/namespaces":
                self._auth("get", resource, ns)
                if ns not in self.cluster.store.namespaces:
                    raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
                return self._send(200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                                        "status": {"phase": "Active"}})
            verb = {"POST": "create", "DELETE": "delete", "PATCH": "patch"}.get(method, "get" if name else "list")
            if sub == "log":
                verb = "get"
                resource = "v1/pods/log"
            self._auth(verb, resource, ns)
            if self._count(verb, resource):
                self._body() if method in ("POST", "PATCH") else None
                data = json.dumps(status(429, "TooManyRequests", "Too many requests, please try again later.")).encode()
                self.send_response(429)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", str(Handler.throttle[1]))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if sub == "log":
                return self._log(ns, name or "", query)
            if sub == "eviction":
                if resource != "v1/pods" or method != "POST":
                    raise ApiError(405, "MethodNotAllowed", f"method {method} is not allowed")
                return self._evict(ns, name or "", self._body())
            if method == "POST":
                return self._create(resource, ns, self._body())
            if method == "GET" and name is None:
                sel = (query.get("labelSelector") or [""])[0]
                items = self.cluster.store.list(resource, ns, sel)
                kind = self.cluster.kind(resource)
                api_version = resource.rsplit("/", 1)[0]
                return self._send(200, {"apiVersion": api_version, "kind": f"{kind}List",
                                        "metadata": {"resourceVersion": self.cluster.store.version}, "items": items})
            obj = self.cluster.store.get(resource, ns, name or "")
            if obj is None:
                raise self._not_found(resource, name or "")
            if method == "GET":
                return self._send(200, obj)
            if method == "DELETE":
                self.cluster.store.delete(resource, ns, name or "")
                if resource.startswith("v1/"):
                    return self._send(200, obj)
                return self._send(200, status(200, "", "", {"name": name, "kind": resource.rsplit("/", 1)[1]}))
            if method == "PATCH":
                return self._patch(resource, ns, name or "", self._body())
            raise ApiError(405, "MethodNotAllowed", f"method {method} is not allowed")
        except ApiError as e:
            self._send(e.code, status(e.code, e.reason, e.message, e.details))

    def _not_found(self, resource: str, name: str) -> ApiError:
        group, _, plural = resource.rpartition("/")
        g = group.rsplit("/", 1)[0] if "/" in group else ""
        return ApiError(404, "NotFound", f'{plural}{"." + g if g else ""} "{name}" not found',
                        {"name": name, "group": g, "kind": plural})

    def _validate(self, resource: str, obj: Dict[str, Any]) -> None:
        why = self.cluster.problem(resource, obj)
        if why:
            kind = self.cluster.kind(resource) or ""
            group = resource.rsplit("/", 2)[0] if resource.count("/") == 2 else ""
            raise ApiError(422, "Invalid", f'{kind}{"." + group if group else ""} "{obj["metadata"].get("name", "")}" '
                                           f"is invalid: {why}", {"name": obj["metadata"].get("name", ""),
                                                                   "kind": kind, "causes": [{"message": why}]})

    def _create(self, resource: str, ns: str, obj: Dict[str, Any]) -> None:
        store = self.cluster.store
        kind = self.cluster.kind(resource) or ""
        if ns not in store.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + os.urandom(3).hex()[:5]
        name = meta.get("name", "")
        pattern = _LABEL1035 if resource == "v1/services" else _SUBDOMAIN
        limit = 63 if resource == "v1/services" else 253
        if not name or len(name) > limit or not pattern.match(name):
            raise ApiError(422, "Invalid", f'{kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": '
                                           "a lowercase RFC 1123 name must consist of lower case alphanumeric "
                                           "characters or '-', and must start and end with an alphanumeric character")
        obj.pop("status", None)  # every kind served has a status subresource: a create ignores status
        self._validate(resource, obj)
        with store.lock:
            if store.exists(resource, ns, name):
                group, _, plural = resource.rpartition("/")
                g = group.rsplit("/", 1)[0] if "/" in group else ""
                raise ApiError(409, "AlreadyExists", f'{plural}{"." + g if g else ""} "{name}" already exists',
                               {"name": name, "group": g, "kind": plural})
            if resource == "v1/pods":
                obj["status"] = {"phase": "Pending"}
            created = store.create(resource, ns, obj, checked=True)
        self._send(201, created)

    def _patch(self, resource: str, ns: str, name: str, patch: Dict[str, Any]) -> None:
        store = self.cluster.store
        with store.lock:
            obj = store.live(resource, ns, name)
            if obj is None:
                raise self._not_found(resource, name)
            new = merge_patch(obj, patch)
            if "status" in patch:  # the main resource ignores status; only .../status changes it
                new["status"] = obj.get("status")
                if new["status"] is None:
                    new.pop("status")
            self._validate(resource, {k: v for k, v in new.items() if k != "status"})  # status: the server's own
            obj.clear()
            obj.update(new)
            store.touch(obj)
            out = json.loads(json.dumps(obj))
        self._send(200, out)

    def _evict(self, ns: str, name: str, body: Dict[str, Any]) -> None:
        """``POST .../pods/{name}/eviction`` with a ``policy/v1`` Eviction: 201 and a
        Success Status, as the API server answers (no PodDisruptionBudgets here, so every
        eviction is allowed); the pod is evicted by :meth:`Kubelet.evict`. 404 for a pod
        that does not exist, 422 for a body that is not a valid Eviction of that pod."""
        v = self.cluster.core.validator("policy/v1", "Eviction")
        err = first_error(v, body) if v is not None else "the server has no schema of policy/v1 Eviction"
        if err is None and (body.get("metadata") or {}).get("name") != name:
            err = f"metadata.name: Invalid value: {(body.get('metadata') or {}).get('name')!r}: must be the pod's name {name!r}"
        if err:
            raise ApiError(422, "Invalid", f'Eviction.policy "{name}" is invalid: {err}',
                           {"name": name, "kind": "Eviction", "causes": [{"message": err}]})
        with self.cluster.store.lock:
            pod = self.cluster.store.live("v1/pods", ns, name)
            if pod is None:
                raise self._not_found("v1/pods", name)
            grace = (body.get("deleteOptions") or {}).get("gracePeriodSeconds")
            self.cluster.kubelet.evict(pod, "EvictionByEvictionAPI", "Eviction API: evicting", grace)
        self._send(201, status(201, "", "", {"name": name, "kind": "pods"}))

    def _log(self, ns: str, name: str, query: Dict[str, List[str]]) -> None:
        q = {k: v[0] for k, v in query.items()}
        pod = self.cluster.store.get("v1/pods", ns, name)
        if pod is None:
            raise self._not_found("v1/pods", name)
        c = self.cluster.kubelet.containers.get(pod["metadata"]["uid"])
        cname = pod["spec"]["containers"][0]["name"]
        if c is None:
            raise ApiError(400, "BadRequest", f'container "{cname}" in pod "{name}" is waiting to start: ContainerCreating')
        # ``stream`` (Stdout/Stderr) is ignored, as by an API server without the alpha feature
        # gate PodLogsQuerySplitStreams (it does not pass it on to the kubelet): one log
        follow = q.get("follow") == "true"
        stamps = q.get("timestamps") == "true"
        since = None
        if q.get("sinceSeconds"):
            since = time.time() - int(q["sinceSeconds"])
        tail = int(q["tailLines"]) if q.get("tailLines") else None
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def pick(records: List[Tuple[str, str, bytes]]) -> bytes:
            out = []
            for ts, _, line in records:
                if since is not None and _epoch(ts) < since:
                    continue
                out.append((ts.encode() + b" " if stamps else b"") + line)
            return b"".join(out)

        def chunk(data: bytes) -> None:
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        with c.cond:
            records = list(c.records)
        sent = len(records)  # what follows starts after the snapshot: no line lost or repeated
        if tail is not None:
            records = records[-tail:] if tail else []
        chunk(pick(records))
        while follow:
            with c.cond:
                while len(c.records) == sent and c.exit_code is None:
                    c.cond.wait(0.5)
                new = c.records[sent:]
                sent += len(new)
                done = c.exit_code is not None and sent == len(c.records)
            chunk(pick(new))
            if done:
                break
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")


def _epoch(ts: str) -> float:
    import datetime as dt

    return dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--workdir", required=True, help="where the pods' processes run")
    ap.add_argument("--schemas", required=True, help="directory of CRD YAML files")
    ap.add_argument("--token", action="append", help="USER=TOKEN[:verb,verb]: a user (all verbs if none listed)")
    ap.add_argument("--namespace", action="append", help="an extra namespace (default and kube-system exist)")
    ap.add_argument("--localqueue", action="append", help="NAMESPACE/NAME: a Kueue LocalQueue that exists")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--node-cpu", type=float, default=8)
    ap.add_argument("--node-memory", default="16Gi")
    ap.add_argument("--node-gpu", type=int, default=0)
    ap.add_argument("--cluster-queue", default="cpu=16,memory=64Gi,nvidia.com/gpu=0",
                    help="nominal quota of Kueue's ClusterQueue cluster-queue (flavor default-flavor), as "
                         "RESOURCE=QUANTITY,...: Kueue admits by it, not by free node capacity")
    args = ap.parse_args(argv)
    cluster = Cluster(args)
    Handler.cluster = cluster
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    def terminate(*_: Any) -> None:
        cluster.stop()
        os._exit(0)

    signal.signal(signal.SIGTERM, terminate)
    print(f"PORT {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
