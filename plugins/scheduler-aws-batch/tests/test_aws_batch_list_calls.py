"""aws_batch's ``list`` (the failover watcher's tick, ``tx list``) counted at the backend:
moto's own request recorder (``/moto-api/recorder``) of private servers this module starts.

A job's identity (its tags, name, array size) is read once per job id (``DescribeJobs`` by
100) and kept (:mod:`tx_scheduler_aws_batch._list`); its state comes from ``ListJobs`` every
time. So a second list of the same jobs makes no ``DescribeJobs``, a job submitted in between
is described once, a state that changed is seen, and a job without tx's tags is never listed.
Every answer is checked against Batch's own (``ListJobs``/``DescribeJobs`` read by the test),
never against timings.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from tx.schedulers import budget as budget_mod
from tx.specs import AppDef, AppState, Resource, Role
from tx_scheduler_aws_batch import _list
from tx_scheduler_aws_batch._states import appstate_from_batch
from tx_scheduler_aws_batch._array import make_trial_id
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler
from tx_scheduler_aws_batch.testing import Moto, batch_calls, make_queue, moto_api, start_moto

#: statuses a job never leaves
_ENDED = ("SUCCEEDED", "FAILED")


def _server(tmp_path_factory: pytest.TempPathFactory, tag: str, docker: bool) -> Iterator[Moto]:
    d = tmp_path_factory.mktemp(f"moto-{tag}")
    # Docker mode without an engine: no container ever starts (a job that gets that far fails)
    env = {"MOTO_RECORDER_FILEPATH": str(d / "recording"), "DOCKER_HOST": f"unix://{d}/no-engine.sock"}
    endpoint, svc = start_moto(d / "moto.log", env=env, use_docker=docker)
    try:
        yield make_queue(endpoint, svc, tag)
    finally:
        svc.stop()


@pytest.fixture(scope="module")
def moto_held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """Docker mode whose job state transitions are manual and not taken until the test
    says so: jobs stay SUBMITTED (tx: PENDING)."""
    yield from _server(tmp_path_factory, "held", docker=True)


@pytest.fixture(scope="module")
def moto_ended(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """Simple mode: jobs (an array's children too) have SUCCEEDED when SubmitJob returns."""
    yield from _server(tmp_path_factory, "ended", docker=False)


def _env(m: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Moto:
    for var in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL_BATCH", "AWS_SESSION_TOKEN", "AWS_MAX_ATTEMPTS",
                "AWS_RETRY_MODE", "TXCONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for k, v in m.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    budget_mod._reset_for_tests()
    moto_api(m, "recorder/start-recording")
    return m


@pytest.fixture
def held(moto_held: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    moto_api(moto_held, "state-manager/set-transition",
              {"model_name": "batch::job", "transition": {"progression": "manual", "times": 10 ** 9}})
    yield _env(moto_held, monkeypatch, tmp_path)
    moto_api(moto_held, "recorder/stop-recording")
    budget_mod._reset_for_tests()


@pytest.fixture
def ended(moto_ended: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    yield _env(moto_ended, monkeypatch, tmp_path)
    moto_api(moto_ended, "recorder/stop-recording")
    budget_mod._reset_for_tests()


def _app(tag: str) -> AppDef:
    return AppDef(tag, roles=[Role("r", image="alpine", entrypoint="echo", args=["hi"],
                                   resource=Resource(cpu=1, gpu=0, memMB=128))])


def _submit(sched: AwsBatchScheduler, m: Moto, names: List[str], tag: str) -> List[str]:
    """Jobs named ``names`` in ``m``'s queue with tx's request (job definition, tags,
    parameters), submitted straight to Batch with boto3 (setup, not what is counted)."""
    req = sched.submit_dryrun(_app(tag), {"queue": m.queue}).request
    batch = m.client("batch")
    arn = batch.register_job_definition(**req.job_def)["jobDefinitionArn"]
    for name in names:
        batch.submit_job(**{**req.submit, "jobName": name, "jobDefinition": arn})
    return [f"{m.queue}:{name}" for name in names]


def _submit_foreign(m: Moto, name: str, **extra: Any) -> str:
    """A job without tx's tags (another tool's) in ``m``'s queue; its job id."""
    batch = m.client("batch")
    jd = batch.register_job_definition(jobDefinitionName="not-tx", type="container", containerProperties={
        "image": "x", "command": ["true"],
        "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "64"}]})
    return str(batch.submit_job(jobName=name, jobQueue=m.queue, jobDefinition=jd["jobDefinitionArn"], **extra)["jobId"])


def _truth(m: Moto) -> Dict[str, Tuple[str, AppState]]:
    """Batch's own answer, read by the test: ``<queue>:<name>`` (and ``<queue>:<array
    name>:<i>`` for an array's children) -> (Batch status, tx state), for the jobs tagged by
    tx; the others' names under the key ``"foreign"``."""
    batch = m.client("batch")
    jobs = [j for page in batch.get_paginator("list_jobs").paginate(
        jobQueue=m.queue, filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}])
        for j in page["jobSummaryList"] if ":" not in j["jobId"]]
    out: Dict[str, Any] = {"foreign": set()}
    ids = [j["jobId"] for j in jobs]
    for i in range(0, len(ids), 100):
        for job in batch.describe_jobs(jobs=ids[i:i + 100])["jobs"]:
            if "tx/version" not in (job.get("tags") or {}):
                out["foreign"].add(job["jobName"])
                continue
            size = (job.get("arrayProperties") or {}).get("size")
            if not size:
                out[f"{m.queue}:{job['jobName']}"] = (job["status"], appstate_from_batch(
                    job["status"], job.get("statusReason", "")))
                continue
            children = batch.describe_jobs(jobs=[f"{job['jobId']}:{k}" for k in range(size)])["jobs"]
            for c in children:
                out[make_trial_id(m.queue, job["jobName"], int(c["jobId"].rpartition(":")[2]))] = (
                    c["status"], appstate_from_batch(c["status"], c.get("statusReason", "")))
    return out


def _listed(sched: AwsBatchScheduler, m: Moto) -> Tuple[Dict[str, AppState], Dict[str, int]]:
    """One ``list``: its answer (app id -> state; every name checked) and the calls moto saw."""
    moto_api(m, "recorder/reset-recording")
    listed = sched.list()
    calls = batch_calls(m)
    assert len({a.app_id for a in listed}) == len(listed), "an app listed twice"
    for a in listed:
        assert a.name == a.app_id.split(":")[1], a
    return {a.app_id: a.state for a in listed}, calls


def _check(listed: Dict[str, AppState], truth: Dict[str, Any]) -> None:
    expected = {k: v[1] for k, v in truth.items() if k != "foreign"}
    assert listed == expected
    assert not [a for a in listed if a.split(":")[1] in truth["foreign"]]


def test_a_second_list_describes_nothing_a_new_job_once_and_sees_state_changes(
        held: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    n = 150
    sched = create_scheduler("tx")
    apps = _submit(sched, held, [f"held-{i}" for i in range(n)], "held")
    _submit_foreign(held, "not-tx-1")
    truth = _truth(held)
    assert {truth[a] for a in apps} == {("SUBMITTED", AppState.PENDING)}
    _list._forget()  # a fresh process: knows no job yet (its state dir is this test's)

    first, calls = _listed(sched, held)
    _check(first, truth)
    # 151 jobs: 2 DescribeJobs by 100 to read their tags, once
    assert calls == {"describejobqueues": 1, "listjobs": 1, "describejobs": 2}, calls
    second, calls = _listed(create_scheduler("tx"), held)  # another scheduler of the same process
    assert second == first
    assert calls == {"describejobqueues": 1, "listjobs": 1}, calls

    # another process (the same state dir) reads what this one learnt: no DescribeJobs either
    _list._forget()
    third, calls = _listed(create_scheduler("tx"), held)
    assert third == first and calls == {"describejobqueues": 1, "listjobs": 1}, calls

    # a job submitted in between is described once; another tool's job never listed
    apps += _submit(sched, held, ["held-new"], "held")
    _submit_foreign(held, "not-tx-2")
    truth = _truth(held)
    fourth, calls = _listed(sched, held)
    _check(fourth, truth)
    assert set(fourth) == set(first) | {f"{held.queue}:held-new"}
    assert calls == {"describejobqueues": 1, "listjobs": 1, "describejobs": 1}, calls
    _, calls = _listed(sched, held)
    assert calls == {"describejobqueues": 1, "listjobs": 1}, calls

    # states change (moto's transitions taken: each job advances, then fails without an
    # engine); one was cancelled by tx first (TerminateJob: FAILED with tx's reason)
    sched.cancel(apps[0])
    moto_api(held, "state-manager/set-transition",
              {"model_name": "batch::job", "transition": {"progression": "manual", "times": 1}})
    deadline = time.monotonic() + 120
    while True:
        truth = _truth(held)
        if all(truth[a][0] in _ENDED for a in apps) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert truth[apps[0]][1] == AppState.CANCELLED and {truth[a][1] for a in apps[1:]} == {AppState.FAILED}, truth
    fifth, calls = _listed(sched, held)
    _check(fifth, truth)
    assert calls == {"describejobqueues": 1, "listjobs": 1}, calls


def test_an_ended_arrays_children_are_described_once(ended: Moto, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    sched = create_scheduler("tx")
    req = sched.submit_dryrun(_app("arr"), {"queue": ended.queue}).request
    batch = ended.client("batch")
    jd = batch.register_job_definition(jobDefinitionName="tx-arr", type="container", containerProperties={
        "image": "x", "command": ["true"],
        "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "64"}]})
    batch.submit_job(jobName="arr-1", jobQueue=ended.queue, jobDefinition=jd["jobDefinitionArn"],
                     arrayProperties={"size": 150}, tags=req.submit["tags"])
    _submit(sched, ended, ["plain-1"], "arr")
    _submit_foreign(ended, "not-tx-arr", arrayProperties={"size": 3})
    truth = _truth(ended)
    assert len([k for k in truth if k.startswith(f"{ended.queue}:arr-1:")]) == 150
    _list._forget()

    first, calls = _listed(sched, ended)
    _check(first, truth)
    # the 3 jobs (tags), then the tx array's 150 children by 100 (the foreign array's not)
    assert calls == {"describejobqueues": 1, "listjobs": 1, "describejobs": 3}, calls
    # the array has ended (SUCCEEDED, final) and so have its children: not described again
    second, calls = _listed(sched, ended)
    assert second == first
    assert calls == {"describejobqueues": 1, "listjobs": 1}, calls


def test_the_shared_file_is_bounded(held: Moto, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sched = create_scheduler("tx")
    _submit(sched, held, [f"bound-{i}" for i in range(5)], "bound")
    total = len(_truth(held)) - 1 + len(_truth(held)["foreign"])  # the jobs in the queue (no array here)
    _list._forget()
    monkeypatch.setattr(_list, "FILE_LIMIT", 3)
    first, calls = _listed(sched, held)
    assert calls.get("describejobs") == -(-total // 100), calls
    (path,) = (tmp_path / "state" / "plane").glob("aws_batch-*.ids")
    with open(path, encoding="utf-8") as f:
        kept = json.load(f)["jobs"]
    assert len(kept) == 3 and all(v[0] for v in kept.values())  # tx's jobs first
    _list._forget()  # a new process: the jobs the file lacks are described again, once
    second, calls = _listed(sched, held)
    assert second == first and calls.get("describejobs") == -(-(total - 3) // 100), calls
    second, calls = _listed(sched, held)
    assert "describejobs" not in calls, calls
