"""Fixtures of the tx-scheduler-local tests: an isolated state dir, a log dir, schedulers."""
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from tx.specs import AppDef, AppState, Role
from tx.testing import find_replica
from tx_scheduler_local.scheduler import LocalScheduler, create_cwd_scheduler

PY = sys.executable


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("TX_STATE_DIR", str(d))
    return d


@pytest.fixture
def log_root(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def cfg(log_root: Path) -> Dict[str, Any]:
    return {"log_dir": str(log_root)}


@pytest.fixture
def sched(state_dir: Path) -> Iterator[LocalScheduler]:
    s = create_cwd_scheduler("tx", state_dir=str(state_dir))
    yield s
    for app in s.list():
        if app.state.name not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            s.cancel(app.app_id)
    s.close()


class Helpers:
    """Small helpers for the tests (a fixture: with --import-mode=importlib the conftest
    module cannot be imported by the test modules)."""

    py = PY

    @staticmethod
    def sh(name: str, script: str, replicas: int = 1, **kw: Any) -> Role:
        """A role running ``sh -c script``."""
        return Role(name, image="", entrypoint="sh", args=["-c", script], num_replicas=replicas, **kw)

    @staticmethod
    def run(sched: LocalScheduler, roles: List[Role], cfg: Dict[str, Any], name: str = "t", timeout: float = 60) -> Tuple[str, Any]:
        """Submit an app of ``roles`` and wait for its end; returns (app_id, description)."""
        app_id = sched.submit(AppDef(name, roles=roles), cfg)
        desc = sched.wait(app_id, timeout=timeout)
        assert desc is not None and desc.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED), desc
        return app_id, desc

    replica = staticmethod(find_replica)

    @staticmethod
    def live_processes(app_id: str) -> List[int]:
        """Live processes (not zombies) whose environment has TX_APP_ID=<app_id>."""
        from tx_scheduler_local import _procs

        return [p for p in _procs.pids_with_env([f"TX_APP_ID={app_id}".encode()]) if _procs.is_alive(p)]

    @staticmethod
    def text(sched: LocalScheduler, app_id: str, role: str, k: int = 0, streams: Optional[str] = None) -> str:
        return "".join(sched.log_iter(app_id, role, k, streams=streams))


@pytest.fixture
def h() -> type:
    return Helpers
