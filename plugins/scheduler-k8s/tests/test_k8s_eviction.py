"""An evicted pod is an infrastructure failure on all three Kubernetes schedulers: the fake
API server's Eviction API (``POST .../pods/NAME/eviction``, what ``kubectl drain`` calls)
gives the pod the ``DisruptionTarget`` condition and ends it, as a real cluster does; the
app is retried within ``infra_retries`` without spending ``max_retries``, and ends FAILED
with an infrastructure failure (which failover moves) once they are used up."""
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from k8s_apps import shared
from tx.runner import get_runner
from tx.runner.failover import _infra_failed
from tx.specs import AppDef, AppState, AppStatus, FailureKind, Resource, Role, is_terminal
from tx_scheduler_k8s import kubernetes_jobset_scheduler, kubernetes_mcad_scheduler, kubernetes_scheduler
from tx_scheduler_k8s._pod import LABEL_INSTANCE
from tx_scheduler_k8s.scheduler import KubernetesBase

SMALL = Resource(cpu=1, gpu=0, memMB=64)
#: a pod that takes half a second to stop after SIGTERM, so that it is still there, being
#: deleted, when the test reads it right after the eviction
SLOW_STOP = "trap 'sleep 0.5; exit 143' TERM; "
SCHEDULERS = {
    "kubernetes": (kubernetes_scheduler.create_scheduler, {"queue": "default"}),
    "kubernetes_jobset": (kubernetes_jobset_scheduler.create_scheduler, {}),
    "kubernetes_mcad": (kubernetes_mcad_scheduler.create_scheduler, {}),
}


@pytest.fixture(params=sorted(SCHEDULERS))
def sched(request: pytest.FixtureRequest, fake_cluster: Dict[str, Any]) -> Iterator[Tuple[KubernetesBase, Dict[str, Any]]]:
    factory, cfg = SCHEDULERS[request.param]
    s = factory("tx")
    ids: List[str] = []
    s.submitted = ids  # type: ignore[attr-defined]
    yield s, cfg
    for app_id in ids:
        s.cancel(app_id)
    s.close()


def submit(sched: Tuple[KubernetesBase, Dict[str, Any]], script: str, tmp_path: Path, **cfg: Any) -> str:
    s, base = sched
    role = Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", script], resource=SMALL,
                mounts=shared(tmp_path))
    app_id = s.submit(AppDef("evict", roles=[role]), {**base, **cfg})
    s.submitted.append(app_id)  # type: ignore[attr-defined]
    return app_id


def evict_when(marker: Path, app_id: str) -> str:
    """Evict the app's running pod once it wrote ``marker``, through the Eviction API of
    the kubernetes client (policy/v1 Eviction); the pod's name."""
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the pod never started"
        time.sleep(0.1)
    ns, name = app_id.split(":")
    return evict(ns, f"{LABEL_INSTANCE}={name}")


