"""aws_batch at scale (issue 40, docs/scale.md): the status of many followed apps comes from
one shared snapshot per job queue (ListJobs, DescribeJobs by 100), counted at the backend:
moto's own request recorder (``/moto-api/recorder``) of a server this module starts. And
AWS's throttling answers are retried by botocore (jittered backoff) and never show as a
failed app (counted by the fault proxy in front of moto)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from tx.schedulers import budget as budget_mod
from tx.schedulers.budget import ThrottledError
from tx.specs import AppDef, AppState, Resource, Role
from tx_scheduler_aws_batch import _plane
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler
from tx_scheduler_aws_batch.testing import Moto, batch_calls, make_queue, moto_api, start_moto

FaultProxy = Any  # the fault_proxy fixture's type, of conftest.py


@pytest.fixture(scope="module")
def moto_rec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """A moto_server of this module whose request recorder is on (its file in a temp dir)."""
    d = tmp_path_factory.mktemp("moto-rec")
    endpoint, svc = start_moto(d / "moto.log", env={"MOTO_RECORDER_FILEPATH": str(d / "recording")})
    try:
        yield make_queue(endpoint, svc, "scale")
    finally:
        svc.stop()


@pytest.fixture
def rec_env(moto_rec: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    for var in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL_BATCH", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS",
                "AWS_RETRY_MODE", "TXCONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for k, v in moto_rec.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    budget_mod._reset_for_tests()
    moto_api(moto_rec, "recorder/start-recording")
    yield moto_rec
    moto_api(moto_rec, "recorder/stop-recording")
    budget_mod._reset_for_tests()


def _submit_many(sched: AwsBatchScheduler, m: Moto, n: int, tag: str) -> List[str]:
    """``n`` tx apps in ``m``'s queue: tx's own request (job definition, tags, parameters),
    submitted straight to Batch with boto3 (setup, not what is measured)."""
    app = AppDef(tag, roles=[Role("r", image="alpine", entrypoint="echo", args=["hi"],
                                  resource=Resource(cpu=1, gpu=0, memMB=128))])
    req = sched.submit_dryrun(app, {"queue": m.queue}).request
    batch = m.client("batch")
    arn = batch.register_job_definition(**req.job_def)["jobDefinitionArn"]
    ids = []
    for i in range(n):
        name = f"{tag}-{i}"
        batch.submit_job(**{**req.submit, "jobName": name, "jobDefinition": arn})
        ids.append(f"{m.queue}:{name}")
    return ids


def _tick(sched: AwsBatchScheduler, m: Moto, app_ids: List[str]) -> Dict[str, int]:
    """One tick of a follower of ``app_ids`` (``describe`` of each, a snapshot older than the
    plane's age): the Batch calls moto saw. Every app must be SUCCEEDED (moto's simple mode)."""
    _plane.plane(m.queue).invalidate()
    moto_api(m, "recorder/reset-recording")
    for a in app_ids:
        desc = sched.describe(a)
        assert desc is not None and desc.state == AppState.SUCCEEDED, (a, desc)
    return batch_calls(m)


def test_calls_per_tick_do_not_grow_with_the_apps_followed(rec_env: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")  # one fetch a tick: a tick is ended by invalidate()
    sched = create_scheduler("tx")
    few = _submit_many(sched, rec_env, 10, "few")
    many = _submit_many(sched, rec_env, 1000, "many")
    # the queue holds 1,010 multi-node jobs: 11 DescribeJobs by 100 of them, 11 of their node jobs
    first_many = _tick(sched, rec_env, many)
    assert first_many == {"listjobs": 1, "describejobs": 22}, first_many
    start = time.monotonic()
    steady_many = _tick(sched, rec_env, many)  # ended jobs are not asked again
    many_s = time.monotonic() - start
    start = time.monotonic()
    steady_few = _tick(sched, rec_env, few)
    few_s = time.monotonic() - start
    assert steady_many == steady_few == {"listjobs": 1}, (steady_many, steady_few)
    print(f"aws_batch tick: 10 apps {steady_few} {few_s:.2f} s, 1000 apps {steady_many} {many_s:.2f} s")
    # without sharing (every look asks), each look lists the queue (ended jobs still not described)
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "0")
    assert _tick(sched, rec_env, few) == {"listjobs": 10}


def test_a_new_app_is_seen_and_a_cancel_is_not_hidden(rec_env: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")
    sched = create_scheduler("tx")
    first = _submit_many(sched, rec_env, 3, "seen")
    assert all(sched.describe(a).state == AppState.SUCCEEDED for a in first)  # type: ignore[union-attr]
    later = _submit_many(sched, rec_env, 1, "later")  # not through tx: the snapshot does not know it
    desc = sched.describe(later[0])
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert sched.describe(f"{rec_env.queue}:no-such-job") is None


def test_throttling_is_retried_and_never_a_failed_app(fault_proxy: FaultProxy, aws_simple: Moto, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "600")
    monkeypatch.chdir(tmp_path)
    budget_mod._reset_for_tests()
    sched = create_scheduler("tx")
    apps = _submit_many(sched, aws_simple, 20, f"thr{int(time.time() * 1000)}")
    for code in ("ThrottlingException", "TooManyRequestsException"):
        _plane.plane(aws_simple.queue).invalidate()
        fault_proxy.fail(code, 400, times=2)  # the next two requests are throttled
        before = fault_proxy.injected
        states = {a: sched.describe(a).state for a in apps}  # type: ignore[union-attr]
        assert set(states.values()) == {AppState.SUCCEEDED}, states
        assert fault_proxy.injected - before == 2
    # throttled beyond botocore's attempts: an error saying the state is unknown, no app state
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    sched = create_scheduler("tx")
    _plane.plane(aws_simple.queue).invalidate()
    fault_proxy.fail("ThrottlingException", 400, times=-1)
    with pytest.raises(ThrottledError, match="unknown, not failed"):
        sched.describe(apps[0])
    fault_proxy.fail("", 400, times=0)
    budget_mod._reset_for_tests()
