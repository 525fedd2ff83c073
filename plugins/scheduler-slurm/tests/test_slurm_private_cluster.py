"""The slurm tests run against the cluster their session starts, never a user's: a cluster
started by hand with scripts/start-slurm.sh (default ports, ``SLURM_CONF`` exported in the
user's shell) keeps running, gets no job and shows none of its jobs to the tests."""
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx_scheduler_slurm.scheduler import create_scheduler

pytestmark = pytest.mark.slurm

HERE = Path(__file__).resolve().parent
#: a job name no test uses; the "user's" cluster below holds a job of that name
USERS_JOB = "users-own-job"
#: the ports of a cluster started by hand with the defaults of scripts/start-slurm.sh
#: (slurmctld and the slurmd of node1)
DEFAULT_PORTS = (6817, 6831)


def test_clients_see_only_the_session_cluster(slurm_cluster: Any, slurm_nodes: List[str],
                                              slurm_support: Any) -> None:
    """SLURM_CONF is the session's own, on ports that are not start-slurm.sh's defaults,
    and no job of another cluster is listed."""
    assert os.environ["SLURM_CONF"] == str(slurm_cluster.conf)
    assert slurm_cluster.conf.is_relative_to(slurm_cluster.base)
    assert not any(k.startswith(("SBATCH_", "SQUEUE_")) for k in os.environ)
    conf = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    assert f"SlurmctldPort           = {slurm_cluster.ctld_port}\n" in conf, conf
    assert "ClusterName             = txtest\n" in conf, conf
    assert slurm_cluster.ctld_port not in DEFAULT_PORTS and not set(slurm_cluster.slurmd_ports) & set(DEFAULT_PORTS)
    assert slurm_nodes == [f"node{i}" for i in range(1, slurm_support.NODES + 1)]
    down = subprocess.run(["sinfo", "--noheader", "--partition=down", "--Node", "--format=%N %t"],
                          capture_output=True, text=True, timeout=30).stdout
    assert down.split()[0] == "down1" and down.split()[1].startswith("down"), down  # never started (down*)
    names = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%j"], capture_output=True,
                           text=True, timeout=30).stdout.split()
    assert USERS_JOB not in names
    assert USERS_JOB not in [a.name for a in create_scheduler("tx").list()]


def _free(port: int) -> bool:
    """Nothing listens on ``port`` (a connection in TIME_WAIT from an earlier run is fine:
    Slurm's daemons bind with SO_REUSEADDR too)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _alive(base: Path) -> List[str]:
    """The daemons of the cluster under ``base`` whose recorded PID is alive."""
    out = []
    for f in sorted((base / "run").glob("*.pid")):
        try:
            os.kill(int(f.read_text().strip()), 0)
            out.append(f.stem)
        except (OSError, ValueError):
            pass
    return out


def test_a_cluster_started_by_hand_is_never_touched(tmp_path_factory: pytest.TempPathFactory,
                                                    slurm_support: Any) -> None:
    """Start a "user's" one-node cluster the way the README says (default ports, SLURM_CONF
    exported), hold a job on it, run a slurm test in a fresh pytest session with that
    environment, and check the user's cluster afterwards: still up, same job, no new job
    id used; and the session's own cluster is gone."""
    slurm_support.require_slurm()
    scripts = slurm_support.SCRIPTS
    if not all(_free(p) for p in DEFAULT_PORTS):
        pytest.skip(f"ports {DEFAULT_PORTS} are taken (a cluster started by hand runs here); "
                    "this test starts its own stand-in for one on them")
    base = tmp_path_factory.mktemp("hand-slurm")
    hand: Dict[str, str] = {**slurm_support.user_env(), "SLURM_BASE": str(base), "SLURM_NODES": "1"}
    out = subprocess.run(["bash", str(scripts / "start-slurm.sh")], env=hand, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr
    hand["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
    try:
        def sh(*args: str) -> str:
            p = subprocess.run(list(args), env=hand, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
            return p.stdout.strip()

        held = sh("sbatch", "--parsable", "--hold", f"--job-name={USERS_JOB}", f"--output={base}/%j.out",
                  "--wrap", "true")
        daemons = _alive(base)
        assert {"munged", "slurmctld", "slurmd-node1"} <= set(daemons)

        inner = tmp_path_factory.mktemp("inner")
        test_id = f"{HERE / Path(__file__).name}::test_clients_see_only_the_session_cluster"
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--basetemp", str(inner), test_id],
            env={**hand, "TX_TEST_REQUIRE_BACKENDS": "1"}, cwd=str(HERE), capture_output=True, text=True,
            timeout=300)
        assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr

        # the user's cluster: same daemons, the held job as it was, and the next job id is
        # the one after it (no job was submitted to it)
        assert _alive(base) == daemons
        assert sh("squeue", "--noheader", "--states=all", "--format=%i %j %t") == f"{held} {USERS_JOB} PD"
        after = sh("sbatch", "--parsable", "--hold", "--job-name=after", f"--output={base}/%j.out", "--wrap", "true")
        assert int(after) == int(held) + 1
        # the inner session stopped everything its cluster had started
        inner_bases = [d for d in inner.glob("slurm[0-9]*") if not d.is_symlink()]
        assert len(inner_bases) == 1 and (inner_bases[0] / "etc" / "slurm.conf").is_file()
        assert _alive(inner_bases[0]) == []
    finally:
        subprocess.run(["scancel", "--user", str(os.getuid())], env=hand, capture_output=True, timeout=30)
        subprocess.run(["bash", str(scripts / "stop-slurm.sh")], env=hand, capture_output=True, timeout=120)
    assert _alive(base) == []


@pytest.mark.parametrize("required", [False, True])
def test_without_slurm_the_tests_skip_with_the_fix(tmp_path: Path, required: bool) -> None:
    """On a machine without Slurm's commands the cluster tests are skipped, saying how to
    install them; with TX_TEST_REQUIRE_BACKENDS=1 (CI) that is a failure instead."""
    env = {k: v for k, v in os.environ.items() if k != "TX_TEST_REQUIRE_BACKENDS"}
    env["PATH"] = str(Path(sys.executable).parent)  # no sinfo, slurmctld, ...
    if required:
        env["TX_TEST_REQUIRE_BACKENDS"] = "1"
    test_id = f"{HERE / Path(__file__).name}::test_clients_see_only_the_session_cluster"
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
                        "--basetemp", str(tmp_path / "t"), test_id],
                       env=env, cwd=str(HERE), capture_output=True, text=True, timeout=120)
    fix = "not found: run scripts/install-slurm.sh"
    if required:
        assert p.returncode == 1 and "1 error" in p.stdout and fix in p.stdout, p.stdout
    else:
        assert p.returncode == 0 and "1 skipped" in p.stdout and "slurm cannot run here: " in p.stdout, p.stdout
        assert fix in p.stdout, p.stdout


