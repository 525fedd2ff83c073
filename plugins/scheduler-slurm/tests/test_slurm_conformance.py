"""tx's scheduler conformance kit against the real local Slurm cluster."""
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.schedulers import Stream
from tx.testing import SchedulerConformance
from tx_scheduler_slurm.scheduler import SlurmScheduler, create_scheduler

pytestmark = pytest.mark.slurm


class TestSlurmConformance(SchedulerConformance):
    timeout = 180.0
    log_streams = (Stream.STDOUT, Stream.STDERR)  # srun keeps them in separate files

    @pytest.fixture
    def scheduler(self, slurm_nodes: List[str]) -> SlurmScheduler:
        return create_scheduler("tx")

    @pytest.fixture
    def cfg(self, tmp_path: Path) -> Dict[str, Any]:
        return {"job_dir": str(tmp_path / "job")}

    def unknown_app_id(self) -> str:
        return "2147480000"  # a job id this cluster never gave
