"""Ray's Job Submission client, and Ray's errors as one-line messages.

The client talks to the dashboard's HTTP API of the cluster
(https://docs.ray.io/en/latest/cluster/running-applications/job-submission/sdk.html);
``ray`` is imported on first use only.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any, Iterator

from tx.schedulers import SchedulerError, timeout_from_env


#: the variables with which Ray's SDK replaces the address a client is given
_ADDRESS_ENV = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
_ENV_LOCK = threading.Lock()
#: the environment variable that sets the seconds a request to the dashboard may wait to
#: connect and for each read of its answer (Ray's SDK sets no timeout: a head that accepts
#: connections and never answers kept ``tx status``, the watcher and ``tx ui`` waiting)
ENV_TIMEOUT = "TX_RAY_TIMEOUT"
#: its default, seconds (a package upload's answer may wait 4 times as long)
DEFAULT_TIMEOUT_S = 30.0
_CLIENT_CLASS: Any = None


def request_timeout() -> float:
    """``$TX_RAY_TIMEOUT`` or :data:`DEFAULT_TIMEOUT_S`, seconds.

    Raises:
        SchedulerError: a value that is not a positive number of seconds.
    """
    try:
        return timeout_from_env(ENV_TIMEOUT, DEFAULT_TIMEOUT_S)
    except ValueError as e:
        raise SchedulerError(str(e)) from None


def _client_class() -> Any:
    """``JobSubmissionClient`` whose requests wait at most :func:`request_timeout` to connect
    and for each read (a PUT, a package upload, 4 times as long to be answered): the SDK
    passes a request's keyword arguments on to ``requests.request`` (its ``_do_request``)."""
    global _CLIENT_CLASS
    if _CLIENT_CLASS is None:
        from ray.job_submission import JobSubmissionClient

        class TimedJobSubmissionClient(JobSubmissionClient):  # type: ignore[misc, valid-type]
            def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
                t = request_timeout()
                kwargs.setdefault("timeout", (t, t * 4 if method.upper() == "PUT" else t))
                return super()._do_request(method, endpoint, **kwargs)

        _CLIENT_CLASS = TimedJobSubmissionClient
    return _CLIENT_CLASS


def make_client(url: str) -> Any:
    """A ``ray.job_submission.JobSubmissionClient`` for the dashboard at ``url``, and no
    other: Ray's SDK replaces the address it is given with ``$RAY_API_SERVER_ADDRESS`` or
    ``$RAY_ADDRESS`` where they are set (``ray.dashboard.utils.
    get_address_for_submission_client``), so an app id naming one head would be asked at
    another; they are hidden from it while the client is made (under a lock).

    Its requests wait at most ``$TX_RAY_TIMEOUT`` (30 s) to connect and for each read.

    Raises:
        SchedulerError: no dashboard answers there (within the timeout).
    """
    cls = _client_class()
    try:
        with _ENV_LOCK:
            saved = {k: os.environ.pop(k) for k in _ADDRESS_ENV if k in os.environ}
            try:
                client = cls(url)
            finally:
                os.environ.update(saved)
        return client
    except OSError as e:  # the SDK's ConnectionError, requests' timeouts (OSErrors too)
        raise SchedulerError(f"no Ray dashboard answers at {url}: {one_line(e)} "
                             "(set dashboard_address or RAY_ADDRESS)") from None


@contextlib.contextmanager
def quiet_sdk() -> Iterator[None]:
    """The SDK logs each package upload at INFO on the console; keep that at debug level."""
    names = ("ray.dashboard.modules.dashboard_sdk", "ray._private.runtime_env.packaging")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def one_line(e: BaseException) -> str:
    """``e`` as one line of at most 400 characters (its type name when it has no text)."""
    text = " ".join(str(e).split())
    return text[:400] if text else type(e).__name__
