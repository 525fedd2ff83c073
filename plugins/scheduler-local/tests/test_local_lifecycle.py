"""Apps outlive their launcher; cancel and signals leave no process behind; concurrency."""
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.specs import AppDef, AppState, FailureKind
from tx_scheduler_local import _procs
from tx_scheduler_local.scheduler import create_cwd_scheduler

LAUNCHER = '''
import sys, time
from tx.specs import AppDef, Role
from tx_scheduler_local.scheduler import create_cwd_scheduler

mode, method, log_dir, script, n = sys.argv[1:6]
s = create_cwd_scheduler("tx", supervisor=method)
role = Role("r", image="", entrypoint="sh", args=["-c", script])
ids = [s.submit(AppDef("sub", roles=[role]), {"log_dir": log_dir, "cancel_timeout": 5.0}) for _ in range(int(n))]
print(" ".join(ids), flush=True)
if mode == "sleep":
    time.sleep(600)
elif mode == "wait":
    s.wait(ids[0])
'''


@pytest.fixture
def launcher(tmp_path: Path, state_dir: Path, log_root: Path) -> Any:
    """Start a process that launches apps (TX_STATE_DIR is inherited); returns
    ``start(mode, method, script, n) -> (process, app ids)``."""
    path = tmp_path / "launch.py"
    path.write_text(LAUNCHER)
    procs: List[subprocess.Popen] = []

    def start(mode: str, script: str, method: str = "auto", n: int = 1) -> Any:
        p = subprocess.Popen([sys.executable, str(path), mode, method, str(log_root), script, str(n)],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        line = p.stdout.readline()
        assert line, f"launcher exited with {p.wait()}"
        return p, line.split()

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()


def _wait_for_handler(pid: int, sig: int) -> None:
    """Block until process ``pid`` has a handler for ``sig`` (/proc/<pid>/status SigCgt)."""
    for _ in range(3000):
        with open(f"/proc/{pid}/status") as f:
            caught = int(next(line for line in f if line.startswith("SigCgt:")).split()[1], 16)
        if caught & (1 << (sig - 1)):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never caught signal {sig}")


@pytest.mark.parametrize("method", ["fork", "exec"])
def test_app_survives_sigkilled_launcher(sched: Any, launcher: Any, tmp_path: Path, h: Any, method: str) -> None:
    go = tmp_path / "go"
    proc, (app_id,) = launcher("sleep", f"echo begin; while [ ! -e {go} ]; do sleep 0.02; done; echo end; exit 7", method)
    proc.kill()
    proc.wait()
    assert sched.describe(app_id).state in (AppState.PENDING, AppState.RUNNING)
    lines = sched.log_iter(app_id, "r", 0, should_tail=True)
    assert next(iter(lines)) == "begin\n"
    assert sched.list()[0].app_id == app_id
    go.touch()
    assert list(lines) == ["end\n"]
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.FAILED
    assert h.replica(desc, "r", 0).exit_code == 7
    assert h.text(sched, app_id, "r") == "begin\nend\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_while_waiting_cancels_the_app(sched: Any, launcher: Any, h: Any, sig: int) -> None:
    proc, (app_id,) = launcher("wait", "echo up; exec sleep 300")
    _wait_for_handler(proc.pid, signal.SIGTERM)  # installed by wait()
    assert next(iter(sched.log_iter(app_id, "r", 0, should_tail=True))) == "up\n"
    proc.send_signal(sig)
    assert proc.wait(timeout=30) != 0
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.CANCELLED
    assert h.live_processes(app_id) == []


def test_cancel_kills_grandchildren_that_left_the_session(sched: Any, cfg: Dict[str, Any], tmp_path: Path, h: Any) -> None:
    pids = f"{tmp_path}/pids.${{replica_id}}"
    script = (
        f"setsid sleep 300 & echo $! > {pids}; "
        f"sleep 300 & echo $! >> {pids}; "
        f"setsid sh -c 'trap \"\" TERM; sleep 300' & echo $! >> {pids}; "
        f"(setsid sleep 300 &); "
        "echo ready; wait"
    )
    app_id = sched.submit(AppDef("gc", roles=[h.sh("r", script, 2)]), {**cfg, "cancel_timeout": 5.0})
    for k in (0, 1):
        assert next(iter(sched.log_iter(app_id, "r", k, should_tail=True))) == "ready\n"
    started = [int(p) for k in (0, 1) for p in (tmp_path / f"pids.{k}").read_text().split()]
    assert len(started) == 6 and all(_procs.is_alive(p) for p in started)
    assert len(h.live_processes(app_id)) >= 2 * 5
    sched.cancel(app_id)
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.CANCELLED
    assert [p for p in started if _procs.is_alive(p)] == []
    assert h.live_processes(app_id) == []
    sched.cancel(app_id)  # idempotent


def test_grandchildren_are_killed_when_the_app_ends(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    app_id, desc = h.run(sched, [h.sh("r", "setsid sleep 300 & sleep 300 & echo bye")], cfg)
    assert desc.state == AppState.SUCCEEDED
    assert h.live_processes(app_id) == []


def test_sigterm_ignored_escalates_to_sigkill(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    app_id = sched.submit(AppDef("stubborn", roles=[h.sh("r", "trap '' TERM; echo ready; while true; do sleep 0.05; done")]),
                          {**cfg, "cancel_timeout": 0.3})
    assert next(iter(sched.log_iter(app_id, "r", 0, should_tail=True))) == "ready\n"
    sched.cancel(app_id)
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.CANCELLED
    assert h.replica(desc, "r", 0).exit_code == -signal.SIGKILL
    assert h.live_processes(app_id) == []


def test_dead_supervisor_is_detected_and_its_replicas_killed(sched: Any, cfg: Dict[str, Any], h: Any) -> None:
    app_id = sched.submit(AppDef("orphan", roles=[h.sh("r", "echo up; exec sleep 300", 2)]), {**cfg, "infra_retries": 0})
    assert next(iter(sched.log_iter(app_id, "r", 1, should_tail=True))) == "up\n"
    os.kill(sched.describe(app_id).metadata["supervisor_pid"], signal.SIGKILL)
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.FAILED
    assert "exited without recording the end of the app" in desc.msg and "infra_retries=0" in desc.msg
    assert [(a.kind, a.retried) for a in desc.attempts] == [(FailureKind.INFRA, False)], desc.attempts
    assert h.live_processes(app_id) == []


def test_an_app_lost_to_the_infrastructure_restarts_within_infra_retries(
        sched: Any, cfg: Dict[str, Any], h: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its supervisor SIGKILLed (what a reboot, the OOM killer of the session or a power loss
    leave): the next look restarts the whole app under a new supervisor without spending
    max_retries (its own failure afterwards still gets its retry) and in the environment it
    was launched with, the log keeps every attempt, and an app lost once more than
    infra_retries allows FAILS as infra."""
    count = tmp_path / "count"
    # attempts 0 and 1 are lost, 2 fails by itself (user: its one retry), 3 succeeds
    script = (f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}; echo attempt $n $FROM; "
              "[ $n -lt 2 ] && exec sleep 300; [ $n -lt 3 ] && exit 3; exit 0")
    monkeypatch.setenv("FROM", "launcher")
    app_id = sched.submit(AppDef("lost", roles=[h.sh("r", script, max_retries=1)]), {**cfg, "infra_retries": 2})
    monkeypatch.setenv("FROM", "restarter")
    seen = []
    for line in sched.log_iter(app_id, "r", 0, should_tail=True):  # its follower restarts it
        seen.append(line)
        if line in ("attempt 0 launcher\n", "attempt 1 launcher\n"):
            os.kill(sched.describe(app_id).metadata["supervisor_pid"], signal.SIGKILL)
    assert seen == [f"attempt {n} launcher\n" for n in range(4)]
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.SUCCEEDED, desc
    assert [(a.kind, a.retried) for a in desc.attempts] == [
        (FailureKind.INFRA, True), (FailureKind.INFRA, True), (FailureKind.USER, True), (None, False)], desc.attempts
    assert "exited without recording the end of the app" in desc.attempts[0].reason
    assert desc.attempts[2].reason == "replica r/0 exited with code 3"
    assert desc.num_restarts == 3 and desc.metadata["infra_used"] == 2
    assert len(desc.metadata["attempts"]["r/0"]) == 4 and h.live_processes(app_id) == []
    # lost once more than infra_retries allows: FAILED, its last attempt the infrastructure's
    app_id = sched.submit(AppDef("lost", roles=[h.sh("r", "echo up; exec sleep 300")]), {**cfg, "infra_retries": 1})
    for line in sched.log_iter(app_id, "r", 0, should_tail=True):
        os.kill(sched.describe(app_id).metadata["supervisor_pid"], signal.SIGKILL)
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.FAILED and "infra_retries=1 exhausted" in desc.msg, desc.msg
    assert [(a.kind, a.retried) for a in desc.attempts] == [(FailureKind.INFRA, True), (FailureKind.INFRA, False)]
    assert h.live_processes(app_id) == []


def test_close_keeps_detached_apps_and_cancels_waited_ones(state_dir: Path, cfg: Dict[str, Any], h: Any) -> None:
    s = create_cwd_scheduler("tx", state_dir=str(state_dir))
    detached = s.submit(AppDef("detached", roles=[h.sh("r", "exec sleep 300")]), cfg)
    waited = s.submit(AppDef("waited", roles=[h.sh("r", "exec sleep 300")]), cfg)
    t = threading.Thread(target=s.wait, args=(waited,), kwargs={"timeout": 60})
    t.start()
    while waited not in s._waiting:
        time.sleep(0.005)
    s.close()
    t.join()
    other = create_cwd_scheduler("tx", state_dir=str(state_dir))
    assert other.wait(waited, timeout=30).state == AppState.CANCELLED
    assert other.describe(detached).state == AppState.RUNNING
    other.cancel(detached)
    assert other.wait(detached, timeout=30).state == AppState.CANCELLED


CALLER_STREAM_ON_FD3 = '''
import os, sys
fd = os.open(os.devnull, os.O_WRONLY)
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
sys.stdout = open(3, "w")  # the caller's own stream on fd 3, as an embedding program may have
from tx.specs import AppDef, Role
from tx_scheduler_local.scheduler import create_cwd_scheduler
s = create_cwd_scheduler("tx", supervisor=sys.argv[2])
app_id = s.submit(AppDef("fd3", roles=[Role("r", image="", entrypoint="true")]), {"log_dir": sys.argv[1]})
os.write(1, (s.wait(app_id, timeout=60).state.name + "\\n").encode())
'''


@pytest.mark.parametrize("method", ["fork", "exec"])
def test_a_caller_stream_on_the_ack_descriptor_does_not_stop_the_supervisor(
        state_dir: Path, log_root: Path, tmp_path: Path, method: str) -> None:
    """A caller whose sys.stdout is a file of its own on fd 3: the forked supervisor moves its
    ack pipe to fd 3 and then replaces sys.stdout; freeing the caller's stream closed fd 3,
    the ack never came ("did not start (fork): no acknowledgement")."""
    script = tmp_path / "fd3.py"
    script.write_text(CALLER_STREAM_ON_FD3)
    p = subprocess.run([sys.executable, str(script), str(log_root), method], capture_output=True,
                       text=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, "SUCCEEDED\n"), p.stderr[-2000:]


def test_concurrent_launches_from_several_processes(sched: Any, launcher: Any, h: Any) -> None:
    started = [launcher("exit", "echo hello ${app_id}", n=3) for _ in range(4)]
    ids = [app_id for proc, app_ids in started for app_id in app_ids]
    for proc, _ in started:
        assert proc.wait(timeout=60) == 0
    assert len(set(ids)) == 12
    for app_id in ids:
        assert sched.wait(app_id, timeout=30).state == AppState.SUCCEEDED
        assert h.text(sched, app_id, "r") == f"hello {app_id}\n"
    assert sorted(a.app_id for a in sched.list()) == sorted(ids)


def test_sigkill_of_tx_run_while_it_launches_leaves_no_unexplained_app(tmp_path: Path) -> None:
    """`tx run` killed with SIGKILL at any moment of its launch: every app that reached the
    registry runs to its end (the supervisor outlives its launcher, as a detached app
    does), and no half-written registry entry is ever listed."""
    import random

    tx = os.path.join(os.path.dirname(sys.executable), "tx")
    env = dict(os.environ, TX_STATE_DIR=str(tmp_path / "state"))
    rng = random.Random(7)
    for _ in range(16):
        p = subprocess.Popen([tx, "run", "-s", "local_cwd", "-cfg", f"log_dir={tmp_path / 'logs'}",
                              "utils.sh", "sleep", "1"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 1.2))
        p.kill()
        p.wait()
    sched = create_cwd_scheduler("tx", state_dir=str(tmp_path / "state"))
    apps_dir = tmp_path / "state" / "local" / "apps"
    entries = [d for d in apps_dir.iterdir() if not d.name.startswith(".")] if apps_dir.exists() else []
    for d in entries:
        desc = sched.wait(d.name, timeout=60)
        assert desc is not None, f"{d.name}: an entry the scheduler cannot describe"
        # killed in the few milliseconds between the entry's rename and the supervisor's
        # start: FAILED, and explained
        explained = desc.state == AppState.FAILED and "ended before the app's supervisor started" in desc.msg
        assert desc.state == AppState.SUCCEEDED or explained, f"{d.name}: {desc.state} {desc.msg}"


def test_replicas_that_ended_on_their_own_keep_their_end_when_another_fails_beside_them(
        sched: Any, cfg: Dict[str, Any], h: Any, tmp_path: Path) -> None:
    """CI (stop 46): a replica that had exited 0 but was not reaped yet when another failed
    was stopped as if running and recorded CANCELLED. The supervisor is held (SIGSTOP) while
    all three exit, so it finds them all ended at once; the failing one was started first,
    so Linux's waitpid gives it first."""
    go = tmp_path / "go"
    wait = f"while [ ! -e {go} ]; do sleep 0.01; done"
    roles = [h.sh("reader", f"echo up; {wait}; exit 4"), h.sh("trainer", f"echo up; {wait}; exit 0", 2)]
    app_id = sched.submit(AppDef("beside", roles=roles), cfg)
    for role, k in (("reader", 0), ("trainer", 0), ("trainer", 1)):
        assert next(iter(sched.log_iter(app_id, role, k, should_tail=True))) == "up\n"
    supervisor = sched.describe(app_id).metadata["supervisor_pid"]
    os.kill(supervisor, signal.SIGSTOP)
    try:
        go.touch()
        deadline = time.monotonic() + 30
        while h.live_processes(app_id) and time.monotonic() < deadline:  # all three exited, unreaped
            time.sleep(0.05)
        assert h.live_processes(app_id) == []
    finally:
        os.kill(supervisor, signal.SIGCONT)
    desc = sched.wait(app_id, timeout=30)
    assert desc.state == AppState.FAILED
    assert (h.replica(desc, "reader", 0).state, h.replica(desc, "reader", 0).exit_code) == (AppState.FAILED, 4)
    for k in (0, 1):
        assert (h.replica(desc, "trainer", k).state, h.replica(desc, "trainer", k).exit_code) == (AppState.SUCCEEDED, 0)
