"""The scheduler through the official clients against the local Batch + Logging server:
states as Batch documents them, retries and Spot preemption, logs with since/until/regex
and tailing, cancel and delete as long-running operations that finish, the request
arriving intact, and errors as one-line messages.

The server moves states on events (a process started or exited, VMs freed), so the tests
wait for conditions with a bounded timeout and assert what a client of Batch can rely on
(states only move forward, the terminal state and its events, operations complete), never
the server's own timetable. Apps that must stay in a state until the test has looked wait
for a gate file the test creates (:func:`gated`)."""
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from google.api_core import exceptions as gex
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import batch_v1

from fake_gcp import FakeGcp
from tx.runner import get_runner
from tx.schedulers import DescribeAppResponse
from tx.specs import AppDef, AppState, Resource, Role, is_terminal, parse_app_handle
from tx.testing import find_replica
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler
from tx_scheduler_gcp_batch.testing import LOCATION, PROJECT


@pytest.fixture
def sched(fake_gcp: FakeGcp) -> GcpBatchScheduler:
    return create_scheduler("tx")


@pytest.fixture
def client(fake_gcp: FakeGcp) -> Any:
    """The official Batch client on the local server, as a user's own code or gcloud uses it."""
    return batch_v1.BatchServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                       client_options=ClientOptions(api_endpoint=fake_gcp.url))


def gated(gate: Path, before: str = "", after: str = "") -> str:
    """A script that runs ``before``, waits until the file ``gate`` exists, then runs ``after``."""
    return f'{before}{"; " if before else ""}while [ ! -e "{gate}" ]; do sleep 0.05; done{"; " if after else ""}{after}'


