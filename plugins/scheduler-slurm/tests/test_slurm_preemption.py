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


def _scontrol_job(job_id: str, env: Dict[str, str]) -> Dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", job_id, "-o"], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


def _seconds(text: str) -> int:
    """scontrol's RunTime (``[days-]hh:mm:ss``) in seconds."""
    days, _, hms = text.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def test_time_limits_warning_saves_the_last_step_and_requeues(env: Dict[str, str], tmp_path: Path) -> None:
    """``-cfg time=10,signal=USR1@60``: Slurm sends SIGUSR1 to the job's steps 60 s before
    its time limit (up to 60 s earlier: slurmctld checks limits on a 30 s timer). The
    session cluster signals every process of a step (proctrack/linuxproc): torchrun, started
    with SIGUSR1 ignored, lives on; both ranks, armed for it by ``TX_PREEMPT_SIGNAL=USR1``,
    save the same step and leave; the batch script, told by the launchers, records the
    attempt as preempted by the time limit and requeues the job. So that the warning never
    comes before the ranks armed (a loaded host starts torch slowly), the test shortens the
    running job's limit once they did (``scontrol update TimeLimit``, as a user may) to
    between 35 and 95 s ahead: the warning comes at slurmctld's next one or two checks.

    Two orders are forced, not hoped for. slurmctld's timer also ends the job at the limit,
    at its first check after it: as little as one check (30 s) after the warning, when the
    warning's check found 30 s or less left; a loaded host may take longer than that to
    save, end torchrun and srun and requeue, and the job then ended TIMEOUT, never requeued.
    And the requeued attempt keeps the short limit, so slurmctld warns it again a minute
    later. So once a launcher recorded the warning, the test moves the limit 30 minutes out
    (the warning is sent once per attempt: it does not come again)."""
    p = tx(env, tmp_path, "run", "--dryrun", "-s", "slurm", "-cfg", "time=10,signal=B:USR1@60", "utils.echo")
    sbatch = next(ln for ln in p.stdout.splitlines() if ln.startswith("sbatch "))
    assert p.returncode == 0 and "--signal=USR1@60" in sbatch.split(), sbatch
    assert "TX_PREEMPT_SIGNAL=USR1" in p.stdout and "TX_PREEMPT_GRACE=60" in p.stdout, p.stdout
    p = tx(env, tmp_path, "run", "-s", "slurm", "-cfg", "time=10,signal=USR1@60", "dist.ddp", "-j", "1x2",
           "--script", str(REPO / "examples" / "train.py"), "--", "--epochs", "50", "--step-sleep", "0.2",
           "--output-dir", "out")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    try:
        out = tmp_path / f"slurm-{app_id}-train-0.out"
        _until(lambda: out.exists() and ": starting fresh" in out.read_text(), timeout=180)
        elapsed = _seconds(_scontrol_job(app_id, env)["RunTime"])
        minutes = -(-(elapsed + 35) // 60)
        subprocess.run(["scontrol", "update", f"JobId={app_id}", f"TimeLimit={minutes}"], env=env, check=True,
                       capture_output=True, timeout=60)

        # the warning reached a launcher (its 'warned' line): the time limit moves out of the way
        attempts = tmp_path / f"slurm-{app_id}.attempts"
        _until(lambda: attempts.exists() and " warned USR1 " in attempts.read_text(), timeout=150, every=0.2)

        def limit_moved() -> bool:  # a job being requeued may refuse the update for a moment
            subprocess.run(["scontrol", "update", f"JobId={app_id}", "TimeLimit=30"], env=env,
                           capture_output=True, timeout=60)
            return _scontrol_job(app_id, env)["TimeLimit"] == "00:30:00"

        _until(limit_moved, timeout=60, every=0.5)

        def requeued() -> dict:
            s = json.loads(tx(env, tmp_path, "status", "--json", handle).stdout)
            return s if s.get("attempts") and len(s["attempts"]) > 1 else {}

        status = _until(requeued, timeout=150, every=0.5)
        log = tx(env, tmp_path, "log", handle).stdout
        seen = PREEMPTED.findall(log)
        assert sorted((a, b) for a, b, _ in seen) == [("0", "0"), ("1", "1")], log[-3000:]
        (step,) = {int(n) for _, _, n in seen}
        ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", tx(env, tmp_path, "describe", handle).stdout).group(1))
        assert json.loads((ckpt / f"step-{step:09d}" / ".tx-complete").read_text())["step"] == step
        a0 = status["attempts"][0]
        assert a0["kind"] == "infra" and a0["retried"], a0
        assert re.fullmatch(rf"preempted by its time limit \(job {app_id} warned with SIGUSR1 at \S+\); "
                            rf"saved step {step} in [\d.]+ s", a0["reason"]), a0
        batch = (tmp_path / f"slurm-{app_id}.out").read_text()
        assert "[tx] warned by Slurm (SIGUSR1) before the time limit and left: the job requeues itself" in batch
    finally:
        tx(env, tmp_path, "cancel", handle)
