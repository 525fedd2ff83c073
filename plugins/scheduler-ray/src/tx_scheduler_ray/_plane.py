"""ray's status plane and call budget (:mod:`tx.schedulers.plane`, :mod:`tx.schedulers.budget`).

One snapshot per Ray head (dashboard URL), shared by every tx process of the host for a
short time: a fetch is one job list (Ray's Job API ``list_jobs``, ``GET /api/jobs/``) of
which tx's jobs (metadata ``tx_app``) are kept, each with what ``describe`` reads of it
(status, message, driver node, the app's metadata, the driver's spec). The fetch reads no
driver's state: following 1,000 finished apps is one ``list_jobs`` a tick, however many
ended jobs the head holds.

A driver's ``state.json`` (the replicas' states, exit codes, the first failure; one
log-API read) is read only for an app that is described (:func:`driver_state`), and the
read is shared by the host's processes like the snapshot (its own small record under the
state directory): a running app's state is read at most once per job snapshot, whoever
looks (``tx status`` in three shells and a watcher: one read, not four); an ended job's
final state is read once and kept while the job is listed ended with the same end time.

Every call of the head (the list, a job's info, a state read, submit, stop) takes a token of
the head's :class:`~tx.schedulers.budget.CallBudget` (``.txconfig`` ``[ray]
max_calls_per_minute``, default :data:`DEFAULT_CALLS_PER_MINUTE`). An answer that says the
head is busy (HTTP 429; for reads also 500, 502, 503, 504, which Ray's dashboard answers when
its GCS calls time out under load) is retried after a backoff with full jitter, then raises
:class:`~tx.schedulers.budget.ThrottledError`: the apps' states are unknown, not failed.
Following a log (``tx log -f``) reads the replica's file through the log API outside the
budget.

Ray docs: https://docs.ray.io/en/latest/cluster/running-applications/job-submission/rest.html.
"""
from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, Optional, TypeVar

from tx.schedulers import BackendThrottled, CallBudget, StatusPlane, budget_for

__all__ = ["DEFAULT_CALL_BURST", "DEFAULT_CALLS_PER_MINUTE", "ENDED", "budget", "call", "driver_state", "fetch_jobs",
           "job_item", "plane"]

T = TypeVar("T")

#: calls per minute to one Ray head by default: Ray documents no rate limit; its dashboard
#: is one process whose job and log handlers ask the GCS and the nodes' agents, and a head
#: with hundreds of jobs runs short of memory (ray-project/ray#60159): 10 a second
DEFAULT_CALLS_PER_MINUTE = 600.0
#: the bucket's size by default (a burst of 60 calls: tx status of 60 apps at once)
DEFAULT_CALL_BURST = 60.0
#: Ray job statuses that never change again
ENDED = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
#: seconds after a job ended by which its driver has written its last state (a driver
#: stopped with the job writes it within its SIGTERM handling); a state read earlier that
#: does not say the app ended is read again by the next snapshot
SETTLE_S = 30.0

_BUSY = re.compile(r"status code (429|500|502|503|504)\b")
_THROTTLED = re.compile(r"status code 429\b")
_PLANES: Dict[str, StatusPlane] = {}
#: the backend name of the driver states' records (one per job: ``ray-state-<key>.status``)
STATE_RECORD = "ray-state"


def plane(url: str) -> StatusPlane:
    """The shared snapshot of the Ray head whose dashboard is at ``url``."""
    p = StatusPlane("ray", url)
    return _PLANES.setdefault(p.path, p)


def budget(url: str) -> CallBudget:
    """The call budget of the Ray head at ``url`` (``.txconfig`` ``[ray]``).

    Raises:
        tx.config.files.ConfigError: a bad ``max_calls_per_minute`` / ``max_call_burst``.
    """
    return budget_for("ray", url, DEFAULT_CALLS_PER_MINUTE, DEFAULT_CALL_BURST)


