"""pytest fixtures of a private local Ray head, for this plugin's tests. Loaded as a pytest
plugin by the repository's root ``conftest.py`` (``pytest_plugins``); the head starts at most
once per session.

``ray_head_service`` (a :class:`RayHead`) runs ``ray start --head --block`` from this test
environment (the ``ray`` next to ``sys.executable``, whose ``bin`` goes first on PATH so that
jobs run this Python), with its own ``--temp-dir`` under pytest's temporary directory, free
ports for everything Ray listens on (GCS, dashboard on 127.0.0.1, dashboard agent, node
manager, object manager, metrics, runtime-env agent, Ray Client; worker ports chosen by the
OS), 4 logical CPUs, and ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` so that Ray keeps to
127.0.0.1 instead of the host's external address. ``ray_head`` is its dashboard's URL, also
set in ``RAY_ADDRESS`` for the session (the scheduler reads it as users configure it); a
``RAY_ADDRESS`` of the user's is never used. :meth:`RayHead.restart` crashes the head and
starts it again on the same ports (a test doing so is marked ``restarts_engine``: it runs
after every other test, conftest.py).

:class:`RayNode` joins a second node to the head for a test and removes it for real.

Stopping: never ``ray stop`` (it kills every Ray process on the host by name). The fixture
stops only what it started: SIGKILL to the process group of its ``ray start --block``, then
to any process left whose command line or environment names this session's temp dir, or
whose environment carries this head's dashboard address (job drivers, workers and replicas
started for this head).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from tx.testing import ServiceProcess, backend_unavailable, free_port, wait_for

__all__ = ["NUM_CPUS", "RayHead", "RayNode", "ray_head", "ray_head_service"]

BIN = os.path.dirname(sys.executable)
NUM_CPUS = 4


def _http_ok(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _own_processes(markers: List[str]) -> List[int]:
    """PIDs (not this process) whose command line contains a marker."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            data = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if any(m.encode() in data for m in markers):
            out.append(int(entry))
    return out


