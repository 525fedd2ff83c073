"""A real preemption on the private cluster (docs/recovery.md, "Preemption"): partition
``low`` (``PreemptMode=REQUEUE``, ``GraceTime=5``) and ``high`` (a higher ``PriorityTier``)
share node4 (scripts/start-slurm.sh). ``tx run -s slurm -cfg partition=low dist.ddp -j 1x2
examples/train.py`` (two ranks over gloo, one node) is preempted by a job submitted to
``high`` (itself a tx app, ``-cfg partition=high,exclusive=True``): every rank sees SIGTERM, saves the step it completed and leaves with
``exit_preempted()``; the batch script requeues the job; the next attempt resumes at that
step and says so; ``tx status`` records the attempt as an infrastructure failure (no
``max_retries`` spent) naming the step saved and how long the save took."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from tx.testing.backends import require_module
from tx.testing.preemption import until as _until

pytestmark = pytest.mark.slurm
require_module("torch", "the main job trains with torch: pip install torch==2.13.0")

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
PREEMPTED = re.compile(r"\[(\d)\]:rank (\d): preempted at step (\d+)\n")
RESUMED = re.compile(r"\[0\]:resumed from checkpoint step (\d+) at (\S+) \(an earlier attempt of this run\)")


@pytest.fixture
def env(slurm_nodes: List[str], tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"  # torchrun and python of this venv on the nodes
    e["HOME"] = str(tmp_path)
    e["TX_STATE_DIR"] = str(tmp_path / "state")
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=300)


def test_partition_grace_time_is_the_jobs_grace(env: Dict[str, str], tmp_path: Path) -> None:
    p = tx(env, tmp_path, "run", "--dryrun", "-s", "slurm", "-cfg", "partition=low", "utils.echo")
    assert p.returncode == 0 and "TX_PREEMPT_GRACE=5" in p.stdout and "TX_PREEMPT_SIGNAL" not in p.stdout, p.stdout
    p = tx(env, tmp_path, "run", "--dryrun", "-s", "slurm", "-cfg", "partition=low,signal=USR1@30", "utils.echo")
    assert p.returncode == 0 and "TX_PREEMPT_GRACE=30" in p.stdout and "TX_PREEMPT_SIGNAL=USR1" in p.stdout, p.stdout
    p = tx(env, tmp_path, "run", "--dryrun", "-s", "slurm", "utils.echo")  # debug: no GraceTime
    assert p.returncode == 0 and "TX_PREEMPT_GRACE" not in p.stdout, p.stdout


def test_high_priority_job_preempts_saves_requeues_and_resumes(env: Dict[str, str], tmp_path: Path) -> None:
    p = tx(env, tmp_path, "run", "-s", "slurm", "-cfg", "partition=low", "dist.ddp", "-j", "1x2",
           "--script", str(REPO / "examples" / "train.py"), "--", "--epochs", "1", "--step-sleep", "0.2",
           "--output-dir", "out")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    desc = tx(env, tmp_path, "describe", handle).stdout
    ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", desc).group(1))
    (tmp_path / "high").mkdir()
    out = tmp_path / f"slurm-{app_id}-train-0.out"
    # printed after preempted() armed the warning's handler: the training loop starts
    _until(lambda: out.exists() and ": starting fresh" in out.read_text(), timeout=180)
    # a job of partition high that needs the whole node: Slurm preempts the job of low
    high = tx(env, tmp_path / "high", "run", "-s", "slurm", "-cfg", "partition=high,exclusive=True",
              "utils.echo", "--msg", "high")
    assert high.returncode == 0, high.stderr

    def ended() -> dict:
        s = json.loads(tx(env, tmp_path, "status", "--json", handle).stdout)
        return s if s["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else {}

    status = _until(ended, timeout=180, every=0.5)
    log = tx(env, tmp_path, "log", handle).stdout
    seen = PREEMPTED.findall(log)
    assert sorted((a, b) for a, b, _ in seen) == [("0", "0"), ("1", "1")], log[-3000:]
    (step,) = {int(n) for _, _, n in seen}
    after = log[log.rindex("preempted at step"):]
    first = next(ln for ln in after.splitlines() if re.match(r"train/0 \[0\]:\S", ln))
    assert RESUMED.search(first) and RESUMED.search(first).groups() == (str(step), str(ckpt)), after
    assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 1, status
    a0 = status["attempts"][0]
    assert a0["kind"] == "infra" and a0["retried"], a0
    assert re.fullmatch(rf"preempted by Slurm \(job {app_id} warned at \S+\); saved step {step} in [\d.]+ s",
                        a0["reason"]), a0
    text = tx(env, tmp_path, "status", handle).stdout
    assert f"#0 FAILED (infra: {a0['reason']}), retried" in text, text
    p = tx(env, tmp_path, "status", "--json", high.stdout.strip())
    assert json.loads(p.stdout)["state"] == "SUCCEEDED", p.stdout + p.stderr
