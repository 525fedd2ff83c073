"""tx's scheduler conformance kit through the official Batch and Logging clients, against
the local server of ``fake_gcp`` (which runs every task as a local process)."""
from typing import Any, Optional, Tuple

import pytest

from tx.specs import AppDryRunInfo
from tx.testing import SchedulerConformance
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler


class TestGcpBatchConformance(SchedulerConformance):
    timeout = 60.0
    poll_interval = 0.3

    @pytest.fixture
    def scheduler(self, fake_gcp: Any) -> GcpBatchScheduler:
        return create_scheduler("tx")

    @pytest.fixture
    def image(self) -> str:
        return "ghcr.io/pytorch/torchx:0.7.0"

    def kept_run_option(self, scheduler: GcpBatchScheduler) -> Tuple[str, str]:
        return "machine_type", "e2-standard-4"

    def unknown_app_id(self) -> str:
        return "tx-test-project:us-central1:tx-conformance-unknown-0000"

    def dryrun_app_id(self, info: AppDryRunInfo[Any]) -> Optional[str]:
        # the job id appears in the request (env, labels); the app id adds project:location
        return info.request.job_id
