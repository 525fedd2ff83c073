"""tx's scheduler conformance kit through boto3 against moto_server: simple mode (what jobs
that end inside SubmitJob can show) and Docker mode (real containers over podman, real
CloudWatch log lines, the node variables, node jobs and node log streams AWS documents).
Where moto cannot show a behaviour the test says why; every kit test runs in one mode at
least."""
from typing import Any, Dict, Sequence

import pytest

from tx.schedulers import Stream
from tx.specs import AppDef, Resource
from tx.testing import SchedulerConformance
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler

IMAGE = "localhost/busybox:tx"


class _AwsKit(SchedulerConformance):
    def app(self, name: str, image: str, roles: Sequence[Any]) -> AppDef:
        """The kit's apps, with the memory AWS Batch requires."""
        app = super().app(name, image, roles)
        for role in app.roles:
            role.resource = Resource(cpu=1, gpu=0, memMB=64)
        return app

    def dryrun_app_id(self, info: Any) -> str:
        """The job name: it is in the request several times (job, job definition, app id)."""
        return info.request.name

    def unknown_app_id(self) -> str:
        return "tx-q-simple:tx-conformance-unknown-0000"


class TestAwsBatchSimpleMode(_AwsKit):
    """moto's simple mode: every job SUCCEEDS inside SubmitJob, no container runs, no log
    is written; so no logs, no failing replica, nothing running to cancel (Docker mode runs
    those kit tests, and reads the log lines this mode's submit/describe/logs cannot)."""

    timeout = 60.0
    log_streams = ()
    running_not_observable = "moto's simple mode ends every job inside SubmitJob: it is SUCCEEDED at the first describe"

    @pytest.fixture
    def scheduler(self, aws_simple: Any) -> AwsBatchScheduler:
        return create_scheduler("tx")

    @pytest.fixture
    def cfg(self, aws_simple: Any) -> Dict[str, Any]:
        return {"queue": aws_simple.queue}

    def test_failing_replica(self) -> None:  # type: ignore[override]
        pytest.skip("moto's simple mode succeeds every job; Docker mode runs the kit's failing replica")

    def test_cancel(self) -> None:  # type: ignore[override]
        pytest.skip("moto's simple mode ends jobs inside SubmitJob: nothing runs to cancel; see Docker mode")

    def test_fresh_process_sees_the_app(self) -> None:  # type: ignore[override]
        pytest.skip("moto's simple mode has no running app to cancel from a fresh process; see Docker mode")


class TestAwsBatchDockerMode(_AwsKit):
    """moto's Docker mode over podman, through the test server made to set what AWS
    documents (:mod:`tx_scheduler_aws_batch._moto_nodes`): real containers, RUNNING states,
    every node with ``AWS_BATCH_JOB_NODE_INDEX``, a node job and a CloudWatch log stream of
    its own, so replicas of one role differ and fail alone, as on AWS Batch."""

    timeout = 180.0
    log_streams = (Stream.COMBINED,)
    rank0_is_localhost_on_rank0 = (
        "AWS Batch sets AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS on every node but the main one, "
        "which has no address of its own to read: tx's wrapper gives it localhost (as TorchX's ${rank0_env:=localhost})")

    @pytest.fixture
    def scheduler(self, aws_docker: Any) -> AwsBatchScheduler:
        return create_scheduler("tx", poll_interval=0.5)

    @pytest.fixture
    def cfg(self, aws_docker: Any) -> Dict[str, Any]:
        return {"queue": aws_docker.queue}

    @pytest.fixture
    def image(self) -> str:
        return IMAGE
