"""The call budget: one place every backend call of a scheduler goes through.

A :class:`CallBudget` is a token bucket per backend and cluster, shared by every tx
process on the host (``tx status`` in three shells, ``tx ui``, the failover watcher and the
sweep supervisors): its state is one small file under tx's state directory
(``<state_dir>/plane/<backend>-<cluster key>.budget``), read and written under an ``fcntl``
lock that is held only for that read and write, never across a backend call or a sleep. A
process that dies releases its lock with its file descriptors, so no crash leaves the
bucket locked; a file cut by a crash reads as a full bucket.

A scheduler opts in by calling its backend through :meth:`CallBudget.call`: the call waits
for a token, and an answer that says the backend is throttling (Slurm's ``Rate limit
exceeded``, AWS ``ThrottlingException``/``TooManyRequestsException``, HTTP 429) is retried
after a backoff with full jitter, up to ``max_wait`` seconds, then raises
:class:`ThrottledError`, a :class:`~tx.schedulers.api.SchedulerError` that says the
backend is busy: a throttled look is never turned into a failed app.

The rate is set in ``.txconfig``, per scheduler (keys :data:`CONFIG_KEYS`)::

    [slurm]
    max_calls_per_minute = 40   # refill rate; "unlimited" for no budget
    max_call_burst = 40         # bucket size (default: one minute's calls)

and defaults to the scheduler's default (its backend's documented limit; None: unlimited:
no file, the calls of this process are counted in memory). docs/scale.md lists the defaults.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import random
import re
import time
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from tx.config.environ import state_dir
from tx.config.files import ConfigError, scheduler_section
from tx.config.run_options import PLANE_KEYS
from tx.schedulers.api import SchedulerError

__all__ = [
    "CONFIG_KEYS", "BackendThrottled", "CallBudget", "ThrottledError", "backoff_delay", "budget_for",
    "is_throttle", "plane_dir",
]

T = TypeVar("T")

#: the ``.txconfig`` keys of a scheduler's section that set its budget and status plane
#: (not run options: :data:`tx.config.run_options.PLANE_KEYS`)
CONFIG_KEYS = PLANE_KEYS
#: seconds of the first backoff after a throttling answer, and the longest one
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
#: seconds a call keeps retrying throttling answers before :class:`ThrottledError`
DEFAULT_MAX_WAIT_S = 120.0

#: answers that mean "too many requests, try again" (Slurm's SLURMCTLD_COMMUNICATIONS_BACKOFF,
#: AWS's throttling error codes, HTTP 429)
_THROTTLE_TEXT = re.compile(
    r"rate limit exceeded|rpc rate limited|ThrottlingException|TooManyRequestsException|Throttling\b"
    r"|RequestLimitExceeded|Too Many Requests|\bHTTP(?: status)?:? 429\b|\(429\)|status(?: code)?:? 429\b",
    re.IGNORECASE,
)
_THROTTLE_CODES = frozenset({"ThrottlingException", "TooManyRequestsException", "Throttling",
                             "RequestLimitExceeded", "RequestThrottled", "SlowDown"})


class ThrottledError(SchedulerError):
    """The backend kept answering that it is rate limited for longer than tx waits; what
    was asked is unknown (an app's state is not known, not failed)."""


class BackendThrottled(Exception):
    """Raised by a scheduler's call (inside :meth:`CallBudget.call`) when the backend's
    answer says it throttles, where the answer is not an exception of its own (a command's
    exit status and stderr)."""


def is_throttle(exc: BaseException) -> bool:
    """Whether ``exc`` is a throttling answer: :class:`BackendThrottled`, an exception with
    an HTTP status 429 (``status``, ``status_code``, ``code``), a botocore ``ClientError``
    whose code is a throttling code, or a message naming one."""
    if isinstance(exc, BackendThrottled):
        return True
    for attr in ("status", "status_code", "code"):
        if getattr(exc, attr, None) in (429, "429"):
            return True
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response.get("Error", {}).get("Code") in _THROTTLE_CODES:
        return True
    return bool(_THROTTLE_TEXT.search(str(exc)))


def backoff_delay(attempt: int, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): "full jitter", uniform in
    ``[0, min(cap, base * 2**attempt)]`` (AWS Architecture Blog, "Exponential Backoff And
    Jitter"), so that many followers throttled together do not retry together."""
    return random.uniform(0, min(cap, base * (2 ** min(attempt, 30))))


def plane_dir() -> str:
    """``<state_dir>/plane``: the budgets' and the status snapshots' files (not created here)."""
    return os.path.join(state_dir(), "plane")


def _file_key(backend: str, cluster: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", backend)
    return f"{safe}-{hashlib.sha256(cluster.encode('utf-8')).hexdigest()[:12]}"


class CallBudget:
    """A token bucket shared by the tx processes of this host (see the module's doc).

    Args:
        backend: the scheduler's name (``slurm``).
        cluster: what names the cluster (``SLURM_CONF``'s path, a region, an API URL).
        per_minute: tokens added per minute; None: unlimited (calls are only counted).
        burst: the bucket's size (default ``per_minute``, at least 1).
        directory: where its file lives (default :func:`plane_dir`).
    """

    def __init__(self, backend: str, cluster: str = "", per_minute: Optional[float] = None,
                 burst: Optional[float] = None, directory: Optional[str] = None) -> None:
        self.backend, self.cluster = backend, cluster
        self.per_minute = per_minute
        self.burst = max(1.0, float(burst if burst is not None else (per_minute or 1.0)))
        self.path = os.path.join(directory or plane_dir(), _file_key(backend, cluster) + ".budget")
        self._local: Dict[str, float] = {}  # unlimited, or the state directory cannot be written

    def __repr__(self) -> str:
        rate = "unlimited" if self.per_minute is None else f"{self.per_minute:g}/min, burst {self.burst:g}"
        return f"CallBudget({self.backend!r}, {rate})"

    # -- the shared state ----------------------------------------------------------------
    def _update(self, change: Callable[[Dict[str, float]], T]) -> T:
        """Apply ``change`` to the bucket's state under the file lock (held for this only);
        an unlimited budget keeps only this process's counts (no file: nothing to share)."""
        if self.per_minute is None:
            return change(self._local)
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # a read-only state directory: a bucket of this process only
            return change(self._local)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 4096, 0)
            try:
                state = json.loads(raw.decode("utf-8")) if raw else {}
                if not isinstance(state, dict):
                    state = {}
            except ValueError:  # cut by a crash mid-write: start from a full bucket
                state = {}
            out = change(state)
            data = json.dumps(state, sort_keys=True).encode("utf-8")
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            return out
        finally:
            os.close(fd)  # releases the lock

    def _take(self, state: Dict[str, float]) -> float:
        """Take a token if there is one (0.0), else the seconds until there is one."""
        now = time.time()
        if self.per_minute is None:
            state["calls"] = state.get("calls", 0) + 1
            return 0.0
        rate = self.per_minute / 60.0
        last = min(float(state.get("t", now)), now)  # a clock set back adds nothing
        tokens = min(self.burst, float(state.get("tokens", self.burst)) + (now - last) * rate)
        state["t"] = now
        if tokens >= 1.0:
            state["tokens"] = tokens - 1.0
            state["calls"] = state.get("calls", 0) + 1
            return 0.0
        state["tokens"] = tokens
        return (1.0 - tokens) / rate if rate > 0 else math.inf

    def acquire(self, max_wait: float = DEFAULT_MAX_WAIT_S) -> float:
        """Wait for a token; returns the seconds waited.

        Raises:
            ThrottledError: no token within ``max_wait`` seconds (a rate of 0).
        """
        start = time.monotonic()
        while True:
            wait = self._update(self._take)
            if wait <= 0:
                return time.monotonic() - start
            waited = time.monotonic() - start
            if waited + wait > max_wait:
                raise ThrottledError(
                    f"{self.backend}: no call allowed within {max_wait:g} s by its budget "
                    f"({self.per_minute:g} calls per minute, .txconfig [{self.backend}] max_calls_per_minute)")
            time.sleep(min(wait, 1.0))  # other processes may take the token first: look again

    def note(self, key: str, n: float = 1) -> None:
        """Add ``n`` to the shared counter ``key`` (``throttled``)."""
        def add(state: Dict[str, float]) -> None:
            state[key] = state.get(key, 0) + n
        self._update(add)

    def counts(self) -> Dict[str, float]:
        """The shared counters: ``calls`` (calls let through), ``throttled`` (throttling
        answers seen), ``tokens`` left (limited budgets)."""
        return dict(self._update(lambda s: dict(s)))

    def call(self, fn: Callable[[], T], what: str = "call", max_wait: float = DEFAULT_MAX_WAIT_S) -> T:
        """Run ``fn`` (one backend call) within the budget, retrying throttling answers
        (:func:`is_throttle`) after :func:`backoff_delay`; other exceptions pass through.

        Raises:
            ThrottledError: the budget or the backend kept ``fn`` from running for
                ``max_wait`` seconds.
        """
        start = time.monotonic()
        attempt = 0
        while True:
            self.acquire(max(0.0, max_wait - (time.monotonic() - start)))
            try:
                return fn()
            except Exception as e:
                if not is_throttle(e):
                    raise
                self.note("throttled")
                delay = backoff_delay(attempt)
                if time.monotonic() - start + delay > max_wait:
                    raise ThrottledError(
                        f"{self.backend}: {what} was throttled by the backend for {max_wait:g} s "
                        f"({' '.join(str(e).split())[:200]}); the apps' states are unknown, not failed"
                    ) from None
                time.sleep(delay)
                attempt += 1


def _rate(value: Optional[str], key: str, backend: str) -> Optional[float]:
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("", "none", "unlimited", "inf"):
        return math.inf
    try:
        rate = float(text)
    except ValueError:
        rate = -1.0
    if not rate > 0 or math.isinf(rate) or math.isnan(rate):
        raise ConfigError(f"[{backend}] {key} in .txconfig must be a positive number or 'unlimited', got {value!r}")
    return rate


_BUDGETS: Dict[Tuple[str, str, str, Optional[float], Optional[float]], CallBudget] = {}


def budget_for(backend: str, cluster: str = "", default_per_minute: Optional[float] = None,
               default_burst: Optional[float] = None) -> CallBudget:
    """The budget of ``backend`` on ``cluster``: ``.txconfig`` ``[<backend>]
    max_calls_per_minute`` / ``max_call_burst``, else ``default_per_minute`` (None:
    unlimited) and ``default_burst`` (None: one minute's calls). Read once per process and
    cluster.

    Raises:
        ConfigError: a value that is not a positive number or ``unlimited``.
    """
    key = (plane_dir(), backend, cluster, default_per_minute, default_burst)
    budget = _BUDGETS.get(key)
    if budget is None:
        section = scheduler_section(backend)
        per_minute = _rate(section.get("max_calls_per_minute"), "max_calls_per_minute", backend)
        burst = _rate(section.get("max_call_burst"), "max_call_burst", backend)
        if per_minute is None:
            per_minute = default_per_minute
            if burst is None:
                burst = default_burst
        if per_minute is not None and math.isinf(per_minute):
            per_minute = None
        budget = _BUDGETS[key] = CallBudget(backend, cluster, per_minute,
                                            None if burst is None or math.isinf(burst) else burst)
    return budget


def _reset_for_tests() -> Any:
    """Forget the budgets read so far (tests that change ``.txconfig`` or the state dir)."""
    _BUDGETS.clear()