def wait_until(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    """``check()``'s first true answer, asked every 50 ms; fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"not {what} after {timeout} s (last answer {got!r})"
        time.sleep(0.05)


#: app states in the order an app may take them (a terminal state ends it)
_RANK = {AppState.SUBMITTED: 0, AppState.PENDING: 1, AppState.RUNNING: 2}
#: Batch job states and the states each may move to (JobStatus.State; delete from any)
_BATCH_NEXT = {
    "QUEUED": {"SCHEDULED", "CANCELLATION_IN_PROGRESS"},
    "SCHEDULED": {"RUNNING", "FAILED", "CANCELLATION_IN_PROGRESS"},
    "RUNNING": {"SUCCEEDED", "FAILED", "CANCELLATION_IN_PROGRESS"},
    "CANCELLATION_IN_PROGRESS": {"CANCELLED"},
}


class Watch:
    """The states of one app as a client sees them by describing it: each ``until`` call
    describes it until a condition holds, and records every state seen."""

    def __init__(self, sched: GcpBatchScheduler, app_id: str) -> None:
        self.sched, self.app_id, self.seen = sched, app_id, []  # type: ignore[var-annotated]

    def describe(self) -> DescribeAppResponse:
        desc = self.sched.describe(self.app_id)
        assert desc is not None, f"{self.app_id} is unknown"
        if not self.seen or self.seen[-1] != desc.state:
            self.seen.append(desc.state)
        return desc

    def until(self, what: str, cond: Callable[[DescribeAppResponse], bool], timeout: float = 60) -> DescribeAppResponse:
        def check() -> Optional[DescribeAppResponse]:
            desc = self.describe()
            return desc if cond(desc) else None

        return wait_until(f"{self.app_id} {what} (states seen: {self.seen})", check, timeout)

    def assert_forward(self) -> None:
        """The app never went back: ranks only grow, and a terminal state is the last one."""
        ranks = [_RANK.get(s, 3) for s in self.seen]
        assert ranks == sorted(ranks) and ranks.count(3) <= 1, f"{self.app_id} went back: {self.seen}"


def job_moves(job: Any) -> List[Tuple[str, str]]:
    """The job's state changes, from its status events (``Job state is set from A to B ...``)."""
    moves = []
    for e in job.status.status_events:
        m = re.match(r"Job state is set from (\w+) to (\w+) for job ", e.description)
        if m:
            assert e.type_ == "STATUS_CHANGED", e
            moves.append((m.group(1), m.group(2)))
    return moves


def assert_events_chain(job: Any) -> List[Tuple[str, str]]:
    """The job's status events tell its whole way from QUEUED to its state now, one move
    after the other, each a move Batch makes, in time order."""
    moves = job_moves(job)
    assert moves and moves[0][0] == "QUEUED" and moves[-1][1] == job.status.state.name, moves
    for (_, b), (c, _) in zip(moves, moves[1:]):
        assert b == c, f"events do not chain: {moves}"
    for a, b in moves:
        assert b in _BATCH_NEXT.get(a, set()) or b == "DELETION_IN_PROGRESS", f"{a} -> {b} is no Batch move: {moves}"
    times = [e.event_time for e in job.status.status_events]
    assert times == sorted(times), times
    return moves


def sh(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
    return Role(name, image="busybox", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)


def run(sched: GcpBatchScheduler, app: AppDef, cfg: Dict[str, Any] = None, timeout: float = 60) -> Any:
    app_id = sched.submit(app, cfg or {})
    desc = sched.wait(app_id, timeout=timeout, poll_interval=0.2)
    assert desc is not None and is_terminal(desc.state), desc
    return app_id, desc


def lines(sched: GcpBatchScheduler, app_id: str, role: str, k: int = 0, **kw: Any) -> List[str]:
    return list(sched.log_iter(app_id, role, k, **kw))


def test_request_reaches_batch_intact_and_roles_come_back(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    """The multi-role, multi-replica, GPU, Spot request the server parsed (REST JSON into
    ``batch_v1.Job``) equals the one built; describe gives the roles back."""
    app = AppDef("roundtrip", roles=[
        sh("trainer", "echo t ${replica_id}", 2, resource=Resource(cpu=4, gpu=8, memMB=2048), max_retries=1,
           env={"X": "1"}),
        sh("eval", "echo e", 1, resource=Resource(cpu=1, gpu=0, memMB=512)),
    ])
    info = sched.submit_dryrun(app, {"provisioning_model": "SPOT", "service_account": "sa@x.iam.gserviceaccount.com"})
    app_id = sched.schedule(info)
    assert fake_gcp.created[-1] == info.request.job
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    roles = {r.name: r for r in desc.roles}
    assert roles["trainer"].args == ["-c", "echo t ${replica_id}"]
    assert roles["trainer"].num_replicas == 2 and roles["trainer"].max_retries == 1
    assert roles["trainer"].resource.gpu == 8 and roles["eval"].resource.memMB == 512
    assert roles["trainer"].env == {"X": "1"}
    assert lines(sched, app_id, "trainer", 1) == ["t 1\n"]
    assert desc.app_id == app_id == f"{PROJECT}:{LOCATION}:{info.request.job_id}"


def test_states_move_forward_on_events(sched: GcpBatchScheduler, client: Any, tmp_path: Path) -> None:
    """A 2-task job is RUNNING, both replicas with it, while its processes run (they wait for
    the test's gate), and SUCCEEDED when they have exited: states only move forward, the
    status events tell the way, and the task counts and exit codes agree."""
    gate = tmp_path / "gate"
    app_id = sched.submit(AppDef("states", roles=[sh("w", gated(gate, "echo up", "echo done"), 2)]), {})
    watch = Watch(sched, app_id)
    running = watch.until("RUNNING with both replicas", lambda d: d.state == AppState.RUNNING and all(
        r.state == AppState.RUNNING for r in d.roles_statuses[0].replicas))
    assert running.metadata["batch_state"] == "RUNNING" and "to RUNNING" in running.msg, running.msg
    job = client.get_job(name=running.metadata["job_name"])
    assert dict(job.status.task_groups["group0"].counts) == {"RUNNING": 2}
    gate.touch()
    desc = watch.until("ended", lambda d: is_terminal(d.state))
    watch.assert_forward()
    assert desc.state == AppState.SUCCEEDED and desc.metadata["batch_state"] == "SUCCEEDED", desc.msg
    assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [0, 0]
    job = client.get_job(name=desc.metadata["job_name"])
    assert assert_events_chain(job)[-1] == ("RUNNING", "SUCCEEDED")
    assert dict(job.status.task_groups["group0"].counts) == {"SUCCEEDED": 2}
    assert job.status.run_duration.total_seconds() > 0
    for task in client.list_tasks(parent=job.task_groups[0].name):
        last = task.status.status_events[-1]
        assert (last.task_state.name, last.task_execution.exit_code) == ("SUCCEEDED", 0), task
        assert [e.task_state.name for e in task.status.status_events] == ["ASSIGNED", "RUNNING", "SUCCEEDED"]


def test_a_job_waits_queued_until_vms_are_free(sched: GcpBatchScheduler, fake_gcp: FakeGcp, client: Any,
                                              tmp_path: Path) -> None:
    """With one VM in the region, a second job stays QUEUED (and says so) while the first
    holds it, and is scheduled when the first ends: the VM's release moves it, no clock."""
    gate = tmp_path / "gate"
    with fake_gcp.vms(1):
        first = sched.submit(AppDef("holder", roles=[sh("w", gated(gate, "echo up"))]), {})
        Watch(sched, first).until("RUNNING", lambda d: d.state == AppState.RUNNING)
        second = sched.submit(AppDef("waiter", roles=[sh("w", "echo ran")]), {})
        waiting = sched.describe(second)
        assert waiting.state == AppState.SUBMITTED and waiting.metadata["batch_state"] == "QUEUED", waiting
        assert "QUEUED" in waiting.msg  # why it waits
        assert [r.state for r in waiting.roles_statuses[0].replicas] == [AppState.PENDING]
        assert sched.describe(second).state == AppState.SUBMITTED  # the first still holds the VM
        gate.touch()
        watch = Watch(sched, second)
        desc = watch.until("ended", lambda d: is_terminal(d.state))
    watch.assert_forward()
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert lines(sched, second, "w") == ["ran\n"]
    ended = client.get_job(name=sched.describe(first).metadata["job_name"]).status.status_events[-1].event_time
    scheduled = client.get_job(name=desc.metadata["job_name"]).status.status_events[0]
    assert "from QUEUED to SCHEDULED" in scheduled.description and scheduled.event_time >= ended


def test_failure_names_the_replica_exit_code_and_last_lines(sched: GcpBatchScheduler) -> None:
    script = 'echo "step ${replica_id}"; if [ ${replica_id} = 1 ]; then echo "CUDA error: boom" >&2; exit 3; fi'
    app_id, desc = run(sched, AppDef("fails", roles=[sh("ok", "true"), sh("worker", script, 2)]))
    assert desc.state == AppState.FAILED
    r1 = find_replica(desc, "worker", 1)
    assert (r1.state, r1.exit_code) == (AppState.FAILED, 3)
    assert find_replica(desc, "worker", 0).state == AppState.SUCCEEDED
    err = desc.structured_error_msg
    assert err.startswith("worker[1] (task 2) failed with exit code 3") and "CUDA error: boom" in err, err
    assert "\n" not in err
    assert "task failure" in desc.msg


def test_retries_restart_a_failed_replica(sched: GcpBatchScheduler) -> None:
    script = 'echo "attempt $BATCH_TASK_RETRY_ATTEMPT"; [ "$BATCH_TASK_RETRY_ATTEMPT" -ge 1 ]'
    app_id, desc = run(sched, AppDef("retry", roles=[sh("w", script, max_retries=2)]))
    assert desc.state == AppState.SUCCEEDED, desc.structured_error_msg
    assert desc.num_restarts == 1
    assert lines(sched, app_id, "w") == ["attempt 0\n", "attempt 1\n"]


#: Batch's reserved exit codes for a VM lost under a task, the model they happen on, and the reason tx gives
VMS_LOST = [
    ("SPOT", 50001, "Spot VM preemption"),
    ("STANDARD", 50002, "VM reporting timeout"),
    ("STANDARD", 50003, "VM rebooted during execution"),
    ("STANDARD", 50006, "VM recreated during execution"),
]


@pytest.mark.parametrize("model,code,reason", VMS_LOST)
def test_a_vm_lost_is_retried_but_app_failures_are_not(sched: GcpBatchScheduler, fake_gcp: FakeGcp, model: str,
                                                       code: int, reason: str) -> None:
    """max_retries=0: a task whose VM was lost (preempted, silent, rebooted, recreated) is
    retried within infra_retries, exit 3 fails at once."""
    script = (
        'echo "attempt $BATCH_TASK_RETRY_ATTEMPT"; '
        'if [ ${replica_id} = 0 ] && [ "$BATCH_TASK_RETRY_ATTEMPT" = 0 ]; then sleep 600; fi; '
        'if [ ${replica_id} = 1 ]; then exit 3; fi'
    )
    app_id = sched.submit(AppDef("lost", roles=[sh("w", script, 2)]), {"provisioning_model": model, "infra_retries": 2})
    wait_for_line(sched, app_id, "w", 0)
    fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0, code)
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert lines(sched, app_id, "w", 0) == ["attempt 0\n", "attempt 1\n"]  # its VM lost, then ran again
    assert find_replica(desc, "w", 0).state == AppState.SUCCEEDED
    assert lines(sched, app_id, "w", 1) == ["attempt 0\n"]  # exit 3: not retried
    assert find_replica(desc, "w", 1).exit_code == 3
    assert desc.state == AppState.FAILED and desc.num_restarts == 1
    # every attempt with why it ended: the VM lost (retried within infra_retries), then the user's exit 3
    assert [a.text for a in desc.attempts] == [
        f"#0 FAILED (infra: w/0: {reason}, exit code {code}), retried", "#1 FAILED (user: w/1: exit code 3)"]
    assert desc.metadata["attempts"] == [a.to_json() for a in desc.attempts]


@pytest.mark.parametrize("model,code,reason", [VMS_LOST[0], VMS_LOST[2]])
def test_an_app_whose_vm_is_lost_past_its_infra_retries_fails_over(fake_gcp: FakeGcp, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, model: str,
                                                                   code: int, reason: str) -> None:
    """Runner.run_with_fallback from gcp_batch (infra_retries=0) to local_cwd: the task
    whose VM was lost (a Spot preemption, a reboot) fails the job as an infrastructure
    failure (its last attempt ended with that reserved exit code), so the run moves to
    local_cwd (as tx run --fallback does) and succeeds there; the chain says why it left."""
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    script = 'if [ -n "$BATCH_TASK_INDEX" ]; then echo up; exec sleep 60; fi; echo moved'  # only Batch sets it
    with get_runner() as runner:
        handle = runner.run_with_fallback(AppDef("lost-failover", roles=[sh("w", script)]), [
            ("gcp_batch", {"provisioning_model": model, "infra_retries": 0}), ("local_cwd", {})], watch=False)
        app_id = parse_app_handle(runner.run_status(handle).live).app_id  # type: ignore[union-attr, arg-type]
        sched = create_scheduler("tx")
        wait_for_line(sched, app_id, "w", 0)
        fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0, code)  # type: ignore[union-attr]
        status = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        run = runner.run_status(handle)
        assert run.chain == f"gcp_batch: FAILED (infra: w/0: {reason}, exit code {code}) -> local_cwd: SUCCEEDED", run
        assert run.live is not None and run.live.startswith("local_cwd://"), run
        assert list(runner.log_lines(run.live, "w")) == ["moved\n"]


def test_the_tasks_own_reserved_exit_codes_are_the_users(sched: GcpBatchScheduler, fake_gcp: FakeGcp) -> None:
    """Exit code 50005 (the task ran past its maxRunDuration; 50004, unresponsive, alike) is
    the task's own: not retried by infra_retries (default 3), the app FAILS as the user's."""
    app_id = sched.submit(AppDef("std", roles=[sh("w", "echo up; sleep 600")]), {})
    wait_for_line(sched, app_id, "w", 0)
    fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0, 50005)
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc.state == AppState.FAILED and find_replica(desc, "w", 0).exit_code == 50005
    assert lines(sched, app_id, "w", 0) == ["up\n"]
    assert [a.text for a in desc.attempts] == ["#0 FAILED (user: w/0: exit code 50005)"]


