"""A Ray job that FAILED before tx's driver ran: where Ray lost it (its job supervisor actor
died, or the job's code package was gone from the GCS when its runtime environment was set
up), the attempt is an infrastructure failure (a failover run moves on, as after a lost
node); where the job itself could not start (a pip requirement), it is not. From the job
records as the head's snapshot holds them (``_plane.job_item``); no Ray."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tx.specs import AppState, FailureKind
from tx_scheduler_ray._describe import PACKAGE_LOST, describe_job

#: Ray 2.60's message (ray/_private/runtime_env/packaging.py) as the job's ``message`` holds it
LOST = ("runtime_env setup failed: Failed to set up runtime environment.\n"
        f"{PACKAGE_LOST} gcs://_ray_pkg_6f1c2b7a9d0e4c11.zip from the GCS to the Ray worker node. "
        "The package may have prematurely been deleted from the GCS due to a long upload time or a "
        "problem with Ray. Try setting the environment variable RAY_RUNTIME_ENV_TEMPORARY_REFERENCE_EXPIRATION_S "
        "to a value larger than the upload time in seconds (the default is 600).")
PIP = ("runtime_env setup failed: Failed to set up runtime environment.\n"
       "Could not create the actor because its associated runtime env failed to be created.\n"
       "ERROR: No matching distribution found for tx-no-such-package==9.9")


def _job(message: str, error_type: Any) -> Any:
    return SimpleNamespace(status="FAILED", message=message, error_type=error_type, runtime_env={},
                           job_id=None, driver_node_id=None)


def _describe(info: Any) -> Any:
    return describe_job("127.0.0.1:8265-trial-abc", "http://127.0.0.1:8265", "trial-abc", info, None)


def test_a_package_ray_lost_is_an_infrastructure_failure() -> None:
    d = _describe(_job(LOST, "RUNTIME_ENV_SETUP_FAILURE"))
    assert d.state == AppState.FAILED
    assert [(a.index, a.state, a.kind) for a in d.attempts] == [(0, AppState.FAILED, FailureKind.INFRA)]
    assert d.attempts[0].reason.startswith("Ray lost the job before tx's driver ran: RUNTIME_ENV_SETUP_FAILURE: ")
    assert "gcs://_ray_pkg_6f1c2b7a9d0e4c11.zip" in d.attempts[0].reason and "\n" not in d.attempts[0].reason
    # the enum as the SDK's JobInfo holds it (a str Enum): its value is read, not "JobErrorType.X"
    from ray.dashboard.modules.job.common import JobErrorType

    assert _describe(_job(LOST, JobErrorType.RUNTIME_ENV_SETUP_FAILURE)).attempts[0].kind == FailureKind.INFRA
    died = _describe(_job("Job supervisor actor died: the node was lost", "JOB_SUPERVISOR_ACTOR_DIED"))
    assert [a.kind for a in died.attempts] == [FailureKind.INFRA]


def test_a_job_that_cannot_start_is_not() -> None:
    assert _describe(_job(PIP, "RUNTIME_ENV_SETUP_FAILURE")).attempts == []
    assert _describe(_job("Job supervisor actor could not be scheduled", "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE")).attempts == []
    # a lost package while the job is still being set up is not a failure yet
    pending = SimpleNamespace(**{**vars(_job(LOST, "RUNTIME_ENV_SETUP_FAILURE")), "status": "PENDING"})
    assert _describe(pending).attempts == []
