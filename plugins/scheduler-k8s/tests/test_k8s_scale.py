"""The Kubernetes schedulers at scale (issue 40, docs/scale.md): the status of every app
followed in a namespace comes from one label-selected list per kind, shared by the host's
tx processes, counted at the API server (fakekube's ``/fakekube/requests``); the server's
``429 Too Many Requests`` is retried after its ``Retry-After`` and never shows as a failed
app."""
from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tx.schedulers import budget as budget_mod
from tx.schedulers.budget import ThrottledError
from tx.specs import AppDef, AppState, Resource, Role
from tx_scheduler_k8s import _sweep
from tx_scheduler_k8s.kubernetes_scheduler import KubernetesScheduler

NS = "team-a"
CFG = {"queue": "default", "namespace": NS}
LISTS = {"list batch.volcano.sh/v1alpha1/jobs": 1, "list v1/pods": 1, "list batch/v1/jobs": 1}


def _server(cluster: Dict[str, Any], path: str, post: bool = False) -> Dict[str, int]:
    req = urllib.request.Request(f"{cluster['url']}/fakekube/{path}", data=b"" if post else None,
                                 method="POST" if post else "GET")
    return json.loads(urllib.request.urlopen(req, timeout=30).read() or b"{}")


@pytest.fixture
def sched(fake_cluster: Dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubernetesScheduler]:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")  # one fetch a tick: a tick is ended by invalidate()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TXCONFIG", raising=False)
    budget_mod._reset_for_tests()
    s = KubernetesScheduler("tx")
    yield s
    s.close()
    budget_mod._reset_for_tests()


def _app(name: str, script: str = "true") -> AppDef:
    return AppDef(name, [Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", script],
                              resource=Resource(cpu=1, gpu=0, memMB=64))])


def _held_trials(sched: KubernetesScheduler, n: int) -> List[str]:
    """A sweep of ``n`` trials as one suspended Indexed Job (nothing runs: the fake cluster
    holds 1,000 trials without 1,000 processes); its trials' app ids."""
    job, table, why = _sweep.indexed_job([_app("held", f"echo {i}") for i in range(n)], CFG, None, NS,
                                         sched._sweep_template(CFG))
    assert job is not None and table is None, why  # the trial index is a hole of the template: no table
    job["spec"]["suspend"] = True
    sched.kube.create_object(_sweep.GROUP, _sweep.VERSION, _sweep.PLURAL, NS, job)
    return [f"{NS}:{job['metadata']['name']}_{i}" for i in range(n)]


def _tick(sched: KubernetesScheduler, cluster: Dict[str, Any], app_ids: List[str]) -> Dict[str, int]:
    """``describe`` of every app once, from a fresh snapshot: the requests the server saw."""
    sched._plane(NS).invalidate()
    _server(cluster, "requests/reset", post=True)
    for a in app_ids:
        assert sched.describe(a) is not None, a
    return _server(cluster, "requests")


def _wait_done(sched: KubernetesScheduler, app_ids: List[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        sched._plane(NS).invalidate()  # a tick (the snapshot's age is 600 s in these tests)
        states = {a: sched.describe(a).state for a in app_ids}  # type: ignore[union-attr]
        if set(states.values()) == {AppState.SUCCEEDED}:
            return
        assert time.monotonic() < deadline, states
        time.sleep(0.2)


def test_one_list_per_kind_a_tick_however_many_apps(sched: KubernetesScheduler, fake_cluster: Dict[str, Any]) -> None:
    apps = [sched.submit(_app(f"scale{i}"), CFG) for i in range(10)]
    apps = [a.rsplit("/", 1)[1] if "://" in a else a for a in apps]
    few, many = _held_trials(sched, 10), _held_trials(sched, 1000)
    _wait_done(sched, apps)
    timings = {}
    for label, ids in (("10 apps", apps), ("10 trials", few), ("1000 trials", many)):
        start = time.monotonic()
        counts = _tick(sched, fake_cluster, ids)
        timings[label] = time.monotonic() - start
        assert counts == LISTS, (label, counts)
    print(f"k8s tick: {LISTS} each; " + ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()))
    held = sched.describe(many[999])
    assert held is not None and held.state == AppState.PENDING
    # every look asks the API server when nothing is shared (the old cost: a get and a list each)
    sched._plane(NS).invalidate()
    _server(fake_cluster, "requests/reset", post=True)
    import os
    os.environ["TX_STATUS_MAX_AGE"] = "0"
    try:
        for a in apps:
            sched.describe(a)
    finally:
        os.environ["TX_STATUS_MAX_AGE"] = "600"
    assert _server(fake_cluster, "requests").get("list v1/pods") == 10


def test_an_app_created_since_the_snapshot_is_asked_on_its_own(sched: KubernetesScheduler) -> None:
    first = sched.submit(_app("seen"), CFG)
    assert sched.describe(first) is not None
    other = KubernetesScheduler("tx")  # another process's submit: this one's snapshot does not know it
    try:
        later = other.submit(_app("later"), CFG)
    finally:
        other.close()
    assert sched.describe(later) is not None
    assert sched.describe(f"{NS}:no-such-app") is None


def test_429_is_retried_after_retry_after_and_never_a_failed_app(sched: KubernetesScheduler,
                                                                  fake_cluster: Dict[str, Any]) -> None:
    apps = [sched.submit(_app(f"thr{i}"), CFG) for i in range(3)]
    _wait_done(sched, apps)
    sched._plane(NS).invalidate()
    _server(fake_cluster, "throttle?times=2&retryAfter=1", post=True)
    start = time.monotonic()
    states = {a: sched.describe(a).state for a in apps}  # type: ignore[union-attr]
    elapsed = time.monotonic() - start
    assert set(states.values()) == {AppState.SUCCEEDED}, states
    counts = _server(fake_cluster, "requests")
    assert counts.get("throttled") == 2
    assert elapsed >= 2.0, elapsed  # each retry waited the server's Retry-After (1 s)
    # a create is not retried by the client: one line saying so, not a failed app
    _server(fake_cluster, "throttle?times=1&retryAfter=1", post=True)
    with pytest.raises(ThrottledError, match="HTTP 429.*unknown, not failed"):
        sched.submit(_app("thr-create"), CFG)
    _server(fake_cluster, "throttle?times=0", post=True)