def _descendants(root: int) -> List[int]:
    """The PIDs of every process below ``root`` (children, theirs, ...), from ``/proc/*/stat``."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill(pids: List[int]) -> None:
    """SIGKILL each of ``pids`` that still exists."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class RayHead:
    """A private Ray head started by :func:`ray_head_service` (and its dashboard URL, by
    :func:`ray_head`): :meth:`restart` crashes it and starts it again on the same ports.

    Attributes:
        url: the dashboard (Job Submission API) address, ``http://127.0.0.1:<port>``.
        temp: the head's ``--temp-dir`` (each start makes a new ``session_*`` directory in it).
        starts: the seconds each start took until the job API and the dashboard agent answered.
    """

    def __init__(self, ray_exe: str, temp: Path) -> None:
        self.temp = temp
        self.ports = {name: free_port() for name in (
            "port", "dashboard-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
            "node-manager-port", "object-manager-port", "metrics-export-port", "runtime-env-agent-port",
            "ray-client-server-port")}
        self.url = f"http://127.0.0.1:{self.ports['dashboard-port']}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        # the dashboard's Prometheus server listens on DASHBOARD_METRIC_PORT, 44227 unless
        # set: a port free_port() may have handed to this head's dashboard agent (seen: the
        # agent failed to bind it, and the raylet, which fate-shares with it, with it)
        self.env.update(PATH=f"{BIN}{os.pathsep}{self.env.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
                        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", DASHBOARD_METRIC_PORT=str(free_port()))
        self.argv = [ray_exe, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={NUM_CPUS}",
                     "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--temp-dir={temp}",
                     "--min-worker-port=0", "--max-worker-port=0", "--disable-usage-stats",
                     *[f"--{k}={v}" for k, v in self.ports.items()]]
        self.svc: Optional[ServiceProcess] = None
        self.starts: List[float] = []
        self._t0: Optional[float] = None

    def start(self, wait_agent: bool = True) -> None:
        """Start the head and wait until its job API answers and, with ``wait_agent``, until
        it takes jobs (:meth:`wait_agent`).

        Raises:
            RuntimeError: it exited or did not answer in time (with its log's last lines).
        """
        self._t0 = time.monotonic()
        self.svc = svc = ServiceProcess.start(self.argv, log=self.temp / "ray-start.log", env=self.env)
        url = self.url
        wait_for(lambda: _http_ok(f"{url}/api/version"), timeout=120, what="the Ray dashboard", service=svc)
        wait_for(lambda: _http_ok(f"{url}/api/jobs/"), timeout=60, what="the Ray job API", service=svc)
        if wait_agent:
            self.wait_agent()

    def wait_agent(self) -> None:
        """Wait until the head takes jobs: they are submitted through its node's dashboard
        agent, which registers after the dashboard's HTTP server is up; the dashboard waits
        only 10 s for it ("No available agent to submit job"), and a loaded machine starts
        the agent well after the dashboard.

        Raises:
            RuntimeError: the head exited or the agent did not answer in 120 s.
        """
        agent = f"http://127.0.0.1:{self.ports['dashboard-agent-listen-port']}/api/healthz"
        wait_for(lambda: _http_ok(agent), timeout=120, what="the Ray dashboard agent", service=self.svc)
        if self._t0 is not None:
            self.starts.append(time.monotonic() - self._t0)
            self._t0 = None

    def stop(self) -> None:
        """Stop the head as a crash would: SIGKILL to the process group of its ``ray start
        --block`` (its answer to SIGTERM is the same kill, after 5 s and more), then to any
        process of it: every process below it, listed before the kill (job drivers and their
        replicas are children of its workers), and any naming its temp dir. Never ``ray
        stop``, and never a process the test session started otherwise (another backend's
        daemons carry this head's ``RAY_ADDRESS`` in their environment too)."""
        below: List[int] = []
        if self.svc is not None:
            below = _descendants(self.svc.proc.pid)
            try:
                os.killpg(self.svc.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.svc.proc.wait(timeout=30)
            self.svc.stop()  # ended already: only clears its record for the session's reaper
        _kill(below)
        for _ in range(20):
            left = _own_processes([str(self.temp)])
            if not left:
                break
            _kill(left)
            time.sleep(0.25)

    def restart(self, wait_agent: bool = True) -> None:
        """Crash the head (:meth:`stop`: all of it, as a lost head node) and start it again
        on the same ports and temp dir: a new GCS that knows none of the earlier jobs.
        Without ``wait_agent``, call :meth:`wait_agent` before submitting a job."""
        self.stop()
        self.start(wait_agent)


#: ``ray start`` for a second node of a head on 127.0.0.1: with the head's environment
#: (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which keeps every process of it on loopback)
#: Ray refuses to start a node that joins a head ("Multi-node Ray clusters are not
#: supported on Windows and OSX"), and with ``=1`` it replaces 127.0.0.1 (the head's GCS,
#: ``--node-ip-address``) with the host's external address, where the head does not listen.
#: So this ``ray start`` passes that check and leaves the addresses as given; the node's
#: raylet, agents and workers keep the head's environment
_JOIN = """import sys
from ray._private import ray_constants, services
ray_constants.ENABLE_RAY_CLUSTER = True
services.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv[0] = "ray"
sys.exit(main())
"""


class RayNode:
    """A worker node joined to a :class:`RayHead`: ``ray start --address=<its GCS> --block``
    (through :data:`_JOIN`) with its own temp dir under the head's, free ports on 127.0.0.1,
    ``num_cpus`` logical CPUs and the custom ``resources`` (which find it in the head's node
    list). :meth:`remove` takes it away for real, as a machine whose Ray is gone. Use it as a
    context manager: leaving it stops whatever of it is left, the replicas it ran included.

    Attributes:
        node_id: its Ray node id (hex), once :meth:`start` returned.
    """

    def __init__(self, head: RayHead, name: str, num_cpus: int, resources: Dict[str, float]) -> None:
        self.head, self.resources = head, dict(resources)
        self.temp = head.temp / name  # under the head's: the head's stop() also ends what is left of it
        ports = {k: free_port() for k in ("node-manager-port", "object-manager-port", "metrics-export-port",
                                          "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                          "runtime-env-agent-port")}
        self.agent = f"http://127.0.0.1:{ports['dashboard-agent-listen-port']}/api/healthz"
        self.argv = [sys.executable, "-c", _JOIN, "start", "--block", f"--address=127.0.0.1:{head.ports['port']}",
                     "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}", f"--resources={json.dumps(resources)}",
                     f"--temp-dir={self.temp}", "--min-worker-port=0", "--max-worker-port=0",
                     "--disable-usage-stats", *[f"--{k}={v}" for k, v in ports.items()]]
        self.svc: Optional[ServiceProcess] = None
        self.node_id = ""
        self._left: List[Tuple[int, str]] = []

    def _find(self) -> str:
        """Its node id where the head lists it ALIVE (found by its custom resources), else ""."""
        import requests

        try:
            r = requests.get(f"{self.head.url}/api/v0/nodes", params={"limit": 1000, "detail": "true"}, timeout=10)
            nodes = r.json()["data"]["result"]["result"] if r.status_code == 200 else []
        except (requests.RequestException, ValueError, KeyError, TypeError):
            return ""
        for n in nodes:
            total = n.get("resources_total") or {}
            if n.get("state") == "ALIVE" and all(total.get(k) == v for k, v in self.resources.items()):
                return str(n.get("node_id") or "")
        return ""

    def start(self, timeout: float = 120) -> None:
        """Start the node; wait until the head lists it ALIVE and its dashboard agent answers
        (the log API reads its files through it).

        Raises:
            RuntimeError: it exited or did not join in time (with its log's last lines).
        """
        self.svc = svc = ServiceProcess.start(self.argv, log=self.temp.parent / f"{self.temp.name}-start.log",
                                              env=self.head.env)
        self.node_id = str(wait_for(self._find, timeout=timeout, what="the Ray worker node to join", service=svc))
        wait_for(lambda: _http_ok(self.agent), timeout=timeout, what="the worker node's dashboard agent", service=svc)

    def logs(self) -> Path:
        """Its Ray log directory (``<temp>/session_latest/logs``)."""
        return self.temp / "session_latest" / "logs"

    def remove(self) -> None:
        """Remove the node as a machine whose Ray is gone: SIGKILL to its ``ray start``'s
        process group (raylet, agents, log monitor) and to every process below it except
        those in a session of their own (the replicas tx's actors started: their watchdogs
        warn them, as on a machine being shut down). Never ``ray stop``."""
        if self.svc is None:
            return
        pid = self.svc.proc.pid
        below = _descendants(pid)
        ray_side = [p for p in below if _sid(p) == pid]
        self._left = [(p, _started(p)) for p in below if p not in ray_side]
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _kill(ray_side)
        self.svc.proc.wait(timeout=30)
        self.svc.stop()  # ended already: only clears its record for the session's reaper
        self.svc = None

    def __enter__(self) -> "RayNode":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
        _kill([p for p, started in self._left if started and _started(p) == started])  # not a reused pid


def _started(pid: int) -> str:
    """When process ``pid`` started (``/proc/<pid>/stat``'s starttime; "" when it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _sid(pid: int) -> int:
    """The session id of process ``pid`` (-1 when it is gone)."""
    try:
        return os.getsid(pid)
    except OSError:
        return -1


@pytest.fixture(scope="session")
def ray_head_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayHead]:
    """The session's private Ray head (:class:`RayHead`), started once."""
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
    # Ray's unix socket paths under it must stay below 108 bytes: it adds up to 62
    # (session_<date>_<time>_<usec>_<pid>/sockets/plasma_store); a pytest-xdist worker's
    # base temporary directory is 10 longer (popen-gwN/)
    if len(str(temp)) > 40:
        temp = Path(tempfile.mkdtemp(prefix="txray-", dir="/tmp"))
    head = RayHead(ray_exe, temp)
    try:
        head.start()
        yield head
    finally:
        head.stop()


@pytest.fixture(scope="session")
def ray_head(ray_head_service: RayHead) -> Iterator[str]:
    """The dashboard URL of the session's private Ray head (``http://127.0.0.1:<port>``),
    also in ``RAY_ADDRESS`` for the session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_ADDRESS", ray_head_service.url)
        yield ray_head_service.url
