"""A sweep's trial states from its Batch job's task counts and the listings of the states
other than the most common (tx_scheduler_gcp_batch._sweep_states), with the official client
against the local Batch server (fake_gcp: no Batch emulator exists), which runs the tasks and
keeps the counts as Batch does; every call is counted at the client.

A job whose counts went stale before its listings (a task moved meanwhile) must not give a
trial a state it was never in: the listings no longer hold as many tasks as counted, and every
task is listed instead."""
import os
import sys
import time
from typing import Any, List

import pytest
from google.api_core import exceptions as gex
from google.cloud import batch_v1

from fake_gcp import count_calls
from tx.runner import Runner
from tx.runner import sweep as sw
from tx.specs import AppDef, AppState, Resource, Role
from tx.specs.sweep import SweepSpec
from tx_scheduler_gcp_batch._sweep_states import task_states
from tx_scheduler_gcp_batch.scheduler import TASK_STATE_FIELDS

#: trial i fails where ``fail`` is 1, else succeeds
APP = AppDef("st", [Role("r", image="img", entrypoint="sh", args=["-c", 'test "${fail}" = 1 && exit 3; exit 0'],
                         resource=Resource(cpu=1, gpu=0, memMB=64))])



@pytest.fixture
def ended(fake_gcp: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A sweep of 5 trials whose job has ended: trials 1 and 3 FAILED, the others SUCCEEDED."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    with Runner() as runner:
        handle = runner.run_sweep(APP, SweepSpec(grid={"fail": [0, 1, 0, 1, 0]}), "gcp_batch")
        sched = runner.scheduler("gcp_batch")
        job_app_id = sw.load_record(handle).trials[0].attempts[-1].rsplit(":", 1)[0]
        deadline = time.monotonic() + 120
        while True:
            job = sched._get_job(job_app_id)
            if job.status.state.name in ("SUCCEEDED", "FAILED"):
                break
            assert time.monotonic() < deadline, job.status
            time.sleep(0.2)
        yield runner, handle, job


def test_the_counts_and_one_listing_of_the_failed_give_every_trial(ended: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, handle, job = ended
    client = runner.scheduler("gcp_batch")._batch_client()
    calls = count_calls(client, monkeypatch)
    states, failed = task_states(client, job, f"{job.name}/taskGroups/group0", 1000, TASK_STATE_FIELDS)
    assert states == {0: "SUCCEEDED", 1: "FAILED", 2: "SUCCEEDED", 3: "FAILED", 4: "SUCCEEDED"}
    assert calls == ["list_tasks"]  # State=FAILED only: the others are the most common
    assert sorted(failed) == [1, 3] and all(t.status.state.name == "FAILED" for t in failed.values())
    assert all(any("exit code 3" in e.description or e.task_execution.exit_code == 3 for e in t.status.status_events)
               for t in failed.values())  # whole tasks: the describe reads why from them

    st = runner.sweep_status(handle)  # through tx: the same states; the failed trials say why
    assert [t.state for t in st.trials] == [AppState.SUCCEEDED, AppState.FAILED] * 2 + [AppState.SUCCEEDED]
    assert all(t.why for t in st.trials if t.state == AppState.FAILED), st.format()


def test_counts_gone_stale_before_the_listings_list_every_task(ended: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counts as they were while trials 1 and 3 still ran (the job read then, the tasks
    listed after they ended): RUNNING lists none of the 2 counted, so every task is listed,
    and no trial is said RUNNING or SUCCEEDED that was not."""
    runner, _handle, job = ended
    client = runner.scheduler("gcp_batch")._batch_client()
    stale = batch_v1.Job.deserialize(batch_v1.Job.serialize(job))
    stale.status.task_groups["group0"].counts.clear()
    stale.status.task_groups["group0"].counts.update({"SUCCEEDED": 3, "RUNNING": 2})
    calls = count_calls(client, monkeypatch)
    states, failed = task_states(client, stale, f"{job.name}/taskGroups/group0", 1000, TASK_STATE_FIELDS)
    assert states == {0: "SUCCEEDED", 1: "FAILED", 2: "SUCCEEDED", 3: "FAILED", 4: "SUCCEEDED"}
    assert calls == ["list_tasks"] * 2 and failed == {}  # State=RUNNING (0 of 2), then all

    # counts that do not add up to the job's tasks are not trusted either
    stale.status.task_groups["group0"].counts.clear()
    stale.status.task_groups["group0"].counts.update({"SUCCEEDED": 3})
    calls.clear()
    assert task_states(client, stale, f"{job.name}/taskGroups/group0", 1000, TASK_STATE_FIELDS)[0] == states
    assert calls == ["list_tasks"]


def test_a_sweep_waiting_whole_is_its_counts_alone(fake_gcp: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    with fake_gcp.vms(0), Runner() as runner:
        handle = runner.run_sweep(APP, SweepSpec(grid={"fail": [0] * 250}), "gcp_batch")
        try:
            calls = count_calls(runner.scheduler("gcp_batch")._batch_client(), monkeypatch)
            st = runner.sweep_status(handle)
            assert [t.state for t in st.trials] == [AppState.PENDING] * 250
            assert calls == ["get_job"], calls
        finally:
            runner.cancel_sweep(handle)


def test_the_server_takes_only_the_documented_filter(fake_gcp: Any, ended: Any) -> None:
    runner, _handle, job = ended
    client = runner.scheduler("gcp_batch")._batch_client()
    parent = f"{job.name}/taskGroups/group0"
    got: List[Any] = list(client.list_tasks(request={"parent": parent, "filter": "State=FAILED"}))
    assert [t.name.rsplit("/", 1)[1] for t in got] == ["1", "3"]
    for bad in ("state=FAILED", "State=DONE", "State = FAILED", "status.state=FAILED"):
        with pytest.raises(gex.BadRequest, match="invalid filter"):
            list(client.list_tasks(request={"parent": parent, "filter": bad}))
