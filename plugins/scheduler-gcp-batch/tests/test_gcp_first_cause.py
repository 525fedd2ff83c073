"""Which failed task is a GCP Batch job's cause when a DDP rank raises and its peer then fails
in its next collective: the peer's task may end first. The client's ``Task`` messages as
Batch returns them and the tasks' stderr as lines; no server, no fake Batch."""
from __future__ import annotations

import datetime as dt
from typing import Dict, List

from google.cloud import batch_v1

from tx.specs import AppState, FailureKind
from tx_scheduler_gcp_batch._attempts import batch_attempts
from tx_scheduler_gcp_batch._status import cause_failure, failure, replica_statuses
from tx_scheduler_gcp_batch.request import TaskInfo
from tx.testing.failures import peer_lost_text, raised_text

PEER = peer_lost_text(peer="10.128.0.7:41234")
RAISED = raised_text()
JOB = batch_v1.Job(name="projects/p/locations/us-central1/jobs/ddp-abc")
LAYOUT = {k: TaskInfo(k, "trainer", 0, k) for k in (0, 1)}
T0 = dt.datetime(2026, 11, 26, 4, 16, tzinfo=dt.timezone.utc)


def _task(k: int, ended_s: float, code: int) -> batch_v1.Task:
    events = [batch_v1.StatusEvent(description="Task state is updated from ASSIGNED to RUNNING", event_time=T0),
              batch_v1.StatusEvent(description=f"Task state is updated from RUNNING to FAILED on zones/us-central1-a/"
                                   f"instances/vm-{k} with exit code {code}.", event_time=T0 + dt.timedelta(
                                       seconds=ended_s), task_execution=batch_v1.TaskExecution(exit_code=code))]
    return batch_v1.Task(name=f"{JOB.name}/taskGroups/group0/tasks/{k}",
                         status=batch_v1.TaskStatus(state=batch_v1.TaskStatus.State.FAILED, status_events=events))


def _describe(tasks: List[batch_v1.Task], stderr: Dict[int, str]):
    read: List[int] = []

    def last_lines(index: int, n: int) -> List[str]:
        read.append(index)
        return stderr[index].splitlines(keepends=True)[-n:]
    statuses, failed = replica_statuses(JOB, LAYOUT, tasks, AppState.FAILED)
    text, cause = failure(JOB, failed, statuses, last_lines)
    attempts = batch_attempts(JOB, LAYOUT, tasks, AppState.FAILED, cause_failure(failed, cause))
    return statuses, text, cause, attempts, read


def test_the_rank_that_raised_is_the_cause_though_its_peer_ended_first() -> None:
    # rank 0 only lost its peer; its task ended 0.4 s before rank 1's (and has the lower index)
    tasks = [_task(0, 50.0, 1), _task(1, 50.4, 2)]
    statuses, text, cause, attempts, read = _describe(tasks, {0: PEER, 1: RAISED})
    assert cause is not None and (cause.replica, cause.rank, cause.exception_type, cause.message) == (
        1, 1, "RuntimeError", "rank 1 fails on purpose"), text
    assert text == "trainer/1 rank 1: RuntimeError: rank 1 fails on purpose at fail.py:5 (exit code 2)"
    assert statuses[0].replicas[1].root_cause == cause and statuses[0].replicas[0].root_cause is None
    assert (attempts[-1].kind, attempts[-1].reason) == (FailureKind.USER, "trainer/1: exit code 2")
    assert read == [0, 1]


def test_a_cause_more_than_2_min_after_the_first_failure_is_another_failure() -> None:
    tasks = [_task(0, 50.0, 1), _task(1, 180.5, 2)]
    _statuses, text, cause, attempts, read = _describe(tasks, {0: PEER, 1: RAISED})
    assert cause is not None and cause.replica == 0 and "Connection closed by peer" in cause.message, text
    assert attempts[-1].reason == "trainer/0: exit code 1" and read == [0]


def test_a_task_whose_vm_was_lost_is_the_cause_though_its_peer_ended_first() -> None:
    """Task 1's Spot VM was preempted (Batch's reserved exit code 50001); task 0 only lost its
    peer and ended 0.4 s before. Before ``known``, task 0's lost peer was named (and the
    last attempt was the user's)."""
    tasks = [_task(0, 50.0, 1), _task(1, 50.4, 50001)]
    statuses, text, cause, attempts, read = _describe(tasks, {0: PEER, 1: "step 41\n"})
    event = ("Task state is updated from RUNNING to FAILED on zones/us-central1-a/instances/vm-1 with exit "
             "code 50001.")
    assert cause is None and text == f"trainer[1] (task 1) failed with exit code 50001: {event} | last stderr: step 41"
    assert statuses[0].replicas[1].structured_error_msg == event and statuses[0].replicas[0].root_cause is None
    assert (attempts[-1].kind, attempts[-1].reason) == (FailureKind.INFRA, "trainer/1: Spot VM preemption, exit code 50001")
    assert read == [0, 1]


def test_a_lost_vm_2_min_later_is_not_the_cause() -> None:
    tasks = [_task(0, 50.0, 1), _task(1, 180.5, 50003)]
    _statuses, text, cause, attempts, read = _describe(tasks, {0: PEER, 1: ""})
    assert cause is not None and cause.replica == 0 and "Connection closed by peer" in cause.message, text
    assert attempts[-1].reason == "trainer/0: exit code 1" and read == [0]