def call(url: str, fn: Callable[[], T], what: str, read: bool = True) -> T:
    """Run ``fn`` (one request to the head at ``url``; the Ray SDK raises ``RuntimeError(
    "Request failed with status code N: ...")`` for an error answer) within the head's
    budget; a busy answer (429; for a ``read`` also 5xx) is retried with jitter.

    Raises:
        tx.schedulers.budget.ThrottledError: the head stayed busy for the budget's wait.
        whatever ``fn`` raises otherwise.
    """
    busy = _BUSY if read else _THROTTLED

    def once() -> T:
        try:
            return fn()
        except RuntimeError as e:
            if busy.search(str(e)):
                raise BackendThrottled(f"Ray head {url}: {' '.join(str(e).split())[:200]}") from None
            raise
    return budget(url).call(once, what=what)


def job_item(job: Any) -> Dict[str, Any]:
    """What tx keeps of a Ray ``JobDetails`` (JSON-able): the fields ``describe`` reads,
    and of the runtime env only the driver's spec."""
    from tx_scheduler_ray import tx_ray_driver

    env = ((getattr(job, "runtime_env", None) or {}).get("env_vars") or {})
    return {
        "status": str(job.status), "message": job.message, "error_type": getattr(job, "error_type", None),
        "job_id": getattr(job, "job_id", None), "driver_node_id": getattr(job, "driver_node_id", None),
        "metadata": dict(job.metadata or {}), "start_time": job.start_time, "end_time": job.end_time,
        "runtime_env": {"env_vars": {tx_ray_driver.SPEC_ENV: env[tx_ray_driver.SPEC_ENV]}}
        if tx_ray_driver.SPEC_ENV in env else {},
    }


def _settled(item: Dict[str, Any], now: float) -> bool:
    """Whether an ended job's state read is final: the driver's state says the app ended,
    or the job ended :data:`SETTLE_S` ago (a driver that died never writes again)."""
    state = item.get("state")
    if isinstance(state, dict) and state.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED"):
        return True
    end = item.get("end_time")
    return isinstance(end, (int, float)) and now - end / 1000.0 > SETTLE_S


def fetch_jobs(url: str, client: Any) -> Dict[str, Any]:
    """The snapshot's items: ``{"jobs": {submission_id: item}}`` of tx's jobs on the head
    (:func:`job_item`); one call, no driver's state read.

    Raises:
        as :func:`call`.
    """
    jobs = call(url, client.list_jobs, "list_jobs")
    out: Dict[str, Any] = {}
    for job in jobs:
        sid = job.submission_id
        if sid and "tx_app" in (job.metadata or {}):
            out[sid] = job_item(job)
    return {"jobs": out}


def _state_record(url: str, sid: str) -> StatusPlane:
    p = StatusPlane(STATE_RECORD, f"{url}|{sid}")
    return _PLANES.setdefault(p.path, p)


def driver_state(url: str, sid: str, info: Any,
                 read: Callable[[], Optional[Dict[str, Any]]]) -> Optional[Dict[str, Any]]:
    """The driver's ``state.json`` of job ``sid`` at ``url`` whose listing is ``info`` (a
    :func:`job_item` namespace with ``fetched_at``, epoch s), shared by the host's tx
    processes through a record of its own under the state directory:

    * an ended job whose recorded state is final (:func:`_settled`) for the same status and
      end time: that, without a call;
    * else the recorded state where it was read after ``info`` was fetched: one read per
      job and snapshot, whoever looks;
    * else ``read()`` (one log-API read), recorded (one process reads at a time; the
      others wait for its answer).

    Raises:
        whatever ``read`` raises (nothing is recorded then).
    """
    status, end = str(info.status), getattr(info, "end_time", None)
    record = _state_record(url, sid)
    last = record.last()
    if last is not None:
        kept = last.items
        if kept.get("settled") and kept.get("status") == status and kept.get("end_time") == end:
            return kept.get("state")  # type: ignore[no-any-return]
    since = float(getattr(info, "fetched_at", 0.0) or 0.0)

    def fetch() -> Dict[str, Any]:
        item: Dict[str, Any] = {"state": read(), "status": status, "end_time": end}
        item["settled"] = status in ENDED and _settled(item, time.time())
        return item
    snap = record.get(fetch, newer_than=since)  # read after the listing: as fresh as it
    return snap.items.get("state")  # type: ignore[no-any-return]
