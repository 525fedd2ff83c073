"""ray's status plane and call budget (:mod:`tx.schedulers.plane`, :mod:`tx.schedulers.budget`).

One snapshot per Ray head (dashboard URL), shared by every tx process of the host for a
short time: a fetch is one job list (Ray's Job API ``list_jobs``, ``GET /api/jobs/``) of
which tx's jobs (metadata ``tx_app``) are kept, each with what ``describe`` reads of it
(status, message, driver node, the app's metadata, the driver's spec). A job that has ended
carries its driver's final ``state.json`` (read through the dashboard's log API once: the
first snapshot that sees the job ended, then kept from snapshot to snapshot while the job
is listed ended): following 1,000 finished apps is one ``list_jobs`` a tick. The state of a
running job changes while it runs and is read by ``describe`` itself (one log-API read per
running app and look).

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

__all__ = ["DEFAULT_CALL_BURST", "DEFAULT_CALLS_PER_MINUTE", "ENDED", "budget", "call", "fetch_jobs", "job_item",
           "plane"]

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


def fetch_jobs(url: str, client: Any, previous: Optional[Dict[str, Any]],
               read_state: Callable[[str, Dict[str, Any]], Optional[Dict[str, Any]]]) -> Dict[str, Any]:
    """The snapshot's items: ``{"jobs": {submission_id: item}}`` of tx's jobs on the head
    (see the module's doc). ``read_state(item)`` reads an ended job's driver state (one
    call); it is not called for a job whose settled state ``previous`` holds.

    Raises:
        as :func:`call`.
    """
    jobs = call(url, client.list_jobs, "list_jobs")
    now = time.time()
    before = (previous or {}).get("jobs") or {}
    out: Dict[str, Any] = {}
    for job in jobs:
        sid = job.submission_id
        if not sid or "tx_app" not in (job.metadata or {}):
            continue
        item = job_item(job)
        if item["status"] in ENDED:
            old = before.get(sid)
            if (old is not None and old.get("settled") and old.get("status") == item["status"]
                    and old.get("end_time") == item["end_time"]):
                item["state"], item["settled"] = old.get("state"), True
            else:
                try:
                    item["state"] = read_state(sid, item)
                    item["settled"] = _settled(item, now)
                except Exception:  # noqa: BLE001 - the log API's or the head's: asked again next time
                    item["state"], item["settled"] = None, False
        out[sid] = item
    return {"jobs": out}
