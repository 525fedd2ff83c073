"""The fake API server answers as a real one of Kubernetes ``KUBE_VERSION`` does: what it is
sent is validated against that version's OpenAPI schemas (core kinds, with
kubernetes-validate) and the vendored CRDs, and a request that does not validate gets 422
``Invalid`` naming the field, through tx's own client; and the statuses the server writes
itself validate against the same schemas."""
import copy
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import pytest

from k8s_apps import K8S_VERSION, SCHEMAS, apps, need, role
from tx_scheduler_k8s.testing import ADMIN_TOKEN
from tx.specs import AppDef, AppState, BindMount, Resource, RetryPolicy, Role
from tx_scheduler_k8s import kubernetes_jobset_scheduler, kubernetes_mcad_scheduler, kubernetes_scheduler
from tx_scheduler_k8s._client import Kube, KubeError

APPS = apps()


def resource(module: Any, app: AppDef, **cfg: Any) -> Dict[str, Any]:
    return module.create_scheduler("t").submit_dryrun(app, cfg).request.resource


def volcano() -> Dict[str, Any]:
    return resource(kubernetes_scheduler, APPS["all_mounts"], queue="default")


def jobset() -> Dict[str, Any]:
    return resource(kubernetes_jobset_scheduler, AppDef("js", roles=[role(replicas=2)]))


def appwrapper() -> Dict[str, Any]:
    return resource(kubernetes_mcad_scheduler, APPS["ports"])


def refused(fake_cluster: Dict[str, Any], plural: str, obj: Dict[str, Any]) -> str:
    """The one-line error of creating ``obj`` (which must be refused with 422 Invalid)."""
    group, version = obj["apiVersion"].split("/")
    with pytest.raises(KubeError) as e:
        Kube().create_object(group, version, plural, "default", obj)
    assert e.value.status == 422 and e.value.reason == "Invalid", str(e.value)
    assert "Traceback" not in str(e.value)
    return str(e.value)


def _container(obj: Dict[str, Any]) -> Dict[str, Any]:
    return obj["spec"]["tasks"][0]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("make,plural,change,field", [
    # a misspelt container field in a Volcano task's pod template: the core Pod schema
    (volcano, "jobs", lambda o: _container(o).update(resource={}),
     "spec.tasks[0].template.spec.containers[0]: Additional properties are not allowed ('resource'"),
    # a port number as a string, in a JobSet's Job template
    (jobset, "jobsets", lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
     ["containers"][0].update(ports=[{"containerPort": "8080"}]),
     "spec.replicatedJobs[0].template.spec.template.spec.containers[0].ports[0].containerPort: '8080' is not of type"),
    # a Service in an AppWrapper with an unknown field
    (appwrapper, "appwrappers", lambda o: o["spec"]["resources"]["GenericItems"][-1]["generictemplate"]["spec"]
     .update(clusterIp="None"),
     "generictemplate.spec: Additional properties are not allowed ('clusterIp'"),
    # a label value longer than 63 characters (ObjectMeta validation)
    (volcano, "jobs", lambda o: o["metadata"]["labels"].update({"tx.pytorch.org/app-name": "a" * 64}),
     'metadata.labels: Invalid value: "' + "a" * 64),
    # a label key with two slashes in a pod template
    (jobset, "jobsets", lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
     ["labels"].update({"a/b/c": "x"}), "template.spec.template.metadata.labels: Invalid value: \"a/b/c\""),
    # the CRD's own schema: an unknown field of the Volcano Job spec
    (volcano, "jobs", lambda o: o["spec"].update(minAvaliable=1),
     "spec: Additional properties are not allowed ('minAvaliable'"),
])
def test_an_invalid_object_is_422_naming_the_field(fake_cluster: Dict[str, Any], make: Callable[[], Dict[str, Any]],
                                                   plural: str, change: Callable[[Dict[str, Any]], None],
                                                   field: str) -> None:
    obj = make()
    group, version = obj["apiVersion"].split("/")
    Kube().create_object(group, version, plural, "default", copy.deepcopy(obj))  # valid as tx makes it
    Kube().delete_object(group, version, plural, "default", obj["metadata"]["name"])
    obj["metadata"]["name"] += "-bad"
    change(obj)
    assert field in refused(fake_cluster, plural, obj)


