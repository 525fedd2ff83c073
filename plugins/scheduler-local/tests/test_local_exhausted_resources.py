"""Exhausted resources on the local schedulers: the open-file limit is named before anything
starts (or when a replica cannot start), and a full disk under the log directory fails the
app with the file system named and the other replicas stopped."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


from tx.specs import AppDef, AppState, Role
from tx.testing.backends import backend_unavailable
from tx_scheduler_local.scheduler import create_cwd_scheduler


_FD_SCRIPT = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
from tx.specs import AppDef, Role
from tx_scheduler_local.scheduler import create_cwd_scheduler
s = create_cwd_scheduler("tx", state_dir=sys.argv[1])
app = AppDef("fd", roles=[Role("r", image="", entrypoint="sh", args=["-c", "true"], num_replicas=12)])
try:
    s.submit(app, {"log_dir": sys.argv[2]})
except ValueError as e:
    print(e)
    sys.exit(3)
"""


def test_open_file_limit_is_named_before_anything_starts(tmp_path):
    p = subprocess.run([sys.executable, "-c", _FD_SCRIPT, str(tmp_path / "state"), str(tmp_path / "logs")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert p.stdout.strip() == ("too many open files: ulimit -n is 40 (at most 40); the supervisor of 12 replica(s) "
                                "needs 96: raise it (ulimit -n 96) or run fewer replicas")
    assert not (tmp_path / "state" / "local" / "apps").exists() or not os.listdir(tmp_path / "state" / "local" / "apps")


def test_open_file_limit_named_when_a_replica_cannot_start(tmp_path):
    """The supervisor's own limit is fine but spawning fails with EMFILE: the replica's
    failure says which limit."""
    from tx_scheduler_local._replica import os_error_text
    import errno
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert os_error_text(OSError(errno.EMFILE, "Too many open files")) == f"too many open files: ulimit -n is {soft}"


def _small_fs(tmp_path: Path):
    """A 1 MiB tmpfs (root), else None."""
    mnt = Path(tempfile.mkdtemp(prefix="tx-full-"))
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        mnt.rmdir()
        return None
    return mnt


def test_full_disk_while_replicas_run_fails_the_app_and_stops_replicas(tmp_path, monkeypatch):
    mnt = _small_fs(tmp_path)
    if mnt is None:
        backend_unavailable("tmpfs", "cannot mount a small tmpfs here: run the tests as root")
    try:
        s = create_cwd_scheduler("tx", state_dir=str(tmp_path / "state"))
        app = AppDef("full", roles=[
            Role("writer", image="", entrypoint="sh",
                 args=["-c", "while :; do head -c 100000 /dev/zero | tr '\\0' x; echo; done"]),
            Role("idle", image="", entrypoint="sh", args=["-c", f"echo $$$$ > {tmp_path}/idle.pid; exec sleep 300"]),
        ])
        app_id = s.submit(app, {"log_dir": str(mnt), "cancel_timeout": 2})
        desc = s.wait(app_id, timeout=60)
        assert desc is not None and desc.state == AppState.FAILED, desc
        log_dir = f"{mnt}/tx/{app_id}/writer/0"
        assert desc.msg == f"replica writer/0: no space left on device on {mnt} (writing the logs in {log_dir}); replicas stopped"
        assert desc.structured_error_msg == f"writer/0: no space left on device on {mnt} (writing the logs in {log_dir})"
        states = {r.role: r.state for rs in desc.roles_statuses for r in rs.replicas}
        assert states == {"writer": AppState.FAILED, "idle": AppState.CANCELLED}
        from tx_scheduler_local import _procs

        assert not _procs.is_alive(int((tmp_path / "idle.pid").read_text()))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()
