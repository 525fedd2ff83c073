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

from tx.schedulers import SchedulerError


#: the variables with which Ray's SDK replaces the address a client is given
_ADDRESS_ENV = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
_ENV_LOCK = threading.Lock()


def make_client(url: str) -> Any:
    """A ``ray.job_submission.JobSubmissionClient`` for the dashboard at ``url``, and no
    other: Ray's SDK replaces the address it is given with ``$RAY_API_SERVER_ADDRESS`` or
    ``$RAY_ADDRESS`` where they are set (``ray.dashboard.utils.
    get_address_for_submission_client``), so an app id naming one head would be asked at
    another; they are hidden from it while the client is made (under a lock).

    Raises:
        SchedulerError: no dashboard answers there.
    """
    from ray.job_submission import JobSubmissionClient

    try:
        with _ENV_LOCK:
            saved = {k: os.environ.pop(k) for k in _ADDRESS_ENV if k in os.environ}
            try:
                client = JobSubmissionClient(url)
            finally:
                os.environ.update(saved)
        return client
    except ConnectionError as e:
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
