"""pytest fixtures of a private Slurm cluster, for this plugin's tests (and any test of the
repository that needs Slurm). Loaded as a pytest plugin by the repository's root
``conftest.py`` (``pytest_plugins``); the session's cluster starts at most once per session.

Tests marked ``slurm`` run against a private Slurm cluster that the test session starts
itself (fixture ``slurm_cluster``) with ``scripts/start-slurm.sh``: its own ``SLURM_BASE``
under pytest's temporary directory (slurm.conf, munge key and socket, spool, state, logs),
its own cluster name and its own ports on 127.0.0.1 (picked free, below the ephemeral range
and away from the script's defaults, so a cluster started by hand keeps running beside it),
and it is stopped at the end of the session. A ``SLURM_CONF`` (or any other ``SLURM_*`` /
``SBATCH_*`` variable) of the user's environment is never used: while the session runs,
the clients see only the private cluster. Where Slurm's packages are missing or the tests
do not run as root, the tests are skipped with the fix
(:func:`tx.testing.backends.backend_unavailable`; a failure with
``TX_TEST_REQUIRE_BACKENDS=1``). The scripts are the repository's: the fixtures run from a
checkout.
"""
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import attrs
import pytest

from tx.testing import backend_unavailable, environ, port_open, record_stop

__all__ = ["COMMANDS", "NODES", "SCRIPTS", "SlurmCluster", "memory_clusters", "require_slurm", "slurm_cluster",
           "slurm_nodes", "slurm_support", "start_cluster", "stop_cluster", "user_env"]

#: the repository's scripts/ (start-slurm.sh, stop-slurm.sh), from a checkout
SCRIPTS = Path(__file__).resolve().parents[4] / "scripts"
#: nodes of the test cluster: the conformance kit runs 2 roles x 2 replicas, one node each
NODES = 4
#: the daemons and clients the cluster needs (Debian: slurmctld slurmd slurm-client munge)
COMMANDS = ("slurmctld", "slurmd", "munged", "sinfo", "sbatch", "squeue", "scontrol", "scancel")
#: environment variables of the user's Slurm setup that would point the clients elsewhere
#: or change what sbatch/squeue do; removed for the session
_USER_PREFIXES = ("SLURM_", "SBATCH_", "SQUEUE_", "SRUN_", "SALLOC_", "SINFO_", "SCONTROL_", "SACCT_")


