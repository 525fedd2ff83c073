"""gcp_batch's status plane (:mod:`tx.schedulers.plane`) and call budget
(:mod:`tx.schedulers.budget`).

* One snapshot per Batch endpoint, project and location, shared by every tx process of the
  host for a short time: ``list_jobs`` of the location (pages of :data:`LIST_PAGE_SIZE`),
  keeping tx's jobs (label ``tx_version``), and ``list_tasks`` of each job whose status
  changed since the last snapshot (its state, its task group's counts by state, its number
  of status events; Batch lists tasks per task group only, never across jobs): following
  1,000 apps where nothing changed costs one ``list_jobs`` page a tick. A sweep's job
  (thousands of tasks) is not given its tasks here: its trials' states are one
  ``list_tasks`` per sweep (``states_of``).
* Every HTTP request to Batch (each page, each retry) takes a token of the host's budget,
  ``.txconfig`` ``[gcp_batch] max_calls_per_minute``, default :data:`DEFAULT_CALLS_PER_MINUTE`.
* The reads are retried by google-api-core's :class:`~google.api_core.retry.Retry` (full
  jitter, exponential) on ``429 Too Many Requests``/``RESOURCE_EXHAUSTED`` and ``503``;
  beyond :data:`RETRY_TIMEOUT_S` they raise :class:`tx.schedulers.budget.ThrottledError`.
  A create is not retried: there 429 means a quota of resources (CPUs) is used up.

References: https://cloud.google.com/batch/quotas (quotas and limits),
https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs/list,
https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs.taskGroups.tasks/list.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Dict, List, Optional

from tx.schedulers import CallBudget, StatusPlane, budget_for

__all__ = ["DEFAULT_CALLS_PER_MINUTE", "LIST_PAGE_SIZE", "RETRY_TIMEOUT_S", "budget", "fetch_location", "job_of", "plane",
           "read_retry", "task_of", "with_budget"]

#: Batch's documented rate of job mutations, 100 per second per project and region
#: (https://cloud.google.com/batch/quotas)
DEFAULT_CALLS_PER_MINUTE = 100 * 60
#: ``list_jobs`` and ``list_tasks`` page size asked (Batch v1 documents no default and no maximum)
LIST_PAGE_SIZE = 1000
#: seconds a read keeps retrying 429 / 503 answers
RETRY_TIMEOUT_S = 120.0

_PLANES: Dict[str, StatusPlane] = {}


def plane(endpoint: str, project: str, location: str) -> StatusPlane:
    """The shared snapshot of ``project``'s jobs in ``location`` on ``endpoint``."""
    p = StatusPlane("gcp_batch", f"{endpoint}|{project}|{location}")
    return _PLANES.setdefault(p.path, p)


def budget(endpoint: str) -> CallBudget:
    """The call budget of the Batch endpoint ``endpoint``."""
    return budget_for("gcp_batch", endpoint, DEFAULT_CALLS_PER_MINUTE)


def with_budget(client: Any, endpoint: str) -> Any:
    """``client`` (a ``BatchServiceClient`` over REST) whose every HTTP request first takes a
    token of :func:`budget` (its transport's ``requests`` session); unchanged where the
    transport has no such session."""
    session = getattr(getattr(client, "transport", None), "_session", None)
    if session is None or getattr(session, "_tx_budget", False):
        return client
    b, send = budget(endpoint), session.request

    def request(*args: Any, **kwargs: Any) -> Any:
        b.acquire()
        return send(*args, **kwargs)

    session.request = request
    session._tx_budget = True
    return client


def read_retry() -> Any:
    """google-api-core's retry of a read: 429 and 503, full jitter from 1 s doubling to 30 s,
    for :data:`RETRY_TIMEOUT_S` seconds."""
    from google.api_core import exceptions as gex
    from google.api_core import retry

    return retry.Retry(predicate=retry.if_exception_type(gex.TooManyRequests, gex.ResourceExhausted,
                                                         gex.ServiceUnavailable),
                       initial=1.0, maximum=30.0, multiplier=2.0, timeout=RETRY_TIMEOUT_S)


def _key(job: Any) -> str:
    """What changes when a job's tasks may have (``job``: the raw protobuf message): its
    state, its task groups' counts by state, its number of status events."""
    st = job.status
    counts = {name: dict(g.counts) for name, g in st.task_groups.items()}
    return json.dumps([st.state, counts, len(st.status_events)], sort_keys=True)


def _b64(msg: Any) -> str:
    return base64.b64encode(msg.SerializeToString()).decode("ascii")


def job_of(text: str) -> Any:
    """The ``batch_v1.Job`` a snapshot holds (its wire bytes, base64)."""
    from google.cloud import batch_v1

    return batch_v1.Job.deserialize(base64.b64decode(text))


def task_of(text: str) -> Any:
    """A ``batch_v1.Task`` a snapshot holds (its wire bytes, base64)."""
    from google.cloud import batch_v1

    return batch_v1.Task.deserialize(base64.b64decode(text))


def fetch_location(client: Any, parent: str, previous: Optional[Dict[str, Any]], is_sweep_job: Any) -> Dict[str, Any]:
    """tx's jobs of ``parent`` (``projects/P/locations/L``) as the snapshot's items: ``jobs``:
    job id -> ``{"job": Job, "key": _key, "tasks": [Task] or None}`` (messages as base64 of
    their wire bytes: :func:`job_of`, :func:`task_of`; JSON would cost 10 times the CPU).

    Raises:
        google.api_core exceptions (the caller explains them): a call failed, after retries.
    """
    old: Dict[str, Any] = (previous or {}).get("jobs") or {}
    pager = client.list_jobs(request={"parent": parent, "page_size": LIST_PAGE_SIZE}, retry=read_retry())
    out: Dict[str, Any] = {}
    # the raw protobuf messages: proto-plus wraps every attribute read
    for job in (j for page in pager.pages for j in type(page).pb(page).jobs):
        if "tx_version" not in job.labels:
            continue
        job_id = job.name.rsplit("/", 1)[-1]
        key = _key(job)
        tasks: Optional[List[str]] = None
        if not is_sweep_job(job) and job.task_groups:
            before = old.get(job_id)
            if before is not None and before.get("key") == key and before.get("tasks") is not None:
                tasks = before["tasks"]
            else:
                group = job.task_groups[0].name or f"{job.name}/taskGroups/group0"
                pages = client.list_tasks(request={"parent": group, "page_size": LIST_PAGE_SIZE},
                                          retry=read_retry()).pages
                tasks = [_b64(t) for page in pages for t in type(page).pb(page).tasks]
        out[job_id] = {"job": _b64(job), "key": key, "tasks": tasks}
    return {"jobs": out}
