"""aws_batch's ``list`` (``tx list``, the failover watcher's tick): tx's jobs in every job
queue of the region, with states read from ``ListJobs`` and identities read once per job.

Per call: ``DescribeJobQueues`` (its pages), then per queue ``ListJobs`` with the
``AFTER_CREATED_AT`` filter (every status; AWS gives at most 100 jobs a page under a filter,
moto all in one), whose ``JobSummary`` carries each job's id, name, ``status`` and
``statusReason``. A job is tx's by its tag :data:`~tx_scheduler_aws_batch.request.TAG_VERSION`
(identity by labels, never by name), which only ``DescribeJobs`` returns. A job's identity
never changes for its id: its tags (set at ``SubmitJob``), its name, whether it is an array
job and its size. So it is read once, by ``DescribeJobs`` per 100 of the ids not known yet,
and kept per job id (tx's or not): in the process, and in a small file under tx's state
directory (:func:`ids_path`) that a process reads when it meets ids it does not know, so
that ``tx list`` after the watcher describes nothing either. The file is replaced whole
(written beside it, then renamed); it holds the jobs the last listing showed, tx's first,
at most :data:`FILE_LIMIT` (a job it lacks is described again, once per process);
concurrent writers may drop each other's latest entries, which costs a describe, never an
answer. A job's *state* is never kept: it is its summary's, every call. Once the jobs are
known a list is ``DescribeJobQueues`` and the ``ListJobs`` pages, whatever the number of
jobs: no ``DescribeJobs``. Tags changed after ``SubmitJob`` (``TagResource``/
``UntagResource`` of a job, which tx never does) are not seen for a job already known.

An array job (a sweep) is listed as its trials, child ``i`` as ``<queue>:<name>:<i>``, their
states read by ``DescribeJobs`` per 100 children (``<array job id>:<i>``). ``ListJobs`` with
``arrayJobId`` was weighed and not used: without ``jobStatus`` it lists only RUNNING
children, filters do not apply to children (``API_ListJobs``), so every child's state needs
one ``ListJobs`` per status (7), each at least a call; that is fewer calls than
``DescribeJobs`` by 100 only for arrays of more than 700 children, and children that move
between two of those 7 calls (a retried child goes back from RUNNING to RUNNABLE) could be
missed or listed twice, which describing them by id cannot. Once every child has ended it
can, as SUCCEEDED and FAILED never change (:func:`ended_children`): where the parent's
``statusSummary`` counts every child SUCCEEDED or FAILED, the FAILED ones are one
``ListJobs`` (``arrayJobId``, ``jobStatus=FAILED``; by 100) and the others SUCCEEDED, so a
finished 10,000-trial sweep is a call or two where it was 100. An array that has ended
(SUCCEEDED/FAILED, final in Batch) keeps its children's states in the process once they
were all read ended while its summary showed that status, as long as it still does (as the
status plane keeps an ended job's record): a finished sweep costs no call a tick.

API reference: https://docs.aws.amazon.com/batch/latest/APIReference/API_ListJobs.html,
https://docs.aws.amazon.com/batch/latest/APIReference/API_JobSummary.html,
https://docs.aws.amazon.com/batch/latest/APIReference/API_DescribeJobs.html.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Dict, List, Optional, Set, Tuple

from tx.schedulers import ListAppResponse, plane_dir

from tx_scheduler_aws_batch._client import account_key, call
from tx_scheduler_aws_batch._plane import DESCRIBE_BATCH, TERMINAL
from tx_scheduler_aws_batch._states import appstate_from_batch
from tx_scheduler_aws_batch._array import make_trial_id
from tx_scheduler_aws_batch.request import TAG_VERSION

__all__ = ["FILE_LIMIT", "ended_children", "ids_path", "list_apps"]

#: the most jobs the shared file holds (about 100 bytes each)
FILE_LIMIT = 20_000

#: a job's identity: (tagged by tx, job name, array size: 0 for a job that is no array)
Identity = Tuple[bool, str, int]
#: an ended array's children: (its status then, [(index, status, statusReason)])
EndedChildren = Tuple[str, List[Tuple[int, str, str]]]

_KNOWN: Dict[str, Dict[str, Identity]] = {}  # endpoint key -> job id -> identity
_ENDED: Dict[str, Dict[str, EndedChildren]] = {}  # endpoint key -> array job id -> children


def _forget() -> None:
    """Forget every job this process knows (for tests: a fresh process)."""
    _KNOWN.clear()
    _ENDED.clear()


def _key(batch: Any) -> str:
    """What names the endpoint and account ``batch`` reaches."""
    meta = getattr(batch, "meta", None)
    return f"{account_key()}|{getattr(meta, 'endpoint_url', '')}|{getattr(meta, 'region_name', '')}"


def ids_path(key: str) -> str:
    """The shared file of the jobs known on the endpoint ``key`` names,
    ``<state_dir>/plane/aws_batch-<hash of key>.ids``."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]
    return os.path.join(plane_dir(), f"aws_batch-{digest}.ids")


