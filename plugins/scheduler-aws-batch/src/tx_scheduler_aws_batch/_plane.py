"""aws_batch's status plane (:mod:`tx.schedulers.plane`): one snapshot per job queue, shared
by every tx process of the host for a short time.

A fetch asks Batch for every job of the queue in pages (``ListJobs`` with the
``AFTER_CREATED_AT`` filter, so every status is listed, up to :data:`LIST_PAGE` jobs a page),
then ``DescribeJobs`` by :data:`DESCRIBE_BATCH` for the jobs whose record it lacks or that
may have changed, and the node jobs (``<jobId>#<node>``) of multi-node jobs by 100 too. A
job that had ended (``SUCCEEDED``/``FAILED``, final in Batch) when the last snapshot was
taken, and that the listing still shows in the same status, keeps its record and nodes
from that snapshot: following 1,000 finished apps costs one ``ListJobs`` a tick, and 1,000
running ones one ``ListJobs`` and 10 ``DescribeJobs`` (plus their node jobs).

API reference: https://docs.aws.amazon.com/batch/latest/APIReference/API_ListJobs.html,
https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeJobs.html.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from tx.schedulers import StatusPlane

from tx_scheduler_aws_batch._client import account_key

__all__ = ["DESCRIBE_BATCH", "LIST_PAGE", "TERMINAL", "fetch_queue", "plane"]

#: Batch statuses that never change again
TERMINAL = frozenset({"SUCCEEDED", "FAILED"})
#: statuses in which a multi-node job has node jobs
_NODE_STATES = frozenset({"STARTING", "RUNNING", "SUCCEEDED", "FAILED"})
#: ListJobs's largest page (``maxResults``)
LIST_PAGE = 1000
#: DescribeJobs's most job ids per call
DESCRIBE_BATCH = 100

_PLANES: Dict[str, StatusPlane] = {}


def plane(queue: str) -> StatusPlane:
    """The shared snapshot of job queue ``queue`` on the AWS endpoint and account this
    process reaches (under the current state directory)."""
    p = StatusPlane("aws_batch", f"{account_key()}|{queue}")
    return _PLANES.setdefault(p.path, p)


def _with_summary(job: Dict[str, Any], summary: Dict[str, Any]) -> Dict[str, Any]:
    """The job summary's container (exitCode, reason) where ``describe_jobs`` has none (a
    multi-node parent job; moto drops it there too)."""
    extra = summary.get("container") or {}
    container = dict(job.get("container") or {})
    for key in ("exitCode", "reason"):
        if key in extra and key not in container:
            container[key] = extra[key]
    if container:
        job = {**job, "container": container}
    return job


def fetch_queue(batch: Any, queue: str, previous: Optional[Dict[str, Any]],
                queue_problem: Callable[[Dict[str, Any]], str]) -> Dict[str, Any]:
    """Every job of ``queue`` (see the module's doc) as the snapshot's items: ``names``
    (job name -> job ids), ``jobs`` (job id -> ``describe_jobs`` record), ``nodes`` (job id
    -> node index -> node record, for multi-node jobs that have them) and, when a job waits
    (``RUNNABLE``), ``queue_problem`` (``queue_problem(job)``, asked once per fetch).
    ``previous``: the last snapshot's items, whose ended jobs are not asked again.

    Raises:
        botocore's ClientError / BotoCoreError: a call failed (the caller explains it).
    """
    pages = batch.get_paginator("list_jobs").paginate(
        jobQueue=queue, filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}],
        PaginationConfig={"PageSize": LIST_PAGE})
    # an array's children ("<id>:<index>") and nodes ("<id>#<n>") are not apps of their own
    summaries = {j["jobId"]: j for page in pages for j in page.get("jobSummaryList", [])
                 if ":" not in j["jobId"] and "#" not in j["jobId"]}
    old_jobs: Dict[str, Any] = (previous or {}).get("jobs") or {}
    old_nodes: Dict[str, Any] = (previous or {}).get("nodes") or {}
    jobs: Dict[str, Dict[str, Any]] = {}
    nodes: Dict[str, Dict[str, Any]] = {}
    ask: List[str] = []
    for job_id, summary in summaries.items():
        rec = old_jobs.get(job_id)
        if rec is not None and rec.get("status") in TERMINAL and rec.get("status") == summary.get("status"):
            jobs[job_id] = rec
            if job_id in old_nodes:
                nodes[job_id] = old_nodes[job_id]
        else:
            ask.append(job_id)
    for i in range(0, len(ask), DESCRIBE_BATCH):
        for rec in batch.describe_jobs(jobs=ask[i:i + DESCRIBE_BATCH])["jobs"]:
            if rec.get("jobId") in summaries:
                jobs[rec["jobId"]] = _with_summary(rec, summaries[rec["jobId"]])
    node_ids: List[str] = []
    for job_id, rec in jobs.items():
        num = int((rec.get("nodeProperties") or {}).get("numNodes", 0) or 0)
        if num and job_id not in nodes and rec.get("status") in _NODE_STATES:
            nodes[job_id] = {}
            node_ids.extend(f"{job_id}#{k}" for k in range(num))
    for i in range(0, len(node_ids), DESCRIBE_BATCH):
        for rec in batch.describe_jobs(jobs=node_ids[i:i + DESCRIBE_BATCH])["jobs"]:
            parent, _, index = str(rec.get("jobId", "")).rpartition("#")
            idx = (rec.get("nodeDetails") or {}).get("nodeIndex")
            if parent in nodes:
                nodes[parent][str(idx if idx is not None else index)] = rec
    names: Dict[str, List[str]] = {}
    for job_id, rec in jobs.items():
        names.setdefault(str(rec.get("jobName", "")), []).append(job_id)
    items: Dict[str, Any] = {"names": names, "jobs": jobs, "nodes": nodes}
    waiting = next((rec for rec in jobs.values() if rec.get("status") == "RUNNABLE"), None)
    if waiting is not None:
        items["queue_problem"] = queue_problem(waiting)
    return items
