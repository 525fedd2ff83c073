"""A sweep's trial states from its Batch job's task counts and as few task listings as they allow.

A sweep's trials are the tasks of one Batch job (:mod:`tx_scheduler_gcp_batch._sweep`). Batch
counts a job's tasks by state (``JobStatus.taskGroups[group].counts``,
https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs#TaskGroupStatus)
and lists a task group's tasks in one state (``tasks.list`` with ``filter=State=RUNNING``,
https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs.taskGroups.tasks/list).
So the tasks in every state but the most common one are listed, and every other task is in
that one: a 10,000-trial sweep with every trial waiting is the job alone, where listing its
tasks was 10 pages of 1,000; with 100 failed and 8 running, two short listings more.

The counts and the listings are read one after the other, while tasks move. The states are
listed in the order a task moves through them (PENDING, ASSIGNED, RUNNING, then the ended
ones), so a task that moves on between two listings is found in the later one, and each
listing must hold exactly as many tasks as counted: where one does not (a task moved between
the counts and its listing), every task is listed instead (pages of 1,000), as it always
was. No trial is given a state it was not in.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from tx_scheduler_gcp_batch._status import state_name, task_index

__all__ = ["MOVES", "task_states"]

#: task states in the order a task moves through them (TaskStatus.State)
MOVES = ("PENDING", "ASSIGNED", "RUNNING", "SUCCEEDED", "FAILED", "UNEXECUTED")


def _order(state: str) -> int:
    return MOVES.index(state) if state in MOVES else len(MOVES)


def _list(client: Any, parent: str, page_size: int, fields: Optional[str], state: Optional[str]) -> List[Any]:
    request: Dict[str, Any] = {"parent": parent, "page_size": page_size}
    if state is not None:
        request["filter"] = f"State={state}"
    pager = client.list_tasks(request=request, metadata=[("x-goog-fieldmask", fields)] if fields else ())
    return [task for page in pager.pages for task in type(page).pb(page).tasks]  # raw protobuf: proto-plus wraps each read


def task_states(client: Any, job: Any, parent: str, page_size: int,
                fields: str) -> Tuple[Dict[int, str], Dict[int, Any]]:
    """``({task index: state name}, {task index: Task})`` of ``job``'s tasks (the second: the
    FAILED ones, whole, as ``batch_v1.Task``, where they were listed on their own).

    Args:
        client: a ``batch_v1.BatchServiceClient``.
        job: the sweep's ``batch_v1.Job`` as just read (its counts).
        parent: its task group's name (``projects/P/locations/L/jobs/J/taskGroups/group0``).
        page_size: tasks asked a page.
        fields: the ``X-Goog-FieldMask`` of a listing of states only.

    Raises:
        google.api_core exceptions: a listing failed (the caller explains them).
    """
    from google.cloud import batch_v1

    group = job.task_groups[0] if job.task_groups else None
    n = int(group.task_count) if group is not None else 0
    counts: Dict[str, int] = {}
    if len(job.status.task_groups) == 1:
        counts = {str(k): int(v) for k, v in next(iter(job.status.task_groups.values())).counts.items() if int(v) > 0}
    if n and counts and sum(counts.values()) == n:
        common = max(sorted(counts, key=_order), key=lambda s: counts[s])
        states: Dict[int, str] = {}
        failed: Dict[int, Any] = {}
        for state in sorted((s for s in counts if s != common), key=_order):
            listed = _list(client, parent, page_size, None if state == "FAILED" else fields, state)
            if len(listed) != counts[state]:
                break  # tasks moved meanwhile: list them all
            for task in listed:
                states[task_index(task)] = state
                if state == "FAILED":
                    failed[task_index(task)] = batch_v1.Task.wrap(task)
        else:
            return {i: states.get(i, common) for i in range(n)}, failed
    return {task_index(t): state_name(t.status) for t in _list(client, parent, page_size, fields, None)}, {}