@pytest.mark.parametrize("name, value, message", [
    ("SLURM_NODES", "0", "SLURM_NODES must be 1..64, got 0"),
    ("SLURM_CTLD_PORT", "68a", "CTLD_PORT must be a port number, got '68a'"),
    ("SLURM_FIRST_JOB_ID", "abc", "SLURM_FIRST_JOB_ID must be a job id (1 or more), got 'abc'"),
    ("SLURM_FIRST_JOB_ID", "0", "SLURM_FIRST_JOB_ID must be a job id (1 or more), got '0'"),
    ("SLURM_ENFORCE_MEM", "yes", "SLURM_ENFORCE_MEM must be 0 or 1, got 'yes'"),
    ("SLURM_ACCT", "true", "SLURM_ACCT must be 0 or 1, got 'true'"),
])
def test_start_script_refuses_bad_settings_in_one_line(tmp_path: Path, slurm_support: Any, name: str, value: str,
                                                      message: str) -> None:
    """A bad setting of scripts/start-slurm.sh is one line on stderr and exit 2, before
    anything is created or started."""
    base = tmp_path / "base"
    env = {**slurm_support.user_env(), "SLURM_BASE": str(base), name: value}
    p = subprocess.run(["bash", str(slurm_support.SCRIPTS / "start-slurm.sh")], env=env, capture_output=True,
                       text=True, timeout=60)
    assert (p.returncode, p.stdout) == (2, ""), p.stderr
    assert p.stderr.splitlines() == [f"[start-slurm] {message}"]
    assert not base.exists()


def test_start_script_says_which_step_failed(tmp_path: Path, slurm_support: Any) -> None:
    """A step of scripts/start-slurm.sh that fails says so on stderr, with its output, and
    the script stops there (c16: an accounting cluster's start ended with status 1 and an
    empty stderr). Here mariadb-install-db fails (a stand-in first on PATH, printing its
    reason); and a command that fails under ``set -e`` is named with its line."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "mariadb-install-db").write_text("#!/bin/sh\necho 'Installation of system tables failed!' >&2\nexit 1\n")
    (fake / "mariadb-install-db").chmod(0o755)
    base = tmp_path / "base"
    env = slurm_support.user_env()
    env.update(SLURM_BASE=str(base), SLURM_ACCT="1", PATH=f"{fake}:{env['PATH']}",
               SLURM_CTLD_PORT="1", SLURMDBD_PORT="2", SLURM_MARIADB_PORT="3")
    p = subprocess.run(["bash", str(slurm_support.SCRIPTS / "start-slurm.sh")], env=env, capture_output=True,
                       text=True, timeout=60)
    try:
        assert p.returncode == 1 and p.stdout == "", p.stderr
        assert f"[start-slurm] mariadb-install-db failed ({base}/log/mariadb-install.log): " \
               "Installation of system tables failed!" in p.stderr, p.stderr
        assert not (base / "run" / "mariadb.pid").exists()
    finally:
        subprocess.run(["bash", str(slurm_support.SCRIPTS / "stop-slurm.sh")], env=env, capture_output=True, timeout=60)
    (fake / "mkdir").write_text("#!/bin/sh\nexit 3\n")  # the first thing the start does
    (fake / "mkdir").chmod(0o755)
    p = subprocess.run(["bash", str(slurm_support.SCRIPTS / "start-slurm.sh")], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 3 and "[start-slurm] failed (status 3) at line " in p.stderr and ": mkdir" in p.stderr, \
        p.stderr
