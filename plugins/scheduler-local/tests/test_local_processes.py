"""Where the local schedulers' processes are and what outlives what: status from another PID
namespace or host is never a false FAILED; a replica's descendant that escapes with setsid
and a cleared environment does not outlive the app (cgroup v2 scope, else the supervisor as
subreaper); `tx run` as PID 1; an app recorded before a reboot of the host."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tx_scheduler_local import _procs
from tx_scheduler_local.scheduler import create_cwd_scheduler
from tx.testing.backends import backend_unavailable


def _can_unshare(*flags: str) -> bool:
    try:
        return subprocess.run(["unshare", *flags, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture
def pidns() -> None:
    if not _can_unshare("--pid", "--fork", "--mount-proc"):
        backend_unavailable("pid namespaces", "needs `unshare --pid --fork --mount-proc` (root or user namespaces)")


needs_pidns = pytest.mark.usefixtures("pidns")


def _state(tx_env, handle: str) -> dict:
    path = Path(tx_env["TX_STATE_DIR"]) / "local" / "apps" / handle.rsplit("/", 1)[1] / "state.json"
    return json.loads(path.read_text())


def _wait_for(pred, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out")


def _escaping_app(tx, tmp_path: Path, env=None, tail: str = "exec sleep 300", cfg: str = "") -> tuple:
    """A detached app whose replica starts a daemon (setsid, env -i) that writes its pid."""
    pidfile = tmp_path / "escapee.pid"
    script = f"setsid env -i sh -c 'echo $$$$ > {pidfile}; exec sleep 300' & {tail}"
    p = tx("run", "--detach", "-s", "local_cwd", *(["-cfg", cfg] if cfg else []), "utils.sh", "sh", "-c", script,
           env=env)
    assert p.returncode == 0, p.stderr
    pid = _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() and int(pidfile.read_text()))
    return p.stdout.splitlines()[0], pid


def _environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


@needs_pidns
def test_status_from_another_pid_namespace_or_host_is_the_last_recorded_state(tx, tx_env, tmp_path):
    handle, escapee = _escaping_app(tx, tmp_path)
    try:
        st = _state(tx_env, handle)
        assert st["host"] and st["pidns"].startswith("pid:[") and st["boot_id"]
        # a container: its own PID namespace, the same state directory
        p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "tx", "status", handle],
                           env=tx_env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "State: RUNNING" in p.stdout
        assert (f"last recorded state RUNNING; its supervisor (pid {st['pid']}) runs on host {st['host']} "
                "in another PID namespace, cannot be checked from here") in p.stdout
        # a second machine sharing the state directory (another hostname)
        if _can_unshare("--uts"):
            p = subprocess.run(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c",
                                f"hostname other-host && tx status {handle} && tx cancel {handle}"],
                               env=tx_env, capture_output=True, text=True, timeout=60)
            assert "State: RUNNING" in p.stdout and f"runs on host {st['host']}, cannot be checked" in p.stdout
            assert p.returncode == 1 and "cannot be reached from here; cancel it there" in p.stderr, p.stderr
        # nothing was recorded from there: the app runs on
        assert _state(tx_env, handle)["state"] == "RUNNING" and _procs.is_alive(escapee)
    finally:
        tx("cancel", handle)
    assert "State: CANCELLED" in tx("status", handle).stdout
    _wait_for(lambda: not _procs.is_alive(escapee))


def test_escapee_dies_with_the_app_after_the_supervisor_is_sigkilled(tx, tx_env, tmp_path):
    handle, escapee = _escaping_app(tx, tmp_path, cfg="infra_retries=0")
    st = _state(tx_env, handle)
    if not st.get("cgroup"):
        backend_unavailable("cgroup v2", "no writable cgroup v2 hierarchy here (the subreaper path is tested below)")
    assert b"TX_APP_ID" not in _environ(escapee)  # only the cgroup can find it
    assert escapee in [int(x) for x in Path(st["cgroup"], "cgroup.procs").read_text().split()]
    os.kill(st["pid"], 9)
    p = tx("status", handle)
    assert "State: FAILED" in p.stdout and "exited without recording the end of the app" in p.stdout
    _wait_for(lambda: not _procs.is_alive(escapee), timeout=10)
    assert not Path(st["cgroup"]).exists()


@pytest.mark.parametrize("cgroup", ["0", "1"])
def test_escapee_dies_when_the_app_ends(tx, tx_env, tmp_path, cgroup):
    env = {**tx_env, "TX_LOCAL_CGROUP": cgroup}
    handle, escapee = _escaping_app(tx, tmp_path, env=env, tail="sleep 0.5; exit 0")
    assert b"TX_APP_ID" not in _environ(escapee)
    _wait_for(lambda: "State: SUCCEEDED" in tx("status", handle).stdout)
    _wait_for(lambda: not _procs.is_alive(escapee), timeout=10)
    st = _state(tx_env, handle)
    if cgroup == "0":  # the subreaper alone found and killed it
        assert st["cgroup"] is None
    if st["cgroup"]:
        assert not Path(st["cgroup"]).exists()


@needs_pidns
def test_tx_run_as_pid_1(tx_env, tmp_path):
    """`tx run` as a container's first process: the app runs, its result is the exit
    status (the supervisor, reparented to tx, is watched through its pidfd)."""
    pidfile = tmp_path / "escapee.pid"
    script = f"setsid env -i sh -c 'echo $$$$ > {pidfile}; exec sleep 300' & echo hi; exit 3"
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                        'exec tx run -s local_cwd utils.sh sh -c "$0"', script],
                       env=tx_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "sh/0 hi" in p.stdout and "FAILED" in p.stderr and "exited with code 3" in p.stderr
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                        "exec tx run -s local_cwd utils.echo --msg ok"],
                       env=tx_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "SUCCEEDED" in p.stderr, p.stderr
    # the app's cgroup went before tx (PID 1) saw the end and the namespace's processes died
    state = Path(tx_env["TX_STATE_DIR"]) / "local" / "apps"
    for d in state.iterdir():
        scope = json.loads((d / "state.json").read_text()).get("cgroup")
        assert scope is None or not os.path.exists(scope), scope


def test_an_app_recorded_before_a_reboot_of_this_host_restarts_as_an_infra_retry(tx, tx_env, tmp_path):
    """The boot id recorded by the supervisor is not this boot's (the test rewrites the
    recorded one, and SIGKILLs the supervisor as the reboot would have): the next look
    restarts the app and `tx status` says why the first attempt ended."""
    handle, escapee = _escaping_app(tx, tmp_path)
    st = _state(tx_env, handle)
    os.kill(st["pid"], 9)  # the supervisor's processes end as a reboot would end them
    _wait_for(lambda: not _procs.is_alive(st["pid"]))
    app_id = handle.rsplit("/", 1)[1]
    path = Path(tx_env["TX_STATE_DIR"]) / "local" / "apps" / app_id / "state.json"
    path.write_text(json.dumps({**st, "boot_id": "00000000-0000-0000-0000-000000000000"}))
    try:
        p = tx("status", handle)
        assert "State: RUNNING" in p.stdout or "State: PENDING" in p.stdout, p.stdout
        assert f"#0 FAILED (infra: the host rebooted while {app_id} ran: its supervisor and replicas ended with it)" \
            ", retried" in p.stdout, p.stdout
        _wait_for(lambda: not _procs.is_alive(escapee), timeout=10)
        assert _state(tx_env, handle)["pid"] not in (None, st["pid"])
    finally:
        create_cwd_scheduler("tx", state_dir=tx_env["TX_STATE_DIR"]).cancel(app_id)
    _wait_for(lambda: _state(tx_env, handle)["state"] == "CANCELLED")
