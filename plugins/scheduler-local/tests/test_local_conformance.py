"""The tx conformance kit against local_cwd and local_dir (real processes)."""
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.testing import SchedulerConformance
from tx_scheduler_local.scheduler import LocalScheduler, create_cwd_scheduler, create_dir_scheduler


class TestLocalCwdConformance(SchedulerConformance):
    timeout = 60.0

    @pytest.fixture
    def scheduler(self, state_dir: Path) -> LocalScheduler:
        return create_cwd_scheduler("tx", state_dir=str(state_dir))

    @pytest.fixture
    def cfg(self, log_root: Path) -> Dict[str, Any]:
        return {"log_dir": str(log_root), "cancel_timeout": 5.0}


class TestLocalDirConformance(SchedulerConformance):
    timeout = 60.0

    @pytest.fixture
    def scheduler(self, state_dir: Path) -> LocalScheduler:
        return create_dir_scheduler("tx", state_dir=str(state_dir), supervisor="exec")

    @pytest.fixture
    def cfg(self, log_root: Path) -> Dict[str, Any]:
        return {"log_dir": str(log_root)}

    @pytest.fixture
    def image(self, tmp_path: Path) -> str:
        d = tmp_path / "image"
        d.mkdir()
        return str(d)