def evict(ns: str, selector: str) -> str:
    """Evict the running pod ``selector`` selects (policy/v1 Eviction) and check that it
    has the DisruptionTarget condition and is being deleted; the pod's name."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))
    try:
        pod = next(p for p in api.list_namespaced_pod(ns, label_selector=selector).items
                   if p.status.phase == "Running")
        api.create_namespaced_pod_eviction(pod.metadata.name, ns, client.V1Eviction(
            metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=ns)))
        got = api.read_namespaced_pod(pod.metadata.name, ns)
        cond = next(c for c in got.status.conditions if c.type == "DisruptionTarget")
        assert (cond.status, cond.reason) == ("True", "EvictionByEvictionAPI")
        assert got.metadata.deletion_timestamp is not None
        return str(pod.metadata.name)
    finally:
        api.api_client.close()


def wait(s: KubernetesBase, app_id: str) -> Any:
    desc = s.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and is_terminal(desc.state), desc
    return desc


def test_an_evicted_pod_is_retried_without_spending_max_retries(sched: Any, tmp_path: Path) -> None:
    """max_retries=0 (a user's failure would end the app) and infra_retries=1: the
    evicted attempt is retried, and the second one succeeds. kubernetes_mcad has no
    infra_retries (MCAD requeues every failure alike, within one maxNumRequeuings): there
    the eviction spends the requeue of max_retries=1, and MCAD keeps no why."""
    mcad = sched[0].backend == "kubernetes_mcad"
    if mcad:
        assert "infra_retries" not in dict(iter(sched[0].run_opts()))
    marker = tmp_path / "started"
    script = SLOW_STOP + f'if [ -e {marker} ]; then echo second; else echo first; touch {marker}; sleep 60; fi'
    if mcad:
        s, base = sched
        role = Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", script], resource=SMALL,
                    mounts=shared(tmp_path), max_retries=1)
        app_id = s.submit(AppDef("evict", roles=[role]), base)
        s.submitted.append(app_id)
    else:
        app_id = submit(sched, script, tmp_path, infra_retries=1)
    evict_when(marker, app_id)
    desc = wait(sched[0], app_id)
    assert desc.state == AppState.SUCCEEDED, desc
    first = "#0 FAILED (restarted), retried" if mcad else "#0 FAILED (infra: DisruptionTarget), retried"
    assert [a.text for a in desc.attempts] == [first, "#1 SUCCEEDED"]
    assert list(sched[0].log_iter(app_id, "w", 0)) == ["second\n"]


def test_evictions_past_infra_retries_fail_the_app_as_infra(sched: Any, tmp_path: Path) -> None:
    """infra_retries=0: the eviction fails the app, an infrastructure failure that
    failover (tx.runner.failover) moves to the next scheduler."""
    marker = tmp_path / "started"
    cfg = {} if sched[0].backend == "kubernetes_mcad" else {"infra_retries": 0}
    app_id = submit(sched, f"{SLOW_STOP}touch {marker}; sleep 60", tmp_path, **cfg)
    pod = evict_when(marker, app_id)
    desc = wait(sched[0], app_id)
    assert desc.state == AppState.FAILED, desc
    last = desc.attempts[-1]
    assert last.kind == FailureKind.INFRA, desc.attempts
    # the pod's own condition while the pod is there; once it is deleted, what the controller kept
    gone = {"kubernetes": "DisruptionTarget EvictionByEvictionAPI", "kubernetes_jobset": "DisruptionTarget",
            "kubernetes_mcad": f"pod {pod} deleted (evicted, preempted or lost with its node)"}[sched[0].backend]
    assert last.reason in (gone, "DisruptionTarget EvictionByEvictionAPI"), desc.attempts
    status = AppStatus(desc.state, attempts=desc.attempts)
    assert _infra_failed(status) == last.reason
    assert f"    #0 FAILED (infra: {last.reason})\n" in status.format()


def test_a_users_failure_is_theirs(sched: Any, tmp_path: Path) -> None:
    app_id = submit(sched, "echo oops; exit 3", tmp_path)
    desc = wait(sched[0], app_id)
    assert desc.state == AppState.FAILED, desc
    assert [(a.kind, a.reason) for a in desc.attempts] == [(FailureKind.USER, "exit code 3")]
    assert _infra_failed(AppStatus(desc.state, attempts=desc.attempts)) is None


def test_failover_moves_an_app_evicted_past_its_infra_retries(fake_cluster: Dict[str, Any], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Runner.run_with_fallback from kubernetes (infra_retries=0) to local_cwd: the evicted
    Volcano job is an infrastructure failure, so the run moves to local_cwd (as tx run
    --fallback does) and succeeds there; the chain says why it left."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    script = 'if [ -n "$VC_TASK_INDEX" ]; then echo up; exec sleep 60; fi; echo moved'  # only Volcano sets it
    role = Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", script], resource=SMALL)
    with get_runner() as runner:
        handle = runner.run_with_fallback(AppDef("evicted-failover", roles=[role]), [
            ("kubernetes", {"queue": "default", "infra_retries": 0}), ("local_cwd", {})], watch=False)
        deadline = time.monotonic() + 30
        while runner.status(handle).state != AppState.RUNNING:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the Volcano job never ran"
            time.sleep(0.1)
        evict("default", "tx.pytorch.org/app-name=evicted-failover")
        status = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        run = runner.run_status(handle)
        assert run.chain == "kubernetes: FAILED (infra: DisruptionTarget EvictionByEvictionAPI) -> local_cwd: SUCCEEDED", run
        assert run.state == AppState.SUCCEEDED and run.live is not None and run.live.startswith("local_cwd://"), run
