"""Fixtures of the tx-scheduler-ray tests: a private local Ray head, started once per session.

``ray_head`` runs ``ray start --head --block`` from this test environment (the ``ray`` next
to ``sys.executable``, whose ``bin`` goes first on PATH so that jobs run this Python), with
its own ``--temp-dir`` under pytest's temporary directory, free ports for everything Ray
listens on (GCS, dashboard on 127.0.0.1, dashboard agent, node manager, object manager,
metrics, runtime-env agent, Ray Client; worker ports chosen by the OS), 4 logical CPUs, and
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` so that Ray keeps to 127.0.0.1 instead of the
host's external address. ``RAY_ADDRESS`` is set to its dashboard for the session (the
scheduler reads it as users configure it); a ``RAY_ADDRESS`` of the user's is never used.

Stopping: never ``ray stop`` (it kills every Ray process on the host by name). The fixture
stops only what it started: SIGTERM to the process group of its ``ray start --block``
(which shuts its head down), then SIGKILL to any process left whose command line or
environment names this session's temp dir, or whose environment carries this head's
dashboard address (job drivers, workers and replicas started for this head).
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from tx.specs import AppDef, Resource, Role, is_terminal
from tx.testing import find_replica
from tx.testing.backends import ServiceProcess, backend_unavailable, free_port, wait_for
from tx_scheduler_ray.scheduler import RayScheduler, create_scheduler

BIN = os.path.dirname(sys.executable)
NUM_CPUS = 4


def _http_ok(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _own_processes(markers: List[str]) -> List[int]:
    """PIDs (not this process) whose command line or environment contains a marker."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        for what in ("cmdline", "environ"):
            try:
                data = Path(f"/proc/{entry}/{what}").read_bytes()
            except OSError:
                continue
            if any(m.encode() in data for m in markers):
                out.append(int(entry))
                break
    return out


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard URL of a private Ray head (``http://127.0.0.1:<port>``)."""
    ray_exe = os.path.join(BIN, "ray")
    if not os.path.exists(ray_exe):
        ray_exe = shutil.which("ray") or ""
    if not ray_exe:
        backend_unavailable("ray", "the ray command is not installed: pip install 'ray[default]'")
    try:
        import ray.job_submission  # noqa: F401
    except ImportError as e:
        backend_unavailable("ray", f"{e}: pip install 'ray[default]'")
    temp = tmp_path_factory.mktemp("ray")
    if len(str(temp)) > 48:  # Ray's unix socket paths under it must stay below 108 bytes
        temp = Path(tempfile.mkdtemp(prefix="txray-", dir="/tmp"))
    ports = {name: free_port() for name in (
        "port", "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
        "node-manager-port", "object-manager-port", "metrics-export-port", "runtime-env-agent-port",
        "ray-client-server-port")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    argv = [ray_exe, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={NUM_CPUS}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--temp-dir={temp}",
            "--min-worker-port=0", "--max-worker-port=0", "--disable-usage-stats",
            *[f"--{k}={v}" for k, v in ports.items()]]
    svc = ServiceProcess.start(argv, log=temp / "ray-start.log", env=env)
    url = f"http://127.0.0.1:{ports['dashboard-port']}"
    try:
        wait_for(lambda: _http_ok(f"{url}/api/version"), timeout=120, what="the Ray dashboard", service=svc)
        wait_for(lambda: _http_ok(f"{url}/api/jobs/"), timeout=60, what="the Ray job API", service=svc)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RAY_ADDRESS", url)
            yield url
    finally:
        svc.stop(grace=30)
        markers = [str(temp), f"RAY_ADDRESS={url}"]
        for _ in range(3):
            left = _own_processes(markers)
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(1)


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
