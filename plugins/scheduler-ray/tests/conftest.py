"""Fixtures of the tx-scheduler-ray tests: a scheduler and the apps a test submits, on the
session's private Ray head (the ``ray_head`` fixture of :mod:`tx_scheduler_ray.testing`,
loaded by the repository's root ``conftest.py``; see there how the head is kept private).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from tx.specs import AppDef, Resource, Role, is_terminal
from tx.testing import find_replica
from tx_scheduler_ray.scheduler import RayScheduler, create_scheduler


class Apps:
    """Submits apps, remembers them, and cancels the ones still running at teardown."""

    py = sys.executable

    def __init__(self, sched: RayScheduler) -> None:
        self.sched = sched
        self.ids: List[str] = []

    @staticmethod
    def role(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
        kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=64))
        return Role(name, image="", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)

    def submit(self, roles: List[Role], name: str = "t", cfg: Optional[Dict[str, Any]] = None) -> str:
        app_id = self.sched.submit(AppDef(name, roles=roles), cfg or {})
        self.ids.append(app_id)
        return app_id

    def wait(self, app_id: str, timeout: float = 120) -> Any:
        desc = self.sched.wait(app_id, timeout=timeout, poll_interval=0.5)
        assert desc is not None and is_terminal(desc.state), desc
        return desc

    def wait_for(self, app_id: str, pred: Any, timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            desc = self.sched.describe(app_id)
            if pred(desc) or time.monotonic() > deadline:
                return desc
            time.sleep(0.5)

    replica = staticmethod(find_replica)

    def text(self, app_id: str, role: str, k: int = 0, streams: Optional[str] = "combined") -> str:
        return "".join(self.sched.log_iter(app_id, role, k, streams=streams))

    def cleanup(self) -> None:
        for app_id in self.ids:
            try:
                desc = self.sched.describe(app_id)
                if desc is not None and not is_terminal(desc.state):
                    self.sched.cancel(app_id)
                    self.sched.wait(app_id, timeout=60)
            except Exception:  # noqa: BLE001 - best effort
                pass


@pytest.fixture
def sched(ray_head: str) -> Iterator[RayScheduler]:
    s = create_scheduler("tx")
    yield s
    s.close()


@pytest.fixture
def apps(sched: RayScheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Apps]:
    monkeypatch.chdir(tmp_path)  # the working_dir uploaded with each job: small
    a = Apps(sched)
    yield a
    a.cleanup()
