"""tx's scheduler conformance kit against the session's private OpenLava cluster."""
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.schedulers import Stream
from tx.testing import SchedulerConformance
from tx_scheduler_lsf.scheduler import LsfScheduler, create_scheduler

pytestmark = pytest.mark.lsf


class TestLsfConformance(SchedulerConformance):
    timeout = 120.0
    log_streams = (Stream.STDOUT, Stream.STDERR)  # each replica writes its own .out and .err

    @pytest.fixture
    def scheduler(self, lsf_cluster: Any) -> LsfScheduler:
        return create_scheduler("tx")

    @pytest.fixture
    def cfg(self, tmp_path: Path) -> Dict[str, Any]:
        return {"jobdir": str(tmp_path / "job")}

    def unknown_app_id(self) -> str:
        return "txconf-never-submitted-zz9"
