"""``kubernetes_jobset``: dryruns validated against the JobSet CRD (strict) and Kubernetes'
pod schema; on the fake cluster: Kueue's reasons while pending, retries (per index and of
the whole JobSet), failures and cancel."""
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from k8s_apps import K8S_VERSION, SCHEMAS, apps, need, role
from k8s_apps import shared
from tx.specs import AppDef, AppState, Resource, Role, is_terminal
from tx.testing import find_replica
from tx_scheduler_k8s.kubernetes_jobset_scheduler import (
    KubernetesJobSetScheduler, create_scheduler, pod_host,
)

CFG = {"queue": "user-queue", "namespace": "team-a", "service_account": "trainer", "priority_class": "high",
       "image_secret": "regcred"}
APPS = apps()
SMALL = Resource(cpu=1, gpu=0, memMB=64)


@pytest.fixture(scope="module")
def crds() -> Dict[str, Any]:
    need("jsonschema")
    from fakekube.schemas import load_crds

    return load_crds(str(SCHEMAS / "jobset"))


def dryrun(app: AppDef, **cfg: Any) -> Dict[str, Any]:
    return create_scheduler("test").submit_dryrun(app, {**CFG, **cfg}).request.resource


@pytest.mark.parametrize("name", sorted(APPS))
def test_dryrun_validates_against_the_crd_and_pod_schema(name: str, crds: Dict[str, Any]) -> None:
    kv = need("kubernetes_validate")
    js = dryrun(APPS[name])
    errors = list(crds["jobset.x-k8s.io/v1alpha2/jobsets"][1].iter_errors(js))
    assert not errors, errors[0].message
    app = APPS[name]
    for rj, r in zip(js["spec"]["replicatedJobs"], app.roles):
        job = rj["template"]["spec"]
        kv.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": job}, K8S_VERSION, strict=True)
        assert job["parallelism"] == job["completions"] == r.num_replicas and job["completionMode"] == "Indexed"
        assert len(pod_host(js["metadata"]["name"], rj["name"], r.num_replicas - 1)) <= 63