@attrs.define
class SlurmCluster:
    """A private cluster of the test session: ``base`` holds everything it writes; ``conf``
    is its slurm.conf; ports on 127.0.0.1; ``env`` is the clients' environment
    (``SLURM_CONF``); ``script_env`` the environment its start and stop scripts ran with."""

    base: Path
    conf: Path
    ctld_port: int
    slurmd_ports: List[int]
    env: Dict[str, str]
    script_env: Dict[str, str] = attrs.field(factory=dict)
    #: clears the record of its stop script for the session's reaper (tx.testing.backends.record_stop)
    clear_record: Callable[[], None] = attrs.field(default=lambda: None, repr=False)

    def run(self, *args: str, timeout: float = 30) -> "subprocess.CompletedProcess[str]":
        """Run a Slurm client command against this cluster."""
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)

    @property
    def mem_cgroup(self) -> bool:
        """Whether slurmd holds steps to their memory with the cgroup v1 memory controller
        (``SLURM_ENFORCE_MEM=1`` on a host where it is writable): a step over its memory
        then ends OUT_OF_MEMORY rather than being killed by jobacct_gather's polling."""
        return (self.base / "etc" / "cgroup.conf").exists()

    @contextlib.contextmanager
    def controller_down(self, timeout: float = 60) -> Iterator[None]:
        """Stop this cluster's slurmctld for real for the ``with`` block (SIGTERM, as an
        operator's stop or a crash ends it: its state is saved, the jobs stay), then start it
        again with start-slurm.sh, which returns once every node is usable.

        Raises:
            RuntimeError: slurmctld did not end (and its port close) within ``timeout``
                seconds, or did not come back (start-slurm.sh's stderr in the message).
        """
        pid = int((self.base / "run" / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) or port_open(self.ctld_port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurmctld ({pid}) did not end within {timeout:g} s")
            time.sleep(0.1)
        try:
            yield
        finally:
            p = subprocess.run(["bash", str(SCRIPTS / "start-slurm.sh")], env=self.script_env, capture_output=True,
                               text=True, timeout=180)
            if p.returncode != 0:
                raise RuntimeError(f"slurmctld did not come back ({p.returncode}):\n{p.stderr[-3000:]}")

    @contextlib.contextmanager
    def active(self) -> Iterator["SlurmCluster"]:
        """Point this process's Slurm clients (``SLURM_CONF``) and tx's slurm job index
        (``TX_STATE_DIR``) at this cluster for the ``with`` block; a scheduler created in
        the block keeps what it learnt (accounting, jobcomp path) for this cluster only."""
        with environ({"SLURM_CONF": str(self.conf), "TX_STATE_DIR": str(self.base / "tx-state")}):
            yield self


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _ports_free(ports: List[int]) -> bool:
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _pick_ports(n: int) -> List[int]:
    """``n`` consecutive free ports in 20000-29999: below Linux's ephemeral range (32768+,
    so outgoing connections do not take them meanwhile) and away from the defaults of
    scripts/start-slurm.sh (6817, 6820, 3307, 6831+)."""
    rng = random.Random(os.getpid())
    for _ in range(200):
        first = rng.randrange(20000, 30000 - n)
        ports = list(range(first, first + n))
        if _ports_free(ports):
            return ports
    raise RuntimeError(f"no {n} consecutive free ports in 20000-29999 on 127.0.0.1")


def _base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private directory, short enough for the munge and slurmstepd unix sockets
    (108 bytes)."""
    base = tmp_path_factory.mktemp("slurm")
    if len(str(base)) > 60:
        base = Path(tempfile.mkdtemp(prefix="tx-slurm-test-"))
    return base


def require_slurm() -> None:
    """Skip (``backend_unavailable``) unless this machine can run a private Slurm cluster:
    Slurm's and munge's commands on PATH, and root."""
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        backend_unavailable("slurm", f"{', '.join(missing)} not found: run scripts/install-slurm.sh as root "
                            "(Debian: apt-get install slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        backend_unavailable("slurm", "the private test cluster runs slurmd as root (SlurmUser=root): "
                            "run the slurm tests as root, e.g. in a container")


def user_env() -> Dict[str, str]:
    """This process's environment without the user's Slurm variables (``SLURM_CONF``...)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(_USER_PREFIXES)}


@pytest.fixture(scope="session")
def slurm_support() -> Any:
    """What tests of the cluster setup itself use (the tests are not importable modules):
    ``NODES``, ``SCRIPTS``, ``require_slurm()``, ``user_env()``."""
    import types

    return types.SimpleNamespace(NODES=NODES, SCRIPTS=SCRIPTS, require_slurm=require_slurm, user_env=user_env)


def start_cluster(tmp_path_factory: pytest.TempPathFactory, name: str, nodes: int,
                  **settings: str) -> SlurmCluster:
    """Start a private cluster with ``scripts/start-slurm.sh`` (about 2 s; 3 s with
    accounting): its own base directory, cluster ``name``, ``nodes`` nodes and free ports
    (slurmctld, one per slurmd, then slurmdbd and mariadb); ``settings`` are more of the
    script's variables (``SLURM_ACCT="1"`` ...). Stop it with :func:`stop_cluster`.

    Raises:
        RuntimeError: the script failed (its stderr tail in the message).
    """
    base = _base_dir(tmp_path_factory)
    ports = _pick_ports(nodes + 3)
    env = user_env()
    env.update(SLURM_BASE=str(base), SLURM_NODES=str(nodes), SLURM_CLUSTER_NAME=name,
               SLURM_CTLD_PORT=str(ports[0]), SLURMD_PORT_BASE=str(ports[0]),
               SLURMDBD_PORT=str(ports[nodes + 1]), SLURM_MARIADB_PORT=str(ports[nodes + 2]), **settings)
    script_env = dict(env)
    conf = base / "etc" / "slurm.conf"
    env["SLURM_CONF"] = str(conf)
    cluster = SlurmCluster(base, conf, ports[0], ports[1:nodes + 1], env, script_env)
    # a session killed from here on still stops the daemons (the reaper runs stop-slurm.sh)
    cluster.clear_record = record_stop(["bash", str(SCRIPTS / "stop-slurm.sh")], script_env)
    p = subprocess.run(["bash", str(SCRIPTS / "start-slurm.sh")], env=script_env, capture_output=True,
                       text=True, timeout=180)
    if p.returncode != 0 or f"export SLURM_CONF={conf}" not in p.stdout:
        stop_cluster(cluster)
        raise RuntimeError(f"scripts/start-slurm.sh failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return cluster


def stop_cluster(cluster: SlurmCluster) -> None:
    """Cancel the jobs still on ``cluster`` (they are the session's: no replica outlives
    the daemons), then stop the daemons that start-slurm.sh recorded."""
    try:
        cluster.run("scancel", "--full", "--state=PENDING,RUNNING,SUSPENDED,REQUEUED", "-u", "root", timeout=30)
        for _ in range(40):
            q = cluster.run("squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING,SUSPENDED",
                            "--format=%i", timeout=15)
            if q.returncode != 0 or not q.stdout.strip():
                break
            time.sleep(0.25)
    except (OSError, subprocess.TimeoutExpired):
        pass
    subprocess.run(["bash", str(SCRIPTS / "stop-slurm.sh")], env=cluster.script_env, capture_output=True,
                   timeout=120)
    shutil.rmtree(cluster.base / "db", ignore_errors=True)  # mariadb's files (accounting), 100+ MB
    cluster.clear_record()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """Start the session's private Slurm cluster (``NODES`` nodes, about 2 s), point the
    clients of this process at it (``SLURM_CONF``) and stop it at the end."""
    require_slurm()
    saved = dict(os.environ)
    cluster = start_cluster(tmp_path_factory, "txtest", NODES)
    try:
        for k in [k for k in os.environ if k.startswith(_USER_PREFIXES)]:
            del os.environ[k]
        os.environ["SLURM_CONF"] = str(cluster.conf)
        os.environ["TX_STATE_DIR"] = str(cluster.base / "tx-state")  # the slurm job index, never the user's
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        stop_cluster(cluster)


@pytest.fixture(scope="session")
def memory_clusters(slurm_cluster: SlurmCluster,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, SlurmCluster]]:
    """Two more private clusters of 3 nodes that hold each step to its memory
    (``SLURM_ENFORCE_MEM=1``), for why-failed: ``"accounting"`` runs slurmdbd and mariadb
    (sacct) and forgets finished jobs after 2 s (MinJobAge), so they are read back from
    sacct; ``"no accounting"`` has none (sacct fails), as the session's cluster. Distinct
    job ids (their memory cgroups share the host's tree). Use them through
    :meth:`SlurmCluster.active`."""
    missing = [c for c in ("slurmdbd", "mariadbd", "sacct") if shutil.which(c) is None]
    if missing:
        backend_unavailable("slurm", f"{', '.join(missing)} not found: run SLURM_ACCT=1 scripts/install-slurm.sh "
                            "as root (Debian: apt-get install slurmdbd mariadb-server)")
    clusters: Dict[str, SlurmCluster] = {}
    try:
        clusters["accounting"] = start_cluster(tmp_path_factory, "txacct", 3, SLURM_ACCT="1", SLURM_ENFORCE_MEM="1",
                                               SLURM_MIN_JOB_AGE="2", SLURM_FIRST_JOB_ID="300000")
        clusters["no accounting"] = start_cluster(tmp_path_factory, "txnoacct", 3, SLURM_ENFORCE_MEM="1",
                                                  SLURM_FIRST_JOB_ID="600000")
        yield clusters
    finally:
        # both at once: each stop waits some 6 s for its daemons to end, one wave after another
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(stop_cluster, clusters.values()))


@pytest.fixture(scope="session")
def slurm_nodes(slurm_cluster: SlurmCluster) -> List[str]:
    """The node names of the session's private test cluster: its usable nodes, those of
    partition ``debug`` (not ``down1``, the never-started node of partition ``down``)."""
    p = slurm_cluster.run("sinfo", "--noheader", "--Node", "--partition=debug", "--format=%N")
    assert p.returncode == 0 and p.stdout.strip(), p.stderr
    return sorted(set(p.stdout.split()))