def test_logs_streams_since_until_regex(sched: GcpBatchScheduler, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = gated(gate, "echo out1; echo err1 >&2", "echo out2; echo err2 >&2")
    app_id = sched.submit(AppDef("logs", roles=[sh("w", script)]), {})
    wait_until("lines 1 logged", lambda: len(lines(sched, app_id, "w")) == 2)
    gate.touch()  # lines 2 come after the test has seen lines 1: a pause between them
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc.state == AppState.SUCCEEDED
    # combined: in time order; stdout and stderr lines of one instant may come either way
    # round (two pipes, as on a real VM), lines 1 always before the pause and lines 2
    combined = lines(sched, app_id, "w")
    assert sorted(combined[:2]) == ["err1\n", "out1\n"] and sorted(combined[2:]) == ["err2\n", "out2\n"]
    assert lines(sched, app_id, "w", streams="stdout") == ["out1\n", "out2\n"]
    assert lines(sched, app_id, "w", streams="stderr") == ["err1\n", "err2\n"]
    assert sorted(lines(sched, app_id, "w", regex=r"2$")) == ["err2\n", "out2\n"]
    assert lines(sched, app_id, "w", regex=r"^out", streams="stdout") == ["out1\n", "out2\n"]
    # find the pause: entries before it and after it
    from google.cloud import logging as gcl

    client = gcl.Client(project=PROJECT, credentials=AnonymousCredentials(), _use_grpc=False,
                        client_options={"api_endpoint": os.environ["CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING"].rstrip("/")})
    uid = desc.metadata["uid"]
    stamps = {e.payload: e.timestamp for e in client.list_entries(filter_=f'labels.job_uid="{uid}" AND timestamp>="1970-01-01T00:00:00Z"')}
    last1, first2 = max(stamps["out1"], stamps["err1"]), min(stamps["out2"], stamps["err2"])
    assert last1 < first2, stamps
    middle = last1 + (first2 - last1) / 2
    assert sorted(lines(sched, app_id, "w", since=middle)) == ["err2\n", "out2\n"]
    assert sorted(lines(sched, app_id, "w", until=middle)) == ["err1\n", "out1\n"]
    assert lines(sched, app_id, "w", since=middle, streams="stdout") == ["out2\n"]
    naive_local = middle.astimezone().replace(tzinfo=None)  # naive datetimes are local time
    assert sorted(lines(sched, app_id, "w", since=naive_local)) == ["err2\n", "out2\n"]


def test_tail_follows_until_the_job_ends(sched: GcpBatchScheduler, tmp_path: Path) -> None:
    """``should_tail`` returns the lines written after it began, and only once the job ended:
    the second line is written when the tail has already given the first."""
    gate = tmp_path / "gate"
    app_id = sched.submit(AppDef("tail", roles=[sh("w", gated(gate, "echo tick 1", "echo tick 2"))]), {})
    got: List[str] = []
    for line in sched.log_iter(app_id, "w", 0, should_tail=True):
        got.append(line)
        gate.touch()  # the app goes on only now
    assert got == ["tick 1\n", "tick 2\n"]
    assert is_terminal(sched.describe(app_id).state)


#: prints the replica's shell pid (``$$`` is the macro escape of ``$``: args are string.Template)
PID_THEN_SLEEP = 'echo "pid $$$$"; sleep 600'


def test_cancel_stops_the_tasks_and_ends_cancelled(sched: GcpBatchScheduler, client: Any) -> None:
    app_id = sched.submit(AppDef("cancelme", roles=[sh("w", PID_THEN_SLEEP, 2)]), {})
    watch = Watch(sched, app_id)
    watch.until("RUNNING", lambda d: d.state == AppState.RUNNING)
    pids = [int(wait_until(f"w/{k} started", lambda k=k: lines(sched, app_id, "w", k))[0].split()[1]) for k in (0, 1)]
    sched.cancel(app_id)
    desc = watch.until("ended", lambda d: is_terminal(d.state))
    watch.assert_forward()
    assert desc.state == AppState.CANCELLED and desc.metadata["batch_state"] == "CANCELLED"
    assert {r.state for r in desc.roles_statuses[0].replicas} <= {AppState.CANCELLED, AppState.FAILED}
    for pid in pids:  # the processes were stopped (and reaped) before the job was CANCELLED
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    job = client.get_job(name=desc.metadata["job_name"])
    assert assert_events_chain(job)[-2:] == [("RUNNING", "CANCELLATION_IN_PROGRESS"), ("CANCELLATION_IN_PROGRESS", "CANCELLED")]
    assert "RUNNING" not in job.status.task_groups["group0"].counts
    sched.cancel(app_id)  # idempotent on an ended job
    assert sched.describe(app_id).state == AppState.CANCELLED


def test_cancel_is_an_operation_that_completes(sched: GcpBatchScheduler, client: Any) -> None:
    """``jobs.cancel`` through the official client: its operation completes (``result()``
    returns CancelJobResponse), and by then the job is CANCELLED."""
    app_id = sched.submit(AppDef("cancelop", roles=[sh("w", "echo up; sleep 600")]), {})
    wait_until("started", lambda: lines(sched, app_id, "w"))
    name = sched.describe(app_id).metadata["job_name"]
    op = client.cancel_job(name=name)
    assert isinstance(op.result(timeout=30), batch_v1.CancelJobResponse)
    assert (op.metadata.verb, op.metadata.target) == ("cancel", name) and op.metadata.end_time >= op.metadata.create_time
    assert client.get_job(name=name).status.state.name == "CANCELLED"
    with pytest.raises(gex.BadRequest, match="cannot be cancelled"):
        client.cancel_job(name=name)  # an ended job: FAILED_PRECONDITION
    client.delete_job(name=name).result(timeout=30)  # an ended job holds nothing: deleted
    with pytest.raises(gex.NotFound):
        client.get_job(name=name)


def test_cancel_while_queued_runs_nothing(sched: GcpBatchScheduler, fake_gcp: FakeGcp, client: Any,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A job cancelled before it got VMs ends CANCELLED without running: its tasks end
    UNEXECUTED, its replicas CANCELLED, and it wrote no log."""
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "0")  # cancelled behind tx's back: every look asks Batch
    with fake_gcp.vms(0):
        app_id = sched.submit(AppDef("queuedcancel", roles=[sh("w", "echo ran", 2)]), {})
        assert sched.describe(app_id).metadata["batch_state"] == "QUEUED"
        name = sched.describe(app_id).metadata["job_name"]
        client.cancel_job(name=name).result(timeout=30)
    desc = sched.describe(app_id)
    assert desc.state == AppState.CANCELLED
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.CANCELLED, AppState.CANCELLED]
    job = client.get_job(name=name)
    assert assert_events_chain(job) == [("QUEUED", "CANCELLATION_IN_PROGRESS"), ("CANCELLATION_IN_PROGRESS", "CANCELLED")]
    assert dict(job.status.task_groups["group0"].counts) == {"UNEXECUTED": 2}
    assert lines(sched, app_id, "w", 0) == [] and lines(sched, app_id, "w", 1) == []


def test_delete_is_an_operation_that_completes_and_the_job_is_gone(sched: GcpBatchScheduler, client: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A user deletes a running job (``gcloud batch jobs delete``): DELETION_IN_PROGRESS, its
    tasks stop, and when the operation is done the job is gone; ``operations.get`` answers."""
    monkeypatch.setenv("TX_STATUS_MAX_AGE", "0")  # deleted behind tx's back: every look asks Batch
    app_id = sched.submit(AppDef("deleteme", roles=[sh("w", PID_THEN_SLEEP)]), {})
    pid = int(wait_until("started", lambda: lines(sched, app_id, "w"))[0].split()[1])
    name = sched.describe(app_id).metadata["job_name"]
    op = client.delete_job(name=name)
    deleting = sched.describe(app_id)  # being deleted, or already gone
    assert deleting is None or (deleting.state == AppState.UNKNOWN and "being deleted" in deleting.msg), deleting
    op.result(timeout=30)
    assert (op.metadata.verb, op.metadata.target) == ("delete", name)
    with pytest.raises(gex.NotFound):
        client.get_job(name=name)
    assert sched.describe(app_id) is None
    assert app_id not in [a.app_id for a in sched.list()]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    from google.longrunning import operations_pb2

    done = client.get_operation(operations_pb2.GetOperationRequest(name=op.operation.name))
    assert done.done and done.response.type_url.endswith("google.protobuf.Empty")
    sched.cancel(app_id)  # a deleted job: nothing to do


def test_list_shows_only_tx_jobs_of_the_location(sched: GcpBatchScheduler, client: Any) -> None:
    runnable = batch_v1.Runnable(script=batch_v1.Runnable.Script(text="true"))
    foreign = batch_v1.Job(task_groups=[batch_v1.TaskGroup(task_spec=batch_v1.TaskSpec(runnables=[runnable]))])
    client.create_job(parent=f"projects/{PROJECT}/locations/{LOCATION}", job=foreign, job_id="not-from-tx")
    elsewhere = sched.submit(AppDef("elsewhere", roles=[sh("w", "true")]), {"location": "asia-east1"})
    mine = sched.submit(AppDef("mine", roles=[sh("w", "true")]), {})
    listed = {a.app_id: a for a in sched.list()}
    assert mine in listed and listed[mine].name == "mine"
    assert f"{PROJECT}:{LOCATION}:not-from-tx" not in listed
    assert elsewhere not in listed
    assert sched.describe(elsewhere) is not None  # the app id carries its location
    sched.wait(elsewhere, timeout=30)
    sched.wait(mine, timeout=30)


def test_list_jobs_pages_and_answers_only_the_masked_fields(client: Any, fake_gcp: FakeGcp) -> None:
    """jobs.list as Batch answers it: pages of ``pageSize`` linked by ``nextPageToken``, and
    only the fields of an ``X-Goog-FieldMask`` (what ``GcpBatchScheduler.list`` asks for)."""
    parent = f"projects/{PROJECT}/locations/europe-west4"
    runnable = batch_v1.Runnable(container=batch_v1.Runnable.Container(image_uri="busybox", commands=["-c", "true"]),
                                 environment=batch_v1.Environment(variables={"BIG": "x" * 1000}))
    with fake_gcp.vms(0):
        names = [client.create_job(parent=parent, job_id=f"page-{i}", job=batch_v1.Job(
            labels={"i": str(i)}, task_groups=[batch_v1.TaskGroup(task_spec=batch_v1.TaskSpec(runnables=[runnable]))],
        )).name for i in range(3)]
        try:
            pages = list(client.list_jobs(request={"parent": parent, "page_size": 2}, metadata=[
                ("x-goog-fieldmask", "jobs.name,jobs.labels,jobs.taskGroups.taskSpec.runnables.container,nextPageToken")
            ]).pages)
            assert [[j.name for j in p.jobs] for p in pages] == [names[:2], names[2:]]
            job = pages[0].jobs[1]
            assert job.labels == {"i": "1"} and not job.uid and not job.status.state
            assert job.task_groups[0].task_spec.runnables[0].container.commands == ["-c", "true"]
            assert not job.task_groups[0].task_spec.runnables[0].environment.variables
            whole = list(client.list_jobs(parent=parent))
            assert [j.name for j in whole] == names and whole[0].status.state.name == "QUEUED"
            assert whole[0].task_groups[0].task_spec.runnables[0].environment.variables["BIG"] == "x" * 1000
            with pytest.raises(gex.BadRequest, match="jobs.nope"):
                list(client.list_jobs(parent=parent, metadata=[("x-goog-fieldmask", "jobs.nope")]))
        finally:
            for name in names:
                client.cancel_job(name=name)


def test_unknown_apps(sched: GcpBatchScheduler) -> None:
    unknown = f"{PROJECT}:{LOCATION}:never-submitted"
    assert sched.describe(unknown) is None
    assert sched.describe("never-submitted-either") is None  # bare job id: project/location from env
    sched.cancel(unknown)
    with pytest.raises(ValueError, match="unknown app"):
        list(sched.log_iter(unknown, "w", 0))
    with pytest.raises(ValueError, match="PROJECT:LOCATION:JOB_ID"):
        sched.describe("a:b")


def test_unknown_replica_of_a_known_app(sched: GcpBatchScheduler) -> None:
    app_id, _ = run(sched, AppDef("one", roles=[sh("w", "true")]))
    with pytest.raises(ValueError, match="no replica w/3"):
        list(sched.log_iter(app_id, "w", 3))


def wait_for_line(sched: GcpBatchScheduler, app_id: str, role: str, k: int, timeout: float = 30) -> None:
    """Until replica ``k`` of ``role`` has written a line (its process runs)."""
    deadline = time.monotonic() + timeout
    while not lines(sched, app_id, role, k):
        assert time.monotonic() < deadline, f"{app_id} {role}/{k} wrote nothing in {timeout} s"
        time.sleep(0.05)