def _read_file(path: str) -> Dict[str, Identity]:
    try:
        with open(path, encoding="utf-8") as f:
            jobs = json.load(f)["jobs"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out: Dict[str, Identity] = {}
    if isinstance(jobs, dict):
        for job_id, v in jobs.items():
            if (isinstance(v, list) and len(v) == 3 and isinstance(v[0], bool) and isinstance(v[1], str)
                    and isinstance(v[2], int) and not isinstance(v[2], bool)):
                out[str(job_id)] = (v[0], v[1], v[2])
    return out


def _write_file(path: str, known: Dict[str, Identity]) -> None:
    """Store ``known`` (tx's jobs first, at most :data:`FILE_LIMIT`), replacing the file whole;
    a state directory that cannot be written shares nothing."""
    ordered = sorted(known.items(), key=lambda kv: not kv[1][0])[:FILE_LIMIT]
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".ids-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"jobs": {k: list(v) for k, v in ordered}}, f)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _identity(job: Dict[str, Any]) -> Identity:
    if TAG_VERSION not in (job.get("tags") or {}):
        return (False, "", 0)
    return (True, str(job["jobName"]), int((job.get("arrayProperties") or {}).get("size") or 0))


def ended_children(batch: Any, name: str, job_id: str, summary: Dict[str, Any],
                   ask_parent: bool) -> Optional[List[Tuple[int, str, str]]]:
    """``[(index, status, statusReason)]`` of every child of array job ``job_id`` where all have
    ended, else None (then describe them). ``summary``: the parent's ``JobSummary`` from
    ``ListJobs``, whose ``arrayProperties.statusSummary`` counts the children in each status
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ArrayPropertiesSummary.html);
    where it has none (moto), one ``DescribeJobs`` of the parent reads it if ``ask_parent``.
    SUCCEEDED and FAILED are final for a child (its retries come before), so counts of them
    are never too high, however old the summary: when they add up to the array's size every
    child has ended and the counts are exact. The FAILED children (their reasons: a cancel
    by tx is CANCELLED) are then one ``ListJobs`` of the array with ``jobStatus=FAILED``, by
    100; the others SUCCEEDED. None too where that listing does not give exactly as many
    FAILED children as counted.

    Raises:
        SchedulerError: a call failed (:func:`tx_scheduler_aws_batch._client.call`).
    """
    props = summary.get("arrayProperties") or {}
    counts, size = props.get("statusSummary"), props.get("size")
    if counts is None or size is None:
        if not ask_parent:
            return None
        jobs = call(f"describing array job {name}", batch.describe_jobs, jobs=[job_id])["jobs"]
        props = (jobs[0] if jobs else {}).get("arrayProperties") or {}
        counts, size = props.get("statusSummary") or {}, props.get("size")
    size, failed = int(size or 0), int(counts.get("FAILED") or 0)
    if size <= 0 or int(counts.get("SUCCEEDED") or 0) + failed != size:
        return None
    states = {k: ("SUCCEEDED", "") for k in range(size)}
    if failed:
        listed = call(f"listing the failed children of array job {name}", lambda: [
            j for page in batch.get_paginator("list_jobs").paginate(arrayJobId=job_id, jobStatus="FAILED")
            for j in page.get("jobSummaryList", [])])
        for child in listed:
            index = (child.get("arrayProperties") or {}).get("index")
            if index is None:
                index = int(str(child["jobId"]).rpartition(":")[2])
            states[int(index)] = ("FAILED", str(child.get("statusReason", "")))
        if sum(1 for s, _ in states.values() if s == "FAILED") != failed or len(states) != size:
            return None
    return [(k, s, r) for k, (s, r) in sorted(states.items())]


def _children(batch: Any, ended: Dict[str, EndedChildren], queue: str, job_id: str, ident: Identity,
              summary: Dict[str, Any]) -> List[ListAppResponse]:
    """An array job's trials: ``DescribeJobs`` per 100 children, or the children kept since
    it ended (see the module's doc)."""
    _, name, size = ident
    status = str(summary.get("status", ""))
    kept = ended.get(job_id)
    if kept is not None and status in TERMINAL and kept[0] == status:
        states = kept[1]
    else:
        # ended: from the parent's counts where the listing has them (no call), else by id
        states = ended_children(batch, name, job_id, summary, ask_parent=False) or []
        children = [] if states else [f"{job_id}:{k}" for k in range(size)]
        for i in range(0, len(children), DESCRIBE_BATCH):
            for child in call(f"describing the children of array job {name}",
                              batch.describe_jobs, jobs=children[i:i + DESCRIBE_BATCH])["jobs"]:
                index = (child.get("arrayProperties") or {}).get("index")
                if index is None:
                    index = int(str(child["jobId"]).rpartition(":")[2])
                states.append((int(index), str(child.get("status", "")), str(child.get("statusReason", ""))))
        if status in TERMINAL and len(states) == size and all(s in TERMINAL for _, s, _ in states):
            ended[job_id] = (status, states)
    return [ListAppResponse(app_id=make_trial_id(queue, name, index), state=appstate_from_batch(s, reason), name=name)
            for index, s, reason in states]


def list_apps(batch: Any) -> List[ListAppResponse]:
    """tx's jobs in every job queue of ``batch``'s region (see the module's doc).

    Raises:
        SchedulerError: a call failed (:func:`tx_scheduler_aws_batch._client.call`).
    """
    key = _key(batch)
    known = _KNOWN.setdefault(key, {})
    ended = _ENDED.setdefault(key, {})
    path = ids_path(key)
    read_file, learnt = False, False
    listed: Set[str] = set()
    out: List[ListAppResponse] = []
    queues = [q for page in call("listing job queues", lambda: list(
        batch.get_paginator("describe_job_queues").paginate())) for q in page.get("jobQueues", [])]
    for q in queues:
        qname = q["jobQueueName"]
        summaries: Dict[str, Dict[str, Any]] = {}
        for j in call(f"listing jobs of queue {qname}", lambda: [
            j for page in batch.get_paginator("list_jobs").paginate(
                jobQueue=q["jobQueueArn"], filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}])
            for j in page.get("jobSummaryList", [])
        ]):
            # an array's children ("<id>:<index>", moto lists them in the queue too) and
            # nodes ("<id>#<n>") are not jobs of their own
            if ":" not in j["jobId"] and "#" not in j["jobId"]:
                summaries.setdefault(j["jobId"], j)
        listed.update(summaries)
        new = [i for i in summaries if i not in known]
        if new and not read_file:
            read_file = True
            shared = _read_file(path)
            known.update((i, shared[i]) for i in new if i in shared)
            new = [i for i in new if i not in known]
        for i in range(0, len(new), DESCRIBE_BATCH):
            for job in call("describing jobs", batch.describe_jobs, jobs=new[i:i + DESCRIBE_BATCH])["jobs"]:
                if job.get("jobId") in summaries:
                    known[job["jobId"]] = _identity(job)
                    learnt = True
        arrays: List[Tuple[str, Identity]] = []
        for job_id, summary in summaries.items():
            ident = known.get(job_id)
            if ident is None or not ident[0]:
                continue  # not tx's, or gone before it was described
            if ident[2]:
                arrays.append((job_id, ident))
            else:
                out.append(ListAppResponse(app_id=f"{qname}:{ident[1]}", name=ident[1], state=appstate_from_batch(
                    str(summary.get("status", "")), str(summary.get("statusReason", "")))))
        for job_id, ident in arrays:
            out.extend(_children(batch, ended, qname, job_id, ident, summaries[job_id]))
    # what Batch no longer lists is forgotten (list(...): another thread may list at once)
    for i in list(known):
        if i not in listed:
            known.pop(i, None)
    for i in list(ended):
        if i not in listed:
            ended.pop(i, None)
    if learnt:
        _write_file(path, known)
    return out
