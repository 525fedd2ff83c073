"""A local hop the infrastructure lost after its infra_retries fails the run over: its
supervisor SIGKILLed (what a reboot leaves) with ``infra_retries=0`` on local_cwd, the run
moves on to local_dir (docs/recovery.md)."""
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