def post(fake_cluster: Dict[str, Any], path: str, obj: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """POST ``obj`` as JSON, as any client may (the official client checks field names
    itself, so it cannot send a misspelt one)."""
    req = urllib.request.Request(fake_cluster["url"] + path, data=json.dumps(obj).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.parametrize("plural,obj,field", [
    ("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc-bad"}, "spec": {"clusterIp": "None"}},
     "spec: Additional properties are not allowed ('clusterIp'"),
    ("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-bad"},
              "spec": {"containers": [{"name": "c", "image": "busybox", "command": "sh"}]}},
     "spec.containers[0].command: 'sh' is not of type 'array'"),
])
def test_core_kinds_are_validated(fake_cluster: Dict[str, Any], plural: str, obj: Dict[str, Any], field: str) -> None:
    """A Service and a Pod sent on their own: the strict core schemas of the stated version."""
    code, body = post(fake_cluster, f"/api/v1/namespaces/default/{plural}", obj)
    assert code == 422 and body["kind"] == "Status" and body["reason"] == "Invalid", body
    assert field in body["message"] and obj["kind"] in body["message"], body["message"]


def sh(name: str, script: str, replicas: int = 1) -> Role:
    return Role(name, image="busybox:1.36", entrypoint="sh", args=["-c", script], num_replicas=replicas,
                resource=Resource(cpu=1, gpu=0, memMB=64))


#: (group, version, plural) of the objects whose status the fake writes, besides pods
STATUS_KINDS = [("batch.volcano.sh", "v1alpha1", "jobs"), ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
                ("kueue.x-k8s.io", "v1beta1", "workloads"), ("workload.codeflare.dev", "v1beta1", "appwrappers")]


def test_every_status_the_server_writes_validates(fake_cluster: Dict[str, Any]) -> None:
    """A few apps' lifetimes on each scheduler (succeeding, failing, cancelled, queued by
    Kueue), their objects read every 50 ms: every distinct status seen validates against the
    vendored CRD (status schema included, unknown fields rejected) or, for pods and Jobs,
    Kubernetes' own schema; and the server's own audit of every status it wrote found none
    invalid."""
    from fakekube.schemas import load_crds

    kv = need("kubernetes_validate")
    crds = load_crds(str(SCHEMAS))
    kube = Kube()
    seen: Dict[Tuple[str, str], Dict[str, Any]] = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for group, version, plural in STATUS_KINDS:
                for obj in kube.list_objects(group, version, plural, "default", ""):
                    seen.setdefault((f"{group}/{version}/{plural}", json.dumps(obj.get("status"), sort_keys=True)), obj)
            for pod in kube.list_pods("default", ""):
                seen.setdefault(("v1/pods", json.dumps(pod.get("status"), sort_keys=True)), pod)
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    runs = [
        (kubernetes_scheduler, {"queue": "default"}, [sh("ok", "echo hi", 2)], AppState.SUCCEEDED),
        (kubernetes_scheduler, {"queue": "default"}, [sh("bad", "exit 3")], AppState.FAILED),
        (kubernetes_jobset_scheduler, {"queue": "user-queue"}, [sh("ok", "echo hi", 2)], AppState.SUCCEEDED),
        (kubernetes_jobset_scheduler, {}, [sh("bad", "exit 3")], AppState.FAILED),
        (kubernetes_jobset_scheduler, {"queue": "user-queue"}, [sh("slow", "sleep 60")], AppState.CANCELLED),
        (kubernetes_mcad_scheduler, {}, [sh("ok", "echo hi", 2)], AppState.SUCCEEDED),
        (kubernetes_mcad_scheduler, {}, [sh("bad", "exit 3")], AppState.FAILED),
    ]
    try:
        for module, cfg, roles, want in runs:
            sched = module.create_scheduler("tx")
            app_id = sched.submit(AppDef("st", roles=roles), cfg)
            if want == AppState.CANCELLED:
                deadline = time.monotonic() + 30
                while sched.describe(app_id).state != AppState.RUNNING and time.monotonic() < deadline:
                    time.sleep(0.1)
                sched.cancel(app_id)
            desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
            assert desc is not None and desc.state == want, (module.__name__, desc)
            time.sleep(0.2)  # the poller sees the final status
    finally:
        stop.set()
        poller.join()
    kinds = {res for res, _ in seen}
    assert kinds == {"v1/pods"} | {f"{g}/{v}/{p}" for g, v, p in STATUS_KINDS}, kinds
    for (res, _), obj in seen.items():
        if res == "v1/pods":
            kv.validate(obj, K8S_VERSION, strict=True)
            continue
        errors = list(crds[res][1].iter_errors(obj))
        assert not errors, f"{res} {obj['metadata']['name']}: {errors[0].message} at {list(errors[0].absolute_path)}"
    invalid = [ln for ln in Path(fake_cluster["log"]).read_text(errors="replace").splitlines()
               if ln.startswith("INVALID STATUS")]
    assert not invalid, invalid