def test_kueue_label_suspension_network_and_retries() -> None:
    js = dryrun(AppDef("ddp", roles=[role("trainer", replicas=3, max_retries=2), role("ps", replicas=1, max_retries=4,
                                                                                     retry_policy="REPLICA")]))
    name = js["metadata"]["name"]
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue" and js["spec"]["suspend"] is True
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True}
    # the smallest APPLICATION max_retries bounds the user's restarts; evictions restart the
    # JobSet without spending them
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 2, "rules": [
        {"name": "txInfrastructure", "action": "RestartJobSetAndIgnoreMaxRestarts",
         "onJobFailureReasons": ["PodFailurePolicy"]}]}
    trainer, ps = (rj["template"]["spec"] for rj in js["spec"]["replicatedJobs"])
    assert trainer["backoffLimit"] == 0 and ps["backoffLimitPerIndex"] == 4 and ps["maxFailedIndexes"] == 0
    assert trainer["podFailurePolicy"] == ps["podFailurePolicy"] == {"rules": [
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    # no APPLICATION retries: evictions alone restart it, within infra_retries (default 3)
    assert dryrun(APPS["retries_replica"])["spec"]["failurePolicy"] == {"maxRestarts": 3, "rules": [
        {"name": "txInfrastructure", "action": "RestartJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"name": "txUser", "action": "FailJobSet"}]}
    # and no infra_retries: any Job failure fails the JobSet
    assert dryrun(APPS["retries_replica"], infra_retries=0)["spec"]["failurePolicy"] == {"maxRestarts": 0, "rules": [
        {"name": "txInfrastructure", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
        {"name": "txUser", "action": "FailJobSet"}]}
    c = trainer["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert env["TX_RANK0_HOST"] == f"{name}-trainer-0-0.{name}"
    assert env["TX_REPLICA_ID"] == {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert c["command"][3:5] == ["--rank", "$(TX_REPLICA_ID)"]  # "--rank ${replica_id}": expanded by Kubernetes
    no_queue = dryrun(APPS["one_role"], queue=None)
    assert "suspend" not in no_queue["spec"] and "kueue.x-k8s.io/queue-name" not in no_queue["metadata"]["labels"]


@pytest.fixture
def sched(fake_cluster: Dict[str, Any]) -> Iterator[KubernetesJobSetScheduler]:
    s = create_scheduler("tx")
    s.submitted = []  # type: ignore[attr-defined]
    yield s
    for app_id in s.submitted:  # type: ignore[attr-defined]
        s.cancel(app_id)


def submit(sched: KubernetesJobSetScheduler, *roles: Role, **cfg: Any) -> str:
    app_id = sched.submit(AppDef("js", roles=list(roles)), {"queue": "user-queue", **cfg})
    sched.submitted.append(app_id)  # type: ignore[attr-defined]
    return app_id


def sh(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
    kw.setdefault("resource", SMALL)
    return Role(name, image="busybox:1.36", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)


def wait(sched: KubernetesJobSetScheduler, app_id: str) -> Any:
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and is_terminal(desc.state), desc
    return desc


def wait_msg(sched: KubernetesJobSetScheduler, app_id: str, needle: str) -> Any:
    deadline = time.monotonic() + 30
    while True:
        desc = sched.describe(app_id)
        if needle in desc.msg or time.monotonic() > deadline:
            return desc
        time.sleep(0.2)


def test_pending_in_kueue_says_why(sched: KubernetesJobSetScheduler) -> None:
    app_id = submit(sched, sh("trainer", "echo never", 2, resource=Resource(cpu=1, gpu=4, memMB=64)))
    desc = wait_msg(sched, app_id, "insufficient")
    assert desc.state == AppState.PENDING
    assert "waiting for Kueue to admit it to queue 'user-queue'" in desc.msg, desc.msg
    assert "insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed" in desc.msg, desc.msg
    sched.cancel(app_id)
    assert wait(sched, app_id).state == AppState.CANCELLED


def test_kueue_admits_by_cluster_queue_quota(sched: KubernetesJobSetScheduler) -> None:
    """The ClusterQueue's nominal quota (16 cpu, conftest.py) decides, not the free nodes
    (2 x 64 cpu): 20 cpu wait although they fit the nodes; of two apps of 10 cpu the second
    waits for the first's quota and runs when the first ends."""
    big = Resource(cpu=10, gpu=0, memMB=64)
    too_big = submit(sched, sh("trainer", "echo never", 2, resource=big))
    desc = wait_msg(sched, too_big, "insufficient")
    assert desc.state == AppState.PENDING, desc
    assert "insufficient unused quota for cpu in flavor default-flavor, 4 more needed" in desc.msg, desc.msg
    sched.cancel(too_big)
    first = submit(sched, sh("trainer", "sleep 3", 1, resource=big))
    deadline = time.monotonic() + 30
    while sched.describe(first).state != AppState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
    second = submit(sched, sh("trainer", "echo second", 1, resource=big))
    desc = wait_msg(sched, second, "insufficient")
    assert desc.state == AppState.PENDING and "for cpu in flavor default-flavor, 4 more needed" in desc.msg, desc.msg
    assert wait(sched, first).state == AppState.SUCCEEDED
    assert wait(sched, second).state == AppState.SUCCEEDED


def test_unknown_local_queue(sched: KubernetesJobSetScheduler) -> None:
    app_id = submit(sched, sh("trainer", "echo never"), queue="no-such-queue")
    desc = wait_msg(sched, app_id, "doesn't exist")
    assert desc.state == AppState.PENDING and "LocalQueue no-such-queue doesn't exist" in desc.msg, desc.msg


def test_replica_retry_reruns_only_that_index(sched: KubernetesJobSetScheduler, tmp_path: Path) -> None:
    marker = tmp_path / "once"
    script = (f'if [ "$TX_REPLICA_ID" = 1 ] && [ ! -e {marker} ]; then touch {marker}; printf "failed \\377\\n"; exit 5; fi; '
              'echo done ${replica_id}')
    app_id = submit(sched, sh("w", script, 2, max_retries=1, retry_policy="REPLICA", mounts=shared(tmp_path)))
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    assert desc.num_restarts == 0
    # the failed attempt's pod stays (a new pod retries the index): its log comes first
    assert b"".join(sched.log_iter_blocks(app_id, "w", 1)) == b"failed \xff\ndone 1\n"
    assert list(sched.log_iter(app_id, "w", 1)) == ["failed \ufffd\n", "done 1\n"]
    assert list(sched.log_iter(app_id, "w", 0)) == ["done 0\n"]


def test_application_retry_restarts_the_jobset(sched: KubernetesJobSetScheduler, tmp_path: Path) -> None:
    marker = tmp_path / "once"
    script = f'if [ -e {marker} ]; then echo second; else touch {marker}; exit 1; fi'
    app_id = submit(sched, sh("w", script, 2, max_retries=1, mounts=shared(tmp_path)))
    desc = wait(sched, app_id)
    assert desc.state == AppState.SUCCEEDED and desc.num_restarts == 1, desc


def test_failure_says_which_replica(sched: KubernetesJobSetScheduler) -> None:
    script = 'if [ "$TX_REPLICA_ID" = 1 ]; then echo "bad input" >&2; exit 4; fi; sleep 20'
    app_id = submit(sched, sh("worker", script, 2), queue=None)
    desc = wait(sched, app_id)
    assert desc.state == AppState.FAILED
    assert desc.structured_error_msg.startswith("worker/1 (pod "), desc.structured_error_msg
    assert "exit code 4" in desc.structured_error_msg and "bad input" in desc.structured_error_msg
    assert find_replica(desc, "worker", 1).exit_code == 4
    roles: List[Role] = desc.roles
    assert roles[0].name == "worker" and roles[0].num_replicas == 2


def test_dollar_signs_reach_the_program_as_written(sched: KubernetesJobSetScheduler) -> None:
    """Kubernetes expands ``$(VAR)`` and reads ``$$`` as ``$`` in a container's command and
    env values: a role's ``$$`` (the shell's pid) or ``$(NAME)`` reaches the program as
    written, while the ``$(TX_REPLICA_ID)`` the JobSet puts for ``${replica_id}`` is
    expanded (found by tests/test_portability.py: ``kill -9 $$`` arrived as ``kill -9 $``)."""
    script = 'echo \'$(TX_ROLE_NAME)\' "[$X]" ${replica_id}; [ "$$$$" -gt 1 ] && echo "a pid"'
    app_id = submit(sched, sh("w", script, 2, env={"X": "$(TX_ROLE_NAME)-$$$$"}))
    assert wait(sched, app_id).state == AppState.SUCCEEDED
    for k in (0, 1):
        assert list(sched.log_iter(app_id, "w", k)) == [f"$(TX_ROLE_NAME) [$(TX_ROLE_NAME)-$$] {k}\n", "a pid\n"]
