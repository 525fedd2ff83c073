"""pytest fixtures of a private OpenLava cluster (an open-source, LSF-compatible batch
system), for this plugin's tests and any test of the repository that needs LSF. Loaded as a
pytest plugin by the repository's root ``conftest.py`` (``pytest_plugins``); the session's
cluster starts at most once per session.

``lsf_cluster`` starts a one-host cluster with ``scripts/start-openlava.sh`` from the build
``scripts/install-openlava.sh`` made in ``OL_PREFIX`` (default ``/tmp/tx-openlava``; about
75 s, once per machine, which ``.ci/run`` does): its own configuration, logs and state under
pytest's temporary directory (``OL_BASE``), its own four ports on 127.0.0.1 (picked free in
20000-29999), 8 job slots; it is stopped at the end of the session, and by the session's
reaper if the session is killed. While the session runs, this process's LSF clients
(``LSF_ENVDIR``, ``PATH``) see only the private cluster. Where the build is missing or the
tests do not run as root, the tests are skipped with the fix
(:func:`tx.testing.backends.backend_unavailable`; a failure with ``TX_TEST_REQUIRE_BACKENDS=1``).
"""
import os
import random
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import attrs
import pytest

from tx.testing import backend_unavailable, environ, record_stop

__all__ = ["LsfCluster", "SCRIPTS", "build_prefix", "lsf_cluster", "require_openlava"]

#: the repository's scripts/ (install-, start-, stop-openlava.sh), from a checkout
SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"
#: job slots of the test host: the conformance kit runs apps of 4 one-slot replicas
SLOTS = 8


@attrs.define
class LsfCluster:
    """The session's private cluster: ``base`` holds what it writes; ``env`` is its
    clients' environment (``LSF_ENVDIR``, ``PATH``); ``script_env`` its scripts'."""

    base: Path
    ports: List[int]
    env: Dict[str, str]
    script_env: Dict[str, str]
    #: clears the record of its stop script for the session's reaper
    clear_record: Callable[[], None] = attrs.field(default=lambda: None, repr=False)

    def run(self, *args: str, timeout: float = 30, input: str = "") -> "subprocess.CompletedProcess[str]":
        """Run an LSF client command against this cluster."""
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout,
                              input=input or None)


    def wait_started(self, job_id: str, timeout: float = 60) -> None:
        """Wait until the host's sbatchd has reported job ``job_id`` running (``bjobs -l``
        shows its process group): a job killed or requeued before that can be reported
        DONE with empty output (an OpenLava race).

        Raises:
            RuntimeError: not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while "PGID:" not in self.run("bjobs", "-l", job_id).stdout:
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job_id} not reported running within {timeout:g} s")
            time.sleep(0.2)


def build_prefix() -> Path:
    """Where OpenLava is built: ``$OL_PREFIX`` or ``/tmp/tx-openlava``."""
    return Path(os.environ.get("OL_PREFIX") or "/tmp/tx-openlava")


def require_openlava() -> None:
    """Skip (``backend_unavailable``) unless this machine can run the private cluster: the
    OpenLava build in :func:`build_prefix`, and root."""
    if not (build_prefix() / "sbin" / "mbatchd").exists():
        backend_unavailable("lsf", f"no OpenLava build in {build_prefix()}: run scripts/install-openlava.sh as root "
                            "(OL_PREFIX selects where; about 75 s)")
    if os.geteuid() != 0:
        backend_unavailable("lsf", "the private OpenLava cluster runs its daemons as root: run the lsf tests as root")


def _pick_ports(n: int) -> List[int]:
    rng = random.Random(os.getpid() * 7)
    for _ in range(200):
        first = rng.randrange(20000, 30000 - n)
        ports = list(range(first, first + n))
        ok = True
        for port in ports:
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):  # LIM listens on both
                with socket.socket(socket.AF_INET, kind) as s:
                    try:
                        s.bind(("127.0.0.1", port))
                    except OSError:
                        ok = False
        if ok:
            return ports
    raise RuntimeError(f"no {n} consecutive free ports in 20000-29999 on 127.0.0.1")


def start_cluster(base: Path, **settings: str) -> LsfCluster:
    """Start a private cluster in ``base`` (about 3-10 s); ``settings`` are more of
    start-openlava.sh's variables (``OL_MAX_JOB_ARRAY_SIZE="4"`` ...).

    Raises:
        RuntimeError: start-openlava.sh failed (its stderr tail in the message).
    """
    ports = _pick_ports(4)
    script_env = {k: v for k, v in os.environ.items() if not k.startswith(("LSF_", "LSB_"))}
    script_env.update(OL_PREFIX=str(build_prefix()), OL_BASE=str(base), OL_PORT_BASE=str(ports[0]),
                      OL_SLOTS=str(SLOTS), **settings)
    stop = ["bash", str(SCRIPTS / "stop-openlava.sh")]
    clear = record_stop(stop, script_env)
    p = subprocess.run(["bash", str(SCRIPTS / "start-openlava.sh")], env=script_env, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    exports = {}
    for line in p.stdout.splitlines():
        if line.startswith("export "):
            exports.update(item.split("=", 1) for item in line[len("export "):].split() if "=" in item)
    if p.returncode != 0 or "LSF_ENVDIR" not in exports:
        subprocess.run(stop, env=script_env, capture_output=True, timeout=120)
        clear()
        raise RuntimeError(f"scripts/start-openlava.sh failed ({p.returncode}):\n{p.stderr[-3000:]}")
    env = {**script_env, **exports}
    return LsfCluster(base, ports, env, script_env, clear)


def stop_cluster(cluster: LsfCluster) -> None:
    """Kill the jobs still on ``cluster`` (the session's), then stop its daemons."""
    try:
        cluster.run("bkill", "-u", "all", "0", timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            q = cluster.run("bjobs", "-u", "all", "-noheader", "-w", timeout=15)
            if not q.stdout.strip():
                break
            time.sleep(0.5)
    except (OSError, subprocess.TimeoutExpired):
        pass
    subprocess.run(["bash", str(SCRIPTS / "stop-openlava.sh")], env=cluster.script_env, capture_output=True,
                   timeout=120)
    cluster.clear_record()


@pytest.fixture(scope="session")
def lsf_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LsfCluster]:
    """Start the session's private OpenLava cluster, point this process's LSF clients and
    tx's lsf index (``TX_STATE_DIR``) at it, and stop it at the end of the session."""
    require_openlava()
    base = tmp_path_factory.mktemp("openlava")
    cluster = start_cluster(base)
    try:
        values = {k: cluster.env[k] for k in ("LSF_ENVDIR", "LSF_SERVERDIR", "LSF_BINDIR", "LSF_LIBDIR", "PATH")}
        values["TX_STATE_DIR"] = str(base / "tx-state")
        unset = [k for k in os.environ if k.startswith(("LSF_", "LSB_")) and k not in values]
        with environ(values, unset=unset):
            yield cluster
    finally:
        stop_cluster(cluster)
