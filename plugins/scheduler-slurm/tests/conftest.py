"""Fixtures of the tx-scheduler-slurm tests: a scheduler and the apps a test submits, on
the session's private cluster (the ``slurm_cluster`` and ``memory_clusters`` fixtures of
:mod:`tx_scheduler_slurm.testing`, loaded by the repository's root ``conftest.py``; see there
how the cluster is kept private and where the tests skip).
"""
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from tx.specs import AppDef, Resource, Role, is_terminal
from tx.testing import find_replica
from tx_scheduler_slurm.scheduler import SlurmScheduler, create_scheduler


class Apps:
    """Submits apps, remembers them, and cancels the ones still running at teardown."""

    py = sys.executable

    def __init__(self, sched: SlurmScheduler, job_dir: Path) -> None:
        self.sched = sched
        self.job_dir = job_dir
        self.ids: List[str] = []

    def cfg(self, **extra: Any) -> Dict[str, Any]:
        return {"job_dir": str(self.job_dir), **extra}

    @staticmethod
    def role(name: str, entrypoint: str, args: List[str], replicas: int = 1, **kw: Any) -> Role:
        kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=64))
        return Role(name, image="", entrypoint=entrypoint, args=args, num_replicas=replicas, **kw)

    def submit(self, roles: List[Role], name: str = "t", **cfg: Any) -> str:
        app_id = self.sched.submit(AppDef(name, roles=roles), self.cfg(**cfg))
        self.ids.append(app_id)
        return app_id

    def wait(self, app_id: str, timeout: float = 180) -> Any:
        desc = self.sched.wait(app_id, timeout=timeout, poll_interval=0.5)
        assert desc is not None and is_terminal(desc.state), desc
        return desc

    replica = staticmethod(find_replica)

    def text(self, app_id: str, role: str, k: int = 0, streams: Optional[str] = "stdout") -> str:
        return "".join(self.sched.log_iter(app_id, role, k, streams=streams))

    def cleanup(self) -> None:
        for app_id in self.ids:
            desc = self.sched.describe(app_id)
            if desc is not None and not is_terminal(desc.state):
                self.sched.cancel(app_id)


@pytest.fixture
def sched(slurm_nodes: List[str]) -> SlurmScheduler:
    return create_scheduler("tx")


@pytest.fixture
def apps(sched: SlurmScheduler, tmp_path: Path) -> Iterator[Apps]:
    a = Apps(sched, tmp_path / "job")
    yield a
    a.cleanup()

