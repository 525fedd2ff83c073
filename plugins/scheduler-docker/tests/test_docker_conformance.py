"""The conformance kit of tx.testing against local_docker on the session's podman engine."""
from typing import Any

import pytest

from tx.testing import SchedulerConformance


class TestLocalDockerConformance(SchedulerConformance):
    timeout = 180.0

    @pytest.fixture
    def scheduler(self, podman_engine: Any) -> Any:
        from tx.schedulers import get_scheduler_factories

        sched = get_scheduler_factories()["local_docker"]("txkit")
        yield sched
        sched.close()

    @pytest.fixture
    def image(self) -> str:
        return "localhost/busybox:tx"

    def kept_run_option(self, scheduler: Any) -> Any:
        return "copy_env", ["TX_KIT_NONE_*"]
