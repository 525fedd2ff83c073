"""Issue 18, exhausted resources and output: the open-file limit and a full disk are named
(the app ends FAILED, replicas stopped); `tx run | head` keeps the app and exits with its
result; a stdout line over 8 MiB never has stderr inside it in combined.log; `tx log` of
an app whose log files are gone says so and exits non-zero."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tx.specs import AppDef, AppState, Role
from tx.testing.backends import backend_unavailable
from tx_scheduler_local.scheduler import create_cwd_scheduler


def _app_id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


# -- exhausted resources ------------------------------------------------------------------------
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


# -- output ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("streams", ["2>&1", ""])
def test_tx_run_into_head_keeps_the_app_and_exits_with_its_result(tx_env, tmp_path, streams):
    script = "echo first; sleep 1; for i in $(seq 1 20000); do echo line $i; done; exit 3"
    p = subprocess.run(["bash", "-c", f'tx run -s local_cwd utils.sh sh -c "$0" {streams} | head -n 1; '
                        'echo "rc=${PIPESTATUS[0]}"', script],
                       env=tx_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    assert lines[-1] == "rc=1", (p.stdout, p.stderr)
    handle = lines[0]
    assert handle.startswith("local_cwd://")
    assert "Traceback" not in p.stderr and "Broken pipe" not in p.stderr, p.stderr
    # the app ran to its end: every line is in its log
    status = subprocess.run(["tx", "status", handle], env=tx_env, capture_output=True, text=True, timeout=60)
    assert "State: FAILED" in status.stdout and "exited with code 3" in status.stdout
    log = subprocess.run(["tx", "log", handle], env=tx_env, capture_output=True, text=True, timeout=60)
    assert log.stdout.splitlines()[-1] == "sh/0 line 20000"


def test_a_stdout_line_over_8_mib_has_no_stderr_inside_it(tmp_path):
    code = (
        "import sys, time\n"
        "for i in range(10):\n"
        "    sys.stdout.write('x' * (1 << 20)); sys.stdout.flush()\n"
        "    sys.stderr.write(f'err {i}\\n'); sys.stderr.flush()\n"
        "    time.sleep(0.05)\n"
        "sys.stdout.write('\\n'); sys.stdout.flush()\n"
        "sys.stderr.write('after\\n')\n"
    )
    s = create_cwd_scheduler("tx", state_dir=str(tmp_path / "state"))
    app_id = s.submit(AppDef("long", roles=[Role("r", image="", entrypoint=sys.executable, args=["-c", code])]),
                      {"log_dir": str(tmp_path / "logs")})
    desc = s.wait(app_id, timeout=60)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    combined = (tmp_path / "logs" / "tx" / app_id / "r" / "0" / "combined.log").read_bytes()
    lines = combined.split(b"\n")
    assert lines[-1] == b""
    long = [ln for ln in lines if ln.startswith(b"x")]
    assert len(long) == 1 and long[0] == b"x" * (10 << 20)
    others = [ln for ln in lines[:-1] if not ln.startswith(b"x")]
    assert sorted(others) == sorted([f"err {i}".encode() for i in range(10)] + [b"after"])
    assert len(lines) == 13
    # the per-stream files are untouched
    assert (tmp_path / "logs" / "tx" / app_id / "r" / "0" / "stdout.log").read_bytes() == b"x" * (10 << 20) + b"\n"


def test_tx_log_of_deleted_logs_says_so(tx, tmp_path, one_line_error):
    import shutil

    p = tx("run", "-s", "local_cwd", "-cfg", f"log_dir={tmp_path / 'logs'}", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    log_file = tmp_path / "logs" / "tx" / _app_id(handle) / "echo" / "0" / "combined.log"
    log_file.unlink()
    one_line_error(tx("log", handle), f"the log of echo/0 of {_app_id(handle)} is gone: {log_file} does not exist")
    assert tx("log", "--streams", "stdout", handle).stdout == "echo/0 hi\n"
    shutil.rmtree(tmp_path / "logs" / "tx" / _app_id(handle))
    for args in (["log", handle], ["log", f"{handle}/echo/0"]):
        one_line_error(tx(*args), f"the logs of {_app_id(handle)} are gone: {tmp_path / 'logs' / 'tx' / _app_id(handle)} does not exist")


def test_combined_log_holds_lines_of_the_other_stream_until_a_long_line_ends(tmp_path):
    """ReplicaLogs alone: the held stream closes (its last line unterminated) while the
    long line is still being written; it comes after the long line, with its \\n."""
    from tx_scheduler_local import _relay

    logs = _relay.ReplicaLogs(str(tmp_path / "r"))
    big = b"y" * (_relay._MAX_PARTIAL + 5)
    logs.write(_relay.OUT, big, 1.0)
    logs.write(_relay.ERR, b"e1\ne2", 1.0)
    logs.close_stream(_relay.ERR)
    logs.write(_relay.OUT, b"tail\nnext", 1.0)
    logs.close_stream(_relay.OUT)
    logs.close()
    combined = (tmp_path / "r" / "combined.log").read_bytes()
    assert combined == big + b"tail\n" + b"e1\ne2\n" + b"next\n"
