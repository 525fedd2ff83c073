"""Volcano dryruns validated against the published Volcano Job CRD (strict: unknown
fields rejected) and every pod template against Kubernetes' own schema
(kubernetes-validate, strict); plus the mapping rules the module docstring promises."""
import copy
import re
import subprocess
import sys
from typing import Any, Dict

import pytest

from k8s_apps import K8S_VERSION, SCHEMAS, apps, need, role
from tx.plugins import pip_install
from tx.specs import AppDef, InvalidRunConfigException, Resource, Role
from tx_scheduler_k8s.kubernetes_scheduler import create_scheduler, pod_name

CFG = {"queue": "default", "namespace": "team-a", "service_account": "trainer", "priority_class": "high",
       "image_secret": "regcred"}
APPS = apps()


@pytest.fixture(scope="module")
def crds() -> Dict[str, Any]:
    need("jsonschema")
    from fakekube.schemas import load_crds

    return load_crds(str(SCHEMAS / "volcano"))


def check_pod_template(template: Dict[str, Any]) -> None:
    kv = need("kubernetes_validate")
    kv.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template},
                K8S_VERSION, strict=True)


def dryrun(app: AppDef, **cfg: Any) -> Dict[str, Any]:
    return create_scheduler("test").submit_dryrun(app, {**CFG, **cfg}).request.resource


@pytest.mark.parametrize("name", sorted(APPS))
def test_dryrun_validates_against_the_crd_and_pod_schema(name: str, crds: Dict[str, Any]) -> None:
    job = dryrun(APPS[name])
    errors = list(crds["batch.volcano.sh/v1alpha1/jobs"][1].iter_errors(job))
    assert not errors, errors[0].message
    for task in job["spec"]["tasks"]:
        check_pod_template(task["template"])
        pod = pod_name(job["metadata"]["name"], task["name"].rsplit("-", 1)[0], int(task["name"].rsplit("-", 1)[1]))
        assert len(pod) <= 63, pod


def test_the_validators_catch_mistakes(crds: Dict[str, Any]) -> None:
    job = dryrun(APPS["one_role"])
    bad = copy.deepcopy(job)
    bad["spec"]["minAvaliable"] = 1
    assert list(crds["batch.volcano.sh/v1alpha1/jobs"][1].iter_errors(bad))
    bad = copy.deepcopy(job)
    bad["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resource"] = {}
    kv = need("kubernetes_validate")
    with pytest.raises(kv.ValidationError):
        check_pod_template(bad["spec"]["tasks"][0]["template"])


def test_one_task_per_replica_with_rank0_dns_name() -> None:
    job = dryrun(AppDef("ddp", roles=[role("trainer", replicas=3), role("ps", replicas=2)]))
    name = job["metadata"]["name"]
    assert [t["name"] for t in job["spec"]["tasks"]] == ["trainer-0", "trainer-1", "trainer-2", "ps-0", "ps-1"]
    assert job["spec"]["minAvailable"] == 5 and job["spec"]["queue"] == "default"
    assert job["spec"]["plugins"]["svc"] == ["--publish-not-ready-addresses"]
    for task in job["spec"]["tasks"]:
        c = task["template"]["spec"]["containers"][0]
        env = {e["name"]: e["value"] for e in c["env"]}
        k = task["name"].rsplit("-", 1)[1]
        assert env["TX_RANK0_HOST"] == env["TORCHX_RANK0_HOST"] == f"{name}-trainer-0-0.{name}"
        assert env["TX_REPLICA_ID"] == env["TORCHX_REPLICA_IDX"] == k
        assert env["TX_APP_ID"] == name and env["ID"] == name
        assert c["command"][-3:] == [k, "--app", name]
        spec = task["template"]["spec"]
        assert spec["serviceAccountName"] == "trainer" and spec["priorityClassName"] == "high"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}] and spec["restartPolicy"] == "Never"
    assert job["metadata"]["namespace"] == "team-a"


def test_elastic_min_available() -> None:
    job = dryrun(APPS["elastic"])
    assert job["spec"]["minAvailable"] == 3  # 2 of the elastic role + 1 ps
    assert [t.get("minAvailable") for t in job["spec"]["tasks"]] == [1, 1, 0, 0, None]


