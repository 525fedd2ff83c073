"""``tx run`` on the session's private Slurm cluster as a person sees it: ``--name`` is the
Slurm job name (squeue) and ``tx list``'s NAME; an app that stays PENDING shows the live line
(state, elapsed time, Slurm's pending reason) in a terminal (tmux), and Ctrl-C cancels it."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.testing.backends import backend_unavailable

pytestmark = pytest.mark.slurm

BIN = Path(sys.executable).parent


@pytest.fixture
def env(slurm_nodes: List[str], tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"
    e["HOME"] = str(tmp_path)  # no ~/.txconfig of the developer
    e["TX_STATE_DIR"] = str(tmp_path / "state")
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=120)


def test_name_is_the_job_name_and_a_pending_app_shows_why(env: Dict[str, str], tmp_path: Path,
                                                          slurm_cluster: Any, terminal: Any) -> None:
    if shutil.which("tmux") is None:
        backend_unavailable("tmux", "the terminal test needs tmux (apt-get install tmux)")
    cfg = f"job_dir={tmp_path},time=2"
    blocker = tx(env, tmp_path, "run", "-s", "slurm", "--name", "blocker_1", "-cfg", cfg, "utils.sh", "sleep", "120")
    assert blocker.returncode == 0, blocker.stderr
    handle = blocker.stdout.splitlines()[0]
    job_id = handle.rsplit("/", 1)[1]
    try:
        q = slurm_cluster.run("squeue", "--noheader", "--jobs", job_id, "--format=%j")
        assert q.stdout.split() == ["blocker_1@sh-0"], q.stdout + q.stderr
        listed = tx(env, tmp_path, "list", "-s", "slurm")
        assert re.search(rf"^{re.escape(handle)}\s.*\sblocker_1$", listed.stdout, re.M), listed.stdout

        pane = terminal(env, tmp_path)
        pane.send(f"tx run -s slurm --wait -cfg {cfg},dependency=afterok:{job_id} utils.echo --msg hi; echo rc=$?",
                  "Enter")
        s = pane.wait_for(lambda s: re.search(r"^tx run: PENDING [2-9] s: Dependency: it waits for the jobs it "
                                              r"depends on \(run option dependency\)  \(Ctrl-C cancels\)$", s, re.M))
        waiting = re.search(r"^slurm://tx/\d+$", s, re.M)
        assert waiting is not None, s
        pane.send("C-c")
        s = pane.wait_for(lambda s: re.search(r"^rc=\d+$", s, re.M))
        assert f"tx run: cancelled {waiting.group(0)} (Ctrl-C)" in s and "rc=130" in s, s
        state = slurm_cluster.run("squeue", "--noheader", "--jobs", waiting.group(0).rsplit("/", 1)[1], "--format=%T")
        assert state.stdout.strip() in ("", "CANCELLED"), state.stdout
    finally:
        tx(env, tmp_path, "cancel", "--no-wait", handle)
