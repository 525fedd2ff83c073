"""tx's scheduler conformance kit against a real local Ray head (conftest.ray_head)."""
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from tx.testing import SchedulerConformance
from tx_scheduler_ray.scheduler import RayScheduler, create_scheduler


class TestRayConformance(SchedulerConformance):
    timeout = 180.0

    @pytest.fixture
    def scheduler(self, ray_head: str) -> Iterator[RayScheduler]:
        s = create_scheduler("tx")
        yield s
        s.close()

    @pytest.fixture
    def image(self, tmp_path: Path) -> str:
        """A small directory: it becomes the job's working_dir (uploaded to the cluster)."""
        d = tmp_path / "image"
        d.mkdir()
        return str(d)

    def kept_run_option(self, scheduler: RayScheduler) -> Tuple[str, str]:
        return "cluster_name", "txkit"  # read with cluster_config_file only