def test_retry_policies() -> None:
    spec = dryrun(APPS["retries_mixed"])["spec"]
    assert spec["maxRetry"] == 1  # the smallest APPLICATION max_retries: evictions spend them too
    assert {(t["policies"][0]["action"], t["policies"][1]["action"]) for t in spec["tasks"]} == {("RestartJob", "RestartJob")}
    spec = dryrun(APPS["retries_replica"], infra_retries=0)["spec"]
    assert spec["maxRetry"] == 0
    assert all(t["policies"][0]["action"] == "RestartTask" and t["maxRetry"] == 2 for t in spec["tasks"])
    spec = dryrun(APPS["one_role"])["spec"]
    assert spec["maxRetry"] == 3
    assert spec["tasks"][0]["policies"] == [{"event": "PodFailed", "action": "TerminateJob"},
                                            {"event": "PodEvicted", "action": "RestartJob"}]
    spec = dryrun(APPS["one_role"], infra_retries=0)["spec"]
    assert spec["tasks"][0]["policies"][1] == {"event": "PodEvicted", "action": "TerminateJob"}


def test_resources_mounts_and_node_selectors() -> None:
    spec = dryrun(APPS["named_resource"])["spec"]["tasks"][0]["template"]["spec"]
    res = spec["containers"][0]["resources"]
    assert res["limits"] == {"cpu": "96000m", "memory": "1100000Mi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}
    assert res["requests"] == {"cpu": "96000m", "memory": "1100000Mi"}
    assert spec["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    spec = dryrun(APPS["all_mounts"])["spec"]["tasks"][0]["template"]["spec"]
    assert [v.get("hostPath") or v.get("persistentVolumeClaim") or v.get("emptyDir") for v in spec["volumes"]] == [
        {"medium": "Memory"}, {"path": "/a"}, {"claimName": "v", "readOnly": True}, {"path": "/dev/infiniband"}]
    c = spec["containers"][0]
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/dev/shm", "/a", "/v", "/dev/infiniband"]
    assert c["securityContext"] == {"privileged": True}
    ports = dryrun(APPS["ports"])["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"containerPort": 8080, "name": "http"}, {"containerPort": 9090, "name": "metrics-port"},
                     {"containerPort": 7000}]


def test_long_app_name_is_cut_to_fit() -> None:
    job = dryrun(APPS["long_app_name"])
    name = job["metadata"]["name"]
    assert name.startswith("aaaa") and len(pod_name(name, "worker", 11)) == 63


def test_role_names_that_cannot_be_kubernetes_names() -> None:
    with pytest.raises(ValueError, match="at least one letter or digit"):
        dryrun(AppDef("x", roles=[role("__")]))
    with pytest.raises(ValueError, match="too long"):
        dryrun(AppDef("x", roles=[role("r" * 60)]))
    with pytest.raises(ValueError, match="same Kubernetes name"):
        dryrun(AppDef("x", roles=[role("a_b"), role("a.b")]))


@pytest.mark.parametrize("key,value", [("namespace", "Team_A"), ("queue", "Bad Queue"), ("service_account", "x y")])
def test_bad_run_options(key: str, value: str) -> None:
    with pytest.raises(InvalidRunConfigException, match=key):
        dryrun(APPS["one_role"], **{key: value})


def test_dryrun_imports_no_kubernetes_client(tmp_path: Any) -> None:
    code = (
        "import sys; from tx.specs import AppDef, Role, Resource\n"
        "from tx_scheduler_k8s.kubernetes_scheduler import create_scheduler\n"
        "app = AppDef('a', roles=[Role('r', image='i', entrypoint='e', resource=Resource(cpu=1, gpu=0, memMB=1))])\n"
        "str(create_scheduler('s').submit_dryrun(app, {'queue': 'q'}))\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'kubernetes'], 'kubernetes imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, env={"KUBECONFIG": "/nonexistent",
                                                                                   "PATH": "/usr/bin:/bin"})


def test_workspace_needs_the_docker_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tx-scheduler-docker (hidden with ``TX_DISABLE_PLUGINS`` where it is
    installed), a workspace submit fails saying what to install."""
    from tx.plugins import PluginRegistry, set_registry
    from tx.workspace import WorkspaceError

    sched = create_scheduler("test")
    assert sched.workspace_kind == "docker"
    monkeypatch.setenv("TX_DISABLE_PLUGINS", "docker")
    monkeypatch.setenv("TX_NO_CACHE", "1")
    old = set_registry(PluginRegistry())
    try:
        with pytest.raises(WorkspaceError, match=re.escape(pip_install("tx-scheduler-docker"))):
            sched.submit(APPS["one_role"], CFG, workspace="/tmp")
    finally:
        set_registry(old)


def test_dryrun_text_is_the_object_as_yaml() -> None:
    """tx writes the YAML itself (fast); YAML readers get the object back, odd strings too."""
    import yaml

    odd = ["yes", "No", "on", "null", "~", "1.0", "0x1F", "1e3", "a: b", "- x", "#c", "multi\nline", "tab\there",
           "ünï", "'q'", '"dq"', "", " lead", "trail ", "*star", "&a", "!t", "%p", "@at", "`b`", "{x}", "[y]", "x,y", "?"]
    roles = [role(f"role{i}", replicas=2, resource=Resource(cpu=1, gpu=0, memMB=256)) for i in range(20)]
    roles.append(Role("odd", image="i", entrypoint="echo", args=odd, env={o or "E": o for o in odd}))
    info = create_scheduler("test").submit_dryrun(AppDef("big", roles=roles), CFG)
    assert yaml.safe_load(str(info)) == info.request.resource


def test_roles_rebuilt_from_the_job() -> None:
    """describe rebuilds the roles from what the job holds: the same Role back."""
    from tx_scheduler_k8s.kubernetes_scheduler import KubernetesScheduler

    app = APPS["all_mounts"]
    job = dryrun(app)
    (got,) = KubernetesScheduler("t")._roles(job)
    want = app.roles[0]
    for field in ("name", "image", "entrypoint", "args", "env", "num_replicas", "max_retries", "retry_policy",
                  "mounts", "port_map"):
        assert getattr(got, field) == getattr(want, field), field
    assert (got.resource.cpu, got.resource.gpu, got.resource.memMB) == (2, 0, 2048)


def test_replica_errors_name_the_reason() -> None:
    """What ``describe`` says of a failed pod: exit code, signal, the kubelet's reason
    (OOMKilled) or the pod's (Evicted), and the message (pod shapes of the v1 API)."""
    from tx_scheduler_k8s._status import pod_error

    oom = {"metadata": {"name": "p"}, "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {
        "exitCode": 137, "signal": 9, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:00:00Z"}}}]}}
    assert pod_error(oom) == "exit code 137, signal 9, OOMKilled"
    evicted = {"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Evicted",
                                                      "message": "The node was low on resource: memory."}}
    assert pod_error(evicted) == "Evicted, The node was low on resource: memory."


def test_torchx_app_to_resource() -> None:
    from tx_scheduler_k8s.kubernetes_scheduler import app_to_resource

    job = app_to_resource(APPS["one_role"], "gpu-queue", "sa")
    assert job["kind"] == "Job" and job["spec"]["queue"] == "gpu-queue"
    assert job["spec"]["tasks"][0]["template"]["spec"]["serviceAccountName"] == "sa"


@pytest.mark.parametrize("name", ["kubernetes", "kubernetes_jobset", "kubernetes_mcad"])
def test_workspace_kind_is_told_that_nodes_pull_from_a_registry(name: str, tmp_path: Any) -> None:
    """The ``docker`` kind gets ``image_repo_required=True`` (the cluster's nodes pull images
    from a registry), with the user's ``image_repo``."""
    from tx.schedulers import get_scheduler_factories
    from tx.testing import isolated_registry, recording_workspace

    sched = get_scheduler_factories()[name]("test")
    with isolated_registry(), recording_workspace("docker") as calls:
        built = sched.build_workspace(role("w", 1), str(tmp_path), {"image_repo": "reg.example/team/ws"})
    assert built is not None and built.image == "reg.example/team/ws:ws"
    ws, cfg = calls[-1]
    assert ws == str(tmp_path) and cfg["image_repo_required"] is True and cfg["image_repo"] == "reg.example/team/ws"
