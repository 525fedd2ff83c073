"""``kubernetes_mcad``: dryruns of both API groups validated against their AppWrapper CRDs
(strict) and every generic item against Kubernetes' own schema; on the fake cluster: why an
app waits, requeuing retries, failures, cancel (deletes) and a fresh ``tx`` process."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from k8s_apps import K8S_VERSION, SCHEMAS, apps, need, role
from k8s_apps import shared
from tx.specs import AppDef, AppState, InvalidRunConfigException, Resource, Role, is_terminal
from tx.testing import find_replica
from tx_scheduler_k8s.kubernetes_mcad_scheduler import GROUPS, KubernetesMCADScheduler, create_scheduler

CFG = {"namespace": "team-a", "service_account": "trainer", "priority_class_name": "high", "image_secret": "regcred",
       "priority": 5, "coscheduler_name": "scheduler-plugins-scheduler", "network": "roce-net"}
APPS = apps()
SMALL = Resource(cpu=1, gpu=0, memMB=64)


@pytest.fixture(scope="module")
def crds() -> Dict[str, Any]:
    need("jsonschema")
    from fakekube.schemas import load_crds

    return load_crds(str(SCHEMAS / "mcad"))


def dryrun(app: AppDef, **cfg: Any) -> Dict[str, Any]:
    return create_scheduler("test").submit_dryrun(app, {**CFG, **cfg}).request.resource


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("name", sorted(APPS))
def test_dryrun_validates_against_the_crd_and_item_schemas(name: str, group: str, crds: Dict[str, Any]) -> None:
    kv = need("kubernetes_validate")
    aw = dryrun(APPS[name], api_group=group)
    assert aw["apiVersion"] == f"{group}/v1beta1"
    errors = list(crds[f"{group}/v1beta1/appwrappers"][1].iter_errors(aw))
    assert not errors, errors[0].message
    names = [aw["metadata"]["name"]]
    for item in aw["spec"]["resources"]["GenericItems"]:
        t = item["generictemplate"]
        names.append(t["metadata"]["name"])
        if t["kind"] in ("Pod", "Service"):
            kv.validate(t, K8S_VERSION, strict=True)
        if t["kind"] == "Pod":
            assert t["metadata"]["labels"][f"appwrapper.{group}"] == aw["metadata"]["name"]
    assert max(len(n) for n in names) <= 63, max(names, key=len)


def test_items_requeuing_and_podgroups() -> None:
    aw = dryrun(AppDef("ddp", roles=[role("trainer", replicas=3, max_retries=3), role("ps", replicas=1, max_retries=2,
                                                                                     port_map={"rdzv": 29600})]))
    name = aw["metadata"]["name"]
    kinds = [i["generictemplate"]["kind"] for i in aw["spec"]["resources"]["GenericItems"]]
    assert kinds == ["PodGroup", "Pod", "Pod", "Pod", "PodGroup", "Pod", "Service"]
    pg = aw["spec"]["resources"]["GenericItems"][0]["generictemplate"]
    assert pg["metadata"]["name"] == f"{name}-pg0" and pg["spec"] == {"minMember": 3}
    pod = aw["spec"]["resources"]["GenericItems"][2]["generictemplate"]
    assert pod["metadata"]["name"] == f"{name}-trainer-1" and pod["spec"]["subdomain"] == name
    assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == f"{name}-pg0"
    assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "roce-net"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["TX_RANK0_HOST"] == f"{name}-trainer-0.{name}" and env["TX_REPLICA_ID"] == "1"
    assert aw["spec"]["schedulingSpec"] == {"minAvailable": 4, "requeuing": {
        "timeInSeconds": 300, "maxTimeInSeconds": 0, "growthType": "exponential", "maxNumRequeuings": 2}}
    svc = aw["spec"]["resources"]["GenericItems"][-1]["generictemplate"]
    assert svc["metadata"]["name"] == name and svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"][0]["port"] == 29600 and aw["spec"]["priority"] == 5
    with pytest.raises(InvalidRunConfigException, match="api_group"):
        dryrun(APPS["one_role"], api_group="example.com")


@pytest.fixture
def sched(fake_cluster: Dict[str, Any]) -> Iterator[KubernetesMCADScheduler]:
    s = create_scheduler("tx")
    s.submitted = []  # type: ignore[attr-defined]
    yield s
    for app_id in s.submitted:  # type: ignore[attr-defined]
        s.cancel(app_id)


def sh(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
    kw.setdefault("resource", SMALL)
    return Role(name, image="busybox:1.36", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)


def submit(sched: KubernetesMCADScheduler, *roles: Role, **cfg: Any) -> str:
    app_id = sched.submit(AppDef("aw", roles=list(roles)), cfg)
    sched.submitted.append(app_id)  # type: ignore[attr-defined]
    return app_id


def wait(sched: KubernetesMCADScheduler, app_id: str) -> Any:
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and is_terminal(desc.state), desc
    return desc


@pytest.mark.parametrize("group", GROUPS)
def test_runs_in_both_api_groups(sched: KubernetesMCADScheduler, group: str) -> None:
    app_id = submit(sched, sh("a", "echo a ${replica_id}", 2), sh("b", "echo b"), api_group=group)
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert list(sched.log_iter(app_id, "a", 1)) == ["a 1\n"]
    assert app_id in [a.app_id for a in sched.list()]
    assert [r.name for r in desc.roles] == ["a", "b"]


def test_pending_says_why(sched: KubernetesMCADScheduler) -> None:
    app_id = submit(sched, sh("t", "echo never", 2, resource=Resource(cpu=1, gpu=8, memMB=64)))
    deadline = time.monotonic() + 30
    while "Insufficient" not in (desc := sched.describe(app_id)).msg and time.monotonic() < deadline:
        time.sleep(0.2)
    assert desc.state == AppState.PENDING
    assert "Insufficient resources to dispatch AppWrapper: nvidia.com/gpu (requested 16, free 0)" in desc.msg, desc.msg


def test_requeuing_retries_the_app(sched: KubernetesMCADScheduler, tmp_path: Path) -> None:
    marker = tmp_path / "once"
    script = f'if [ -e {marker} ]; then echo second; else touch {marker}; exit 1; fi'
    app_id = submit(sched, sh("w", script, 2, max_retries=1, mounts=shared(tmp_path)))
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED and desc.num_restarts == 1, desc


def test_failure_and_cancel(sched: KubernetesMCADScheduler) -> None:
    app_id = submit(sched, sh("w", 'if [ "$TX_REPLICA_ID" = 0 ]; then echo bye >&2; exit 9; fi; sleep 30', 2))
    desc = wait(sched, app_id)
    assert desc.state == AppState.FAILED
    assert desc.structured_error_msg.startswith("w/0 (pod ") and "exit code 9" in desc.structured_error_msg
    assert find_replica(desc, "w", 0).exit_code == 9
    sleeper = submit(sched, sh("s", "sleep 600"))
    while sched.describe(sleeper).state != AppState.RUNNING:
        time.sleep(0.2)
    sched.cancel(sleeper)
    assert sched.describe(sleeper) is None  # MCAD: cancel deletes the AppWrapper
    assert sched.kube.list_pods("default", f"app.kubernetes.io/instance={sleeper.split(':')[1]}") == []
    sched.cancel(sleeper)  # idempotent


def test_a_fresh_process_sees_the_app(sched: KubernetesMCADScheduler, tmp_path: Path) -> None:
    app_id = submit(sched, sh("w", "echo hello ${replica_id}", 2))
    assert wait(sched, app_id).state == AppState.SUCCEEDED
    handle = f"kubernetes_mcad://tx/{app_id}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    env["HOME"] = str(tmp_path)
    tx = str(Path(sys.executable).parent / "tx")
    p = subprocess.run([tx, "status", handle], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "SUCCEEDED" in p.stdout, p.stdout + p.stderr
    p = subprocess.run([tx, "log", f"{handle}/w/1"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and re.search(r"hello 1", p.stdout), p.stdout + p.stderr


def test_list_reads_the_pods(sched: KubernetesMCADScheduler) -> None:
    """MCAD leaves a finished app Running: list() reads its pods, as describe does."""
    app_id = submit(sched, sh("w", "true"))
    assert wait(sched, app_id).state == AppState.SUCCEEDED
    (listed,) = [a for a in sched.list() if a.app_id == app_id]
    assert listed.state == AppState.SUCCEEDED


def test_a_fresh_process_lists_and_cancels(sched: KubernetesMCADScheduler, tmp_path: Path) -> None:
    sleeper = submit(sched, sh("s", "sleep 600"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    env["HOME"] = str(tmp_path)
    tx = str(Path(sys.executable).parent / "tx")
    p = subprocess.run([tx, "list", "-s", "kubernetes_mcad"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and sleeper in p.stdout, p.stdout + p.stderr
    p = subprocess.run([tx, "cancel", f"kubernetes_mcad://tx/{sleeper}"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert sched.describe(sleeper) is None
