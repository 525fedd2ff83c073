"""Each run's fallback hop runs in its own launch context (environment, working directory),
whoever steps it (issue 41, item 3): two runs launched from two directories with two
environments fail over in one watcher process, or in two threads of one process at once
(tx ui's workers), and each hop gets its run's own, never the other's or the stepping
process's. Through the ``tx`` CLI and the Python API on the real local schedulers."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict

from tx_scheduler_local.scheduler import create_cwd_scheduler

#: the first attempt (local_cwd) waits to be lost; the next (local_dir, in the launch
#: directory) writes what it was given into hop2.out there, and ends
JOB = ('if [ -e ran ]; then echo "mark=${MARK:-unset} pwd=$(pwd)" > hop2.out; exit 0; fi\n'
       "touch ran\nexec sleep 300\n")


def _until(what: Callable[[], Any], timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return got


def _record(state: Path, handle: str) -> Dict[str, Any]:
    return json.loads((state / "runs" / f"{handle.rsplit('/', 1)[1]}.json").read_text())


def _launch(tx, tx_env, launch: Path, mark: str) -> str:
    launch.mkdir()
    (launch / "job.sh").write_text(JOB)
    p = tx("run", "--detach", "-s", "local_cwd", "-cfg", "infra_retries=0", "--fallback", "local_dir",
           "utils.sh", "--image", ".", "--", "sh", "job.sh", cwd=launch, env={**tx_env, "MARK": mark})
    assert p.returncode == 0, p.stderr
    _until(lambda: (launch / "ran").exists())
    return p.stdout.splitlines()[0]


def _lose_first_hop(state: Path, handle: str) -> None:
    app_id = _record(state, handle)["hops"][0]["app_id"]
    desc = create_cwd_scheduler("tx", state_dir=str(state)).describe(app_id)
    os.kill(desc.metadata["supervisor_pid"], signal.SIGKILL)


def _watcher_pid(state: Path) -> int:
    lock = state / "runs" / "watcher.lock"
    return _until(lambda: lock.exists() and lock.read_text().strip().isdigit() and int(lock.read_text()))


def test_two_runs_failing_over_in_one_watcher_each_get_their_own_context(tx, tx_env, tmp_path):
    state = Path(tx_env["TX_STATE_DIR"])
    a, b = tmp_path / "a", tmp_path / "b"
    run_a = _launch(tx, tx_env, a, "A")
    run_b = _launch(tx, tx_env, b, "B")
    watcher = _watcher_pid(state)
    _lose_first_hop(state, run_a)
    _lose_first_hop(state, run_b)
    # no tx command looks at them meanwhile: the watcher alone takes both failovers
    assert _until(lambda: (a / "hop2.out").exists() and (a / "hop2.out").read_text()) == f"mark=A pwd={a}\n"
    assert _until(lambda: (b / "hop2.out").exists() and (b / "hop2.out").read_text()) == f"mark=B pwd={b}\n"
    assert _watcher_pid(state) == watcher
    for run in (run_a, run_b):
        assert [h["scheduler"] for h in _record(state, run)["hops"]] == ["local_cwd", "local_dir"]


def test_two_runs_stepped_by_two_threads_at_once_each_get_their_own_context(tx, tx_env, tmp_path, monkeypatch):
    state = Path(tx_env["TX_STATE_DIR"])
    for k in ("TX_STATE_DIR", "HOME", "TMPDIR"):
        monkeypatch.setenv(k, tx_env[k])
    monkeypatch.setenv("MARK", "stepper")
    monkeypatch.chdir(tmp_path)
    dirs = [tmp_path / f"r{i}" for i in range(4)]
    runs = [_launch(tx, tx_env, d, f"M{i}") for i, d in enumerate(dirs)]
    os.kill(_watcher_pid(state), signal.SIGKILL)  # the threads below take the steps
    for run in runs:
        _lose_first_hop(state, run)
    from tx.runner import get_runner
    from tx.runner import failover

    errors = []
    start = threading.Barrier(len(runs))

    def step(handle: str) -> None:
        try:
            with get_runner() as runner:
                start.wait()
                _until(lambda: len(failover.step(runner.engine, handle).hops) == 2)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)

    threads = [threading.Thread(target=step, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i, d in enumerate(dirs):
        assert _until(lambda d=d: (d / "hop2.out").exists() and (d / "hop2.out").read_text()) == f"mark=M{i} pwd={d}\n"
    assert os.environ["MARK"] == "stepper" and Path.cwd() == tmp_path  # the stepping process's own, restored
