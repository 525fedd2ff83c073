"""gcp_batch at scale (issue 40, docs/scale.md): the status of every app followed in a
location comes from one shared snapshot (``list_jobs`` pages, ``list_tasks`` only of the jobs
that changed), counted at the server (``FakeGcp.requests``); Batch's ``429
RESOURCE_EXHAUSTED`` to a read is retried (google-api-core, full jitter) and never shows as a
failed app."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tx.schedulers import budget as budget_mod
from tx.schedulers.budget import ThrottledError
from tx.specs import AppDef, AppState, Role
from tx_scheduler_gcp_batch import _plane
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler

FakeGcp = Any  # fake_gcp.FakeGcp


@pytest.fixture
def sched(fake_gcp: FakeGcp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GcpBatchScheduler]:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")  # one fetch a tick: a tick is ended by invalidate()
    monkeypatch.delenv("TXCONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    budget_mod._reset_for_tests()
    s = create_scheduler("tx")
    yield s
    s.close()
    budget_mod._reset_for_tests()


def _app(name: str) -> AppDef:
    return AppDef(name, roles=[Role("w", image="busybox", entrypoint="sh", args=["-c", "true"])])


def _tick(sched: GcpBatchScheduler, server: FakeGcp, app_ids: List[str], want: AppState) -> Dict[str, int]:
    """``describe`` of every app once from a fresh snapshot: the requests the server saw."""
    sched._plane_of(app_ids[0]).invalidate()
    with server.lock:
        server.requests.clear()
    for a in app_ids:
        desc = sched.describe(a)
        assert desc is not None and desc.state == want, (a, desc)
    with server.lock:
        return dict(server.requests)


def _queued(sched: GcpBatchScheduler, server: FakeGcp, location: str, tag: str, n: int) -> List[str]:
    """``n`` tx jobs (tx's own request) stored QUEUED for good in ``location`` of the server:
    setup, not what is measured (1,000 creates over HTTP take minutes on a loaded host)."""
    req = sched.submit_dryrun(_app(tag), {"location": location}).request
    project = req.parent.split("/")[1]
    ids = []
    for i in range(n):
        server.add_queued(project, location, f"{tag}-{i}", req.job)
        ids.append(f"{project}:{location}:{tag}-{i}")
    return ids


def test_calls_per_tick_do_not_grow_with_the_apps_followed(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    location = f"scale-{int(time.time() * 1000)}"  # a location of this test only
    few = _queued(sched, fake_gcp, location, "few", 10)
    many = _queued(sched, fake_gcp, location, "many", 1000)
    first = _tick(sched, fake_gcp, many, AppState.SUBMITTED)
    # 1,010 jobs: 2 pages of 1,000; the tasks of each job, seen for the first time
    assert first == {"list_jobs": 2, "list_tasks": 1010}, first
    start = time.monotonic()
    steady_many = _tick(sched, fake_gcp, many, AppState.SUBMITTED)
    many_s = time.monotonic() - start
    start = time.monotonic()
    steady_few = _tick(sched, fake_gcp, few, AppState.SUBMITTED)
    few_s = time.monotonic() - start
    assert steady_many == steady_few == {"list_jobs": 2}, (steady_many, steady_few)
    print(f"gcp_batch tick: 10 apps {steady_few} {few_s:.2f} s, 1000 apps {steady_many} {many_s:.2f} s")
    # a job that changed has its tasks asked again, the others not
    sched._batch_client().cancel_job(name=sched._job_name(few[0]))
    changed = _tick(sched, fake_gcp, few[1:], AppState.SUBMITTED)
    assert changed == {"list_jobs": 2, "list_tasks": 1}, changed


def test_throttling_is_retried_and_never_a_failed_app(sched: GcpBatchScheduler, fake_gcp: FakeGcp,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {"location": f"thr-{int(time.time() * 1000)}"}
    apps = [sched.submit(_app(f"thr{i}"), cfg) for i in range(3)]
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "0")  # wait: every look asks
    for a in apps:
        assert sched.wait(a, timeout=60, poll_interval=0.2).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")
    sched._plane_of(apps[0]).invalidate()
    fake_gcp.throttle(2)
    with fake_gcp.lock:
        fake_gcp.requests.clear()
    states = {a: sched.describe(a).state for a in apps}  # type: ignore[union-attr]
    assert set(states.values()) == {AppState.SUCCEEDED}, states
    assert fake_gcp.requests.get("throttled") == 2
    # throttled for longer than tx waits: one line saying the states are unknown
    monkeypatch.setattr(_plane, "RETRY_TIMEOUT_S", 2.0)
    sched._plane_of(apps[0]).invalidate()
    fake_gcp.throttle(10_000)
    try:
        with pytest.raises(ThrottledError, match="unknown, not failed"):
            sched.describe(apps[0])
    finally:
        fake_gcp.throttle(0)
