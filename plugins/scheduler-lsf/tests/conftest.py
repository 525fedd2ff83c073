"""Fixtures of the tx-scheduler-lsf tests: a scheduler and the apps a test submits, on the
session's private OpenLava cluster (``lsf_cluster`` of :mod:`tx_scheduler_lsf.testing`,
loaded by the repository's root ``conftest.py``; see there where the tests skip)."""
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from tx.specs import AppDef, Resource, Role, is_terminal
from tx_scheduler_lsf.scheduler import LsfScheduler, create_scheduler


class Apps:
    """Submits apps, remembers them, and cancels the ones still running at teardown."""

    py = sys.executable

    def __init__(self, sched: LsfScheduler, job_dir: Path) -> None:
        self.sched = sched
        self.job_dir = job_dir
        self.ids: List[str] = []

    def cfg(self, **extra: Any) -> Dict[str, Any]:
        return {"jobdir": str(self.job_dir), **extra}

    @staticmethod
    def role(name: str, entrypoint: str, args: List[str], replicas: int = 1, **kw: Any) -> Role:
        kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=64))
        return Role(name, image="", entrypoint=entrypoint, args=args, num_replicas=replicas, **kw)

    def submit(self, roles: List[Role], name: str = "t", **cfg: Any) -> str:
        app_id = self.sched.submit(AppDef(name, roles=roles), self.cfg(**cfg))
        self.ids.append(app_id)
        return app_id

    def wait(self, app_id: str, timeout: float = 120) -> Any:
        desc = self.sched.wait(app_id, timeout=timeout, poll_interval=0.5)
        assert desc is not None and is_terminal(desc.state), desc
        return desc

    def text(self, app_id: str, role: str, k: int = 0, streams: Optional[str] = "stdout") -> str:
        return "".join(self.sched.log_iter(app_id, role, k, streams=streams))

    def cleanup(self) -> None:
        for app_id in self.ids:
            desc = self.sched.describe(app_id)
            if desc is not None and not is_terminal(desc.state):
                self.sched.cancel(app_id)


@pytest.fixture
def sched(lsf_cluster: Any) -> LsfScheduler:
    return create_scheduler("tx")


@pytest.fixture
def apps(sched: LsfScheduler, tmp_path: Path) -> Iterator[Apps]:
    a = Apps(sched, tmp_path / "job")
    yield a
    a.cleanup()
