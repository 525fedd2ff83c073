"""A local hop the infrastructure lost after its infra_retries fails the run over: its
supervisor SIGKILLed (what a reboot leaves) with ``infra_retries=0`` on local_cwd, the run
moves on to local_dir (docs/recovery.md). The failover watcher SIGKILLed: a ``tx status`` of
one run starts another, which fails over a run nobody looked at."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tx.runner import Runner, failover
from tx.specs import AppDef, AppState, Role


def test_a_lost_local_hop_fails_over(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    mark = tmp_path / "ran"
    script = f"[ -e {mark} ] && {{ echo resumed; exit 0; }}; touch {mark}; exec sleep 300"
    app = AppDef("lost", [Role("w", image=str(tmp_path), entrypoint="sh", args=["-c", script])])
    logs = {"log_dir": str(tmp_path / "logs")}
    with Runner("t") as runner:
        runner.log_archive = None
        handle = runner.run_with_fallback(app, [("local_cwd", {**logs, "infra_retries": 0}), ("local_dir", logs)],
                                          watch=False)
        first = failover.load_record(handle).hops[0].app_id
        while not mark.exists():
            time.sleep(0.01)
        os.kill(runner.scheduler("local_cwd").describe(first).metadata["supervisor_pid"], signal.SIGKILL)
        status = runner.wait(handle, wait_interval=0.1, timeout=30)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        run = runner.run_status(handle)
        assert run.chain.startswith("local_cwd: FAILED (infra: the supervisor of ") and \
            run.chain.endswith("-> local_dir: SUCCEEDED"), run.chain
        assert [h.scheduler for h in failover.load_record(handle).hops] == ["local_cwd", "local_dir"]


def _lock_holder(state: Path) -> int:
    """The pid of the process holding the watcher lock once it wrote it into the lock file,
    else 0 (from /proc/locks: a probe that took the lock would make a watcher starting
    then exit)."""
    try:
        st = os.stat(state / "runs" / "watcher.lock")
    except FileNotFoundError:
        return 0
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if f[1] == "FLOCK" and f[5] == dev:
            return int(f[4]) if (state / "runs" / "watcher.lock").read_text().strip() == f[4] else 0
    return 0


def _until(what, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return got


def test_a_look_at_one_run_restarts_the_killed_watcher_for_all(tmp_path: Path, monkeypatch, tx, tx_env) -> None:
    # the watcher is SIGKILLed; `tx status` of one run restarts it, and the new watcher
    # fails over another run nobody looked at (its local_cwd hop lost meanwhile)
    for k, v in tx_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("TXCONFIG", raising=False)
    state = Path(tx_env["TX_STATE_DIR"])
    mark = tmp_path / "ran"
    script = f"[ -e {mark} ] && exit 0; touch {mark}; exec sleep 300"
    logs = {"log_dir": str(tmp_path / "logs")}
    chain = [("local_cwd", {**logs, "infra_retries": 0}), ("local_dir", logs)]
    with Runner() as runner:
        runner.log_archive = None
        looked = runner.run_with_fallback(AppDef("quick", [Role("w", image=str(tmp_path), entrypoint="true")]), chain)
        first = _until(lambda: _lock_holder(state))  # the one watcher: the next run starts none
        other = runner.run_with_fallback(AppDef("lost", [Role("w", image=str(tmp_path), entrypoint="sh",
                                                              args=["-c", script])]), chain)
        try:
            _until(mark.exists)
            os.kill(first, signal.SIGKILL)
            _until(lambda: not _lock_holder(state))
            sched = runner.scheduler("local_cwd")
            os.kill(sched.describe(failover.load_record(other).hops[0].app_id).metadata["supervisor_pid"], signal.SIGKILL)
            p = tx("status", looked)
            assert p.returncode == 0 and f"Run: {looked}" in p.stdout, (p.stdout, p.stderr)
            second = _until(lambda: _lock_holder(state))
            assert second != first and "tx.runner._failover_watcher" in Path(f"/proc/{second}/cmdline").read_text()
            rec = _until(lambda: (lambda r: r if len(r.hops) == 2 and r.hops[1].app_id else None)(
                failover.load_record(other)))  # it exits once the local_dir hop has ended
            assert [h.scheduler for h in rec.hops] == ["local_cwd", "local_dir"] and not rec.failing_over, rec
            assert rec.hops[0].why.startswith("FAILED (infra: "), rec.hops[0]
        finally:  # the lost hop's replica, if no failover cancelled it
            if len(failover.load_record(other).hops) < 2:
                runner.cancel(other)
