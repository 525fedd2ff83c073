"""The warning before LSF ends a running job, on the session's private OpenLava cluster:
``brequeue`` (an administrator taking the host back; the job runs again) and ``bkill`` both
send the job's process groups SIGINT, then SIGTERM and SIGKILL ``JOB_TERMINATE_INTERVAL``
(10 s) apart (OpenLava's sbd.sig.c ``jobsig1``; IBM LSF's default too). A two-rank
``dist.ddp -j 1x2 examples/train.py`` replica (torchrun and its workers, each in a session of
its own) must save the step both ranks completed, and the next run must resume there."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.testing.backends import require_module
from tx.testing.preemption import until as _until

pytestmark = pytest.mark.lsf
require_module("torch", "the main job trains with torch: pip install torch==2.13.0")

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
PREEMPTED = re.compile(r"rank (\d): preempted at step (\d+)\n")
RESUMED = re.compile(r"resumed from checkpoint step (\d+) at (\S+) \(an earlier attempt of this run\)")


@pytest.fixture
def env(lsf_cluster: Any, tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["TX_STATE_DIR"] = str(tmp_path / "state")
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"  # torchrun and python of this venv in the jobs
    e["HOME"] = str(tmp_path)
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=300)


def test_requeued_replica_saves_its_last_step_and_resumes_there(env: Dict[str, str], tmp_path: Path,
                                                                lsf_cluster: Any) -> None:
    """brequeue of the running replica: both ranks (armed for SIGINT by TX_PREEMPT_SIGNAL=INT;
    torchrun passes LSF's SIGINT on to them) save the step they completed, the next run
    resumes there, and the attempt is ``infra`` naming the step; then ``tx cancel`` (bkill):
    they save again and the app ends CANCELLED. On the old script (the program's SIGINT
    ignored, turned into SIGTERM) torchrun sent its workers SIGINT: a KeyboardInterrupt, no
    save, the next run resumed from the epoch's periodic save."""
    job = tmp_path / "job"
    p = tx(env, tmp_path, "run", "-s", "lsf", "-cfg", f"jobdir={job}", "dist.ddp", "-j", "1x2",
           "--script", str(REPO / "examples" / "train.py"), "--", "--epochs", "50", "--step-sleep", "0.2",
           "--output-dir", "out")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    try:
        out = job / f"{app_id}-train-0.out"
        _until(lambda: out.exists() and ": starting fresh" in out.read_text(), timeout=180)
        ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", tx(env, tmp_path, "describe", handle).stdout).group(1))
        jobs = subprocess.run(["bjobs", "-noheader", "-w", "-P", app_id], env=lsf_cluster.env, capture_output=True,
                              text=True, timeout=30).stdout.split()
        job_id = jobs[0]
        lsf_cluster.wait_started(job_id)
        assert lsf_cluster.run("brequeue", job_id).returncode == 0
        _until(lambda: RESUMED.search(out.read_text()), timeout=240, every=0.5)
        text = out.read_text()
        seen = PREEMPTED.findall(text)
        assert sorted(r for r, _ in seen) == ["0", "1"], text[-3000:]
        (step,) = {int(n) for _, n in seen}
        assert RESUMED.search(text).groups() == (str(step), str(ckpt)), text[-3000:]
        assert json.loads((ckpt / f"step-{step:09d}" / ".tx-complete").read_text())["step"] == step
        status = json.loads(tx(env, tmp_path, "status", "--json", handle).stdout)
        a0 = status["attempts"][0]
        assert a0["kind"] == "infra" and a0["retried"], status["attempts"]
        assert re.fullmatch(rf"train\[0\]: requeued by an administrator \(brequeue\); saved step {step} in [\d.]+ s",
                            a0["reason"]), a0
        # tx cancel is a bkill: the same warning; the resumed run saves again and the app is CANCELLED
        assert tx(env, tmp_path, "cancel", handle).returncode == 0
        _until(lambda: json.loads(tx(env, tmp_path, "status", "--json", handle).stdout)["state"] == "CANCELLED",
               timeout=120, every=0.5)
        again = PREEMPTED.findall(out.read_text())[2:]
        assert sorted(r for r, _ in again) == ["0", "1"], out.read_text()[-3000:]
        (last,) = {int(n) for _, n in again}
        assert last >= step and (ckpt / f"step-{last:09d}" / ".tx-complete").exists()
    finally:
        tx(env, tmp_path, "cancel", handle)
