"""pytest fixtures of a private local Ray head, for this plugin's tests. Loaded as a pytest
plugin by the repository's root ``conftest.py`` (``pytest_plugins``); the head starts at most
once per session.

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
from typing import Iterator, List

import pytest

from tx.testing.backends import ServiceProcess, backend_unavailable, free_port, wait_for

__all__ = ["NUM_CPUS", "ray_head"]

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
        # jobs are submitted through the head node's dashboard agent, which registers after
        # its HTTP server is up; the dashboard waits only 10 s for it ("No available agent to
        # submit job"), and a loaded machine starts the agent well after the dashboard
        agent = f"http://127.0.0.1:{ports['dashboard-agent-listen-port']}/api/healthz"
        wait_for(lambda: _http_ok(agent), timeout=120, what="the Ray dashboard agent", service=svc)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RAY_ADDRESS", url)
            yield url
    finally:
        svc.stop(grace=5)
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
