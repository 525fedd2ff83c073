"""Ray's Job Submission client, and Ray's errors as one-line messages.

The client talks to the dashboard's HTTP API of the cluster
(https://docs.ray.io/en/latest/cluster/running-applications/job-submission/sdk.html);
``ray`` is imported on first use only.
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

from tx.schedulers import SchedulerError


def make_client(url: str) -> Any:
    """A ``ray.job_submission.JobSubmissionClient`` for the dashboard at ``url``.

    Raises:
        SchedulerError: no dashboard answers there.
    """
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(url)
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