def test_pod_logs_are_one_stream(fake_cluster: Dict[str, Any]) -> None:
    """stdout and stderr in one log, and ``stream`` ignored, as by an API server without the
    alpha feature gate PodLogsQuerySplitStreams."""
    sched = kubernetes_scheduler.create_scheduler("tx")
    app_id = sched.submit(AppDef("logs", roles=[sh("w", "echo out; sleep 0.2; echo err >&2; sleep 0.2; echo out2")]), {"queue": "default"})
    assert sched.wait(app_id, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED
    pod = Kube().list_pods("default", f"volcano.sh/job-name={app_id.split(':')[1]}")[0]["metadata"]["name"]
    for query in ("", "?stream=Stdout", "?stream=Stderr"):
        req = urllib.request.Request(f"{fake_cluster['url']}/api/v1/namespaces/default/pods/{pod}/log{query}",
                                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.read().decode().splitlines() == ["out", "err", "out2"], query


def test_pods_share_no_directory(fake_cluster: Dict[str, Any]) -> None:
    """Each pod runs in a directory of its own (working directory, HOME, TMPDIR): what one
    replica writes there the other does not see."""
    sched = kubernetes_scheduler.create_scheduler("tx")
    script = ('touch "mine-$TX_REPLICA_ID" "$HOME/home-$TX_REPLICA_ID" "$TMPDIR/tmp-$TX_REPLICA_ID"; sleep 1; '
              'for f in * "$HOME"/* "$TMPDIR"/*; do basename "$f"; done | sort -u')
    app_id = sched.submit(AppDef("private", roles=[sh("w", script, 2)]), {"queue": "default"})
    assert sched.wait(app_id, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED
    for k in (0, 1):
        assert list(sched.log_iter(app_id, "w", k)) == [f"home-{k}\n", f"mine-{k}\n", f"tmp-{k}\n"]


def test_pods_have_a_tmp_of_their_own(fake_cluster: Dict[str, Any], tmp_path: Path) -> None:
    """Each pod has a /tmp of its own (fakekube/podfs.py): what one replica writes there its
    peer does not see, nor does the retried replica's new pod, nor the host; a hostPath
    volume is the host's directory at the container's mountPath, shared by all of them."""
    if fake_cluster["no_dns"]:
        from tx.testing.backends import backend_unavailable

        backend_unavailable("kubernetes (pod file systems)", fake_cluster["no_dns"])
    host, mine = tmp_path / "shared", f"mine-{tmp_path.name}-"
    host.mkdir()
    # each attempt writes what it finds in /tmp before and after writing its own file, once
    # its peer's first attempt has written its own; replica 1's first attempt fails
    script = (f'k=$TX_REPLICA_ID; n=$(ls /tmp/shared | grep -c "^seen-$k-"); {{ ls /tmp | grep "^{mine}"; echo --; '
              f'touch "/tmp/{mine}$k"; touch "/tmp/shared/up-$k-$n"; '
              'for i in $(seq 100); do [ -e "/tmp/shared/up-$((1 - k))-0" ] && break; sleep 0.1; done; '
              f'ls /tmp | grep "^{mine}"; }} > "/tmp/shared/seen-$k-$n"; [ "$k$n" != 10 ]')
    role = sh("w", script, 2)
    role.max_retries, role.retry_policy, role.mounts = 1, RetryPolicy.REPLICA, [BindMount(str(host), "/tmp/shared")]
    sched = kubernetes_scheduler.create_scheduler("tx")
    app_id = sched.submit(AppDef("podtmp", roles=[role]), {"queue": "default"})
    assert sched.wait(app_id, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED
    seen = {f.name: f.read_text().split() for f in host.glob("seen-*")}
    assert seen == {f"seen-{k}-{n}": ["--", f"{mine}{k}"] for k, n in ((0, 0), (1, 0), (1, 1))}, seen
    assert not list(Path("/tmp").glob(mine + "*"))


def test_service_names_resolve_to_the_pods_behind_them(fake_cluster: Dict[str, Any]) -> None:
    """As with cluster DNS: in every pod, rank 0's name (``TX_RANK0_HOST``, a host name under
    the job's headless Service) and the Service's name resolve to rank 0's own pod IP, a name
    without a Service does not resolve, each pod has its pod's host name, and its /dev/shm is
    its own (fakekube/podnet.py)."""
    if fake_cluster["no_dns"]:
        from tx.testing.backends import backend_unavailable

        backend_unavailable("kubernetes (pod DNS)", fake_cluster["no_dns"])
    sched = kubernetes_scheduler.create_scheduler("tx")
    # a pod becomes a DNS record once it runs, so a peer may look before it is there: retry
    script = ('for i in $(seq 100); do getent hosts "$TX_RANK0_HOST" >/dev/null && break; sleep 0.1; done; '
              'echo "rank0 $(getent hosts "$TX_RANK0_HOST" | cut -f1 -d" ")"; '
              'echo "svc $(getent hosts "${TX_RANK0_HOST#*.}" | cut -f1 -d" " | sort | tr "\\n" " ")"; '
              'getent hosts "nosuch.${TX_RANK0_HOST#*.}" || echo "nosuch unresolved"; echo "hostname $(hostname)"; '
              'touch "/dev/shm/shm-$TX_REPLICA_ID"; sleep 1; echo "shm $(ls /dev/shm | tr "\\n" " ")"')
    app_id = sched.submit(AppDef("dns", roles=[sh("w", script, 2)]), {"queue": "default"})
    try:
        assert sched.wait(app_id, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED
        pods = Kube().list_pods("default", f"volcano.sh/job-name={app_id.split(':')[1]}")
        ip = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods}
        assert len(set(ip.values())) == 2, ip  # each pod has an address of its own
        rank0 = next(n for n in ip if n.endswith("-0"))
        for k, pod in enumerate(sorted(ip)):
            lines = [ln.rstrip("\n") for ln in sched.log_iter(app_id, "w", k)]
            assert lines == [f"rank0 {ip[rank0]}", f"svc {' '.join(sorted(ip.values()))} ", "nosuch unresolved",
                             f"hostname {pod}", f"shm shm-{k} "], (k, lines)
    finally:
        sched.cancel(app_id)


def test_an_eviction_is_checked_like_any_object(fake_cluster: Dict[str, Any]) -> None:
    """``POST .../pods/NAME/eviction`` (test_k8s_eviction.py evicts running pods): a body
    that is not a policy/v1 Eviction of that pod is 422, a pod that does not exist 404."""
    path = "/api/v1/namespaces/default/pods/{}/eviction"
    good = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "nope", "namespace": "default"}}
    code, body = post(fake_cluster, path.format("nope"), good)
    assert (code, body["reason"]) == (404, "NotFound"), body
    code, body = post(fake_cluster, path.format("nope"), {**good, "deleteOption": {}})
    assert code == 422 and "Additional properties are not allowed ('deleteOption'" in body["message"], body
    code, body = post(fake_cluster, path.format("other"), good)
    assert code == 422 and "must be the pod's name 'other'" in body["message"], body
