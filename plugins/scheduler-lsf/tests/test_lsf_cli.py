"""The ``tx`` CLI on the session's private OpenLava cluster, each command in its own
process: the main job (``dist.ddp -j 2x1 --script examples/train.py``, two LSF jobs whose
torchruns rendezvous at rank 0's host), ``tx log``, ``status``, ``list``, ``describe``; a
failing replica's why-failed; cancel."""
import json
import os
import re
import socket
import subprocess
import time
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.testing.backends import require_module

pytestmark = pytest.mark.lsf

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def env(lsf_cluster: Any, tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["TX_STATE_DIR"] = str(tmp_path / "state")
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"  # torchrun and python of this venv in the jobs
    e["HOME"] = str(tmp_path)  # no ~/.txconfig of the developer
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=300)


def test_main_job_ddp_2x1(env: Dict[str, str], tmp_path: Path) -> None:
    """dist.ddp -j 2x1: two LSF jobs of one project, replica 1 waits for rank 0 to start
    (-w started()), both torchruns rendezvous at TX_RANK0_HOST (rank 0's execution host from
    bjobs); gloo DDP with world size 2; then log, status, list, describe from other processes."""
    require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
    p = tx(env, tmp_path, "run", "-s", "lsf", "-cfg", f"jobdir={tmp_path / 'job'}", "dist.ddp", "-j", "2x1",
           "--cpu", "1", "--memMB", "512", "--rdzv_port", str(free_port()),
           "--script", str(REPO / "examples" / "train.py"), "--", "--epochs", "1", "--checkpoint-dir", "")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    assert re.fullmatch(r"lsf://tx/train-\w+", handle), p.stdout

    p = tx(env, tmp_path, "log", "-f", handle)  # waits for the start, follows to the end
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for rank in (0, 1):
        assert len([ln for ln in lines if re.fullmatch(
            rf"train/[01] \[0\]:rank {rank}: done, \d+ training samples on this rank", ln)]) == 1, p.stdout
    assert any(re.match(r"train/[01] \[0\]:world_size=2 test_accuracy=0\.\d+", ln) for ln in lines), p.stdout

    p = tx(env, tmp_path, "status", "--json", handle)
    assert p.returncode == 0, p.stderr
    status = json.loads(p.stdout)
    assert status["state"] == "SUCCEEDED", status
    (role,) = status["roles"]
    host = socket.gethostname()
    assert sorted((r["hostname"], r["exit_code"]) for r in role["replicas"]) == [(host, 0), (host, 0)], role
    app_id = handle.rsplit("/", 1)[1]
    report = "".join(f.read_text() for f in (tmp_path / "job").glob(f"{app_id}-train-1.*.lsf.out"))
    assert f"rank 0 on {host}" in report, report  # replica 1 found rank 0's host through bjobs

    p = tx(env, tmp_path, "list", "-s", "lsf")
    assert p.returncode == 0, p.stderr
    assert re.search(rf"^{re.escape(handle)}\s+SUCCEEDED\b", p.stdout, re.M), p.stdout
    p = tx(env, tmp_path, "describe", handle)
    assert p.returncode == 0 and "name: train" in p.stdout and "num_replicas: 2" in p.stdout, p.stdout


def test_failing_replica_says_why(env: Dict[str, str], tmp_path: Path) -> None:
    """A replica that raises fails the app: its state, exit code and why (the exception it
    raised, from its own stderr), and the other replica is ended with it (its script
    bkills the app's other jobs), CANCELLED."""
    script = ("import os, sys, time\n"
              "if os.environ['TX_REPLICA_ID'] == '1':\n"
              "    time.sleep(1); raise ValueError('bad shard 7')\n"
              "time.sleep(300)\n")
    p = tx(env, tmp_path, "run", "-s", "lsf", "-cfg", f"jobdir={tmp_path / 'job'}", "utils.python",
           "--num_replicas", "2", "-c", script)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    desc: Dict[str, Any] = {}
    for _ in range(240):
        p = tx(env, tmp_path, "status", "--json", handle)
        assert p.returncode == 0, p.stderr
        desc = json.loads(p.stdout)
        reps = {r["id"]: r for r in desc["roles"][0]["replicas"]}
        if desc["state"] == "FAILED" and reps[0]["state"] in ("CANCELLED", "FAILED", "SUCCEEDED"):
            break
        subprocess.run(["sleep", "0.5"])
    assert desc["state"] == "FAILED", desc
    reps = {r["id"]: r for r in desc["roles"][0]["replicas"]}
    assert reps[1]["state"] == "FAILED" and reps[1]["exit_code"] == 1, reps
    assert reps[0]["state"] == "CANCELLED", reps
    assert "ValueError: bad shard 7" in desc["structured_error_msg"], desc
    p = tx(env, tmp_path, "status", handle)
    assert "ValueError: bad shard 7" in p.stdout, p.stdout


def test_cancel_and_pending_reason(env: Dict[str, str], tmp_path: Path, lsf_cluster: Any) -> None:
    """An app no host can run pends, and status says why (LSF's pending reason); cancel ends
    it CANCELLED."""
    p = tx(env, tmp_path, "run", "-s", "lsf", "-cfg", f"jobdir={tmp_path / 'job'},select=maxmem>99999999",
           "utils.sh", "echo", "never")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    for _ in range(60):
        p = tx(env, tmp_path, "status", handle)
        if "resource requirements not satisfied" in p.stdout:
            break
        subprocess.run(["sleep", "0.5"])
    assert "State: PENDING" in p.stdout and "no host has the slots, memory or select[] it asks for" in p.stdout, p.stdout
    p = tx(env, tmp_path, "cancel", handle)
    assert p.returncode == 0, p.stderr
    for _ in range(60):
        p = tx(env, tmp_path, "status", handle)
        if "State: CANCELLED" in p.stdout:
            break
        subprocess.run(["sleep", "0.5"])
    assert "State: CANCELLED" in p.stdout, p.stdout


def test_requeued_job_is_not_an_end(apps: Any, lsf_cluster: Any) -> None:
    """An administrator's ``brequeue`` of a running replica: OpenLava reports the job EXIT for
    a moment, then pends and runs it again. tx never calls that moment an end (it was
    CANCELLED, a terminal state the app then left): the app goes on to SUCCEEDED."""
    app_id = apps.submit([apps.role("a", "sh", ["-c", "echo run; sleep 4"])])
    seen = []
    while True:
        desc = apps.sched.describe(app_id)
        seen.append(desc.state.name)
        if desc.state.name == "RUNNING":
            break
        assert len(seen) < 600, seen
        time.sleep(0.1)
    (job_id,) = desc.metadata["jobs"].values()
    p = lsf_cluster.run("brequeue", job_id)
    assert p.returncode == 0 and "requeued" in p.stdout, p.stdout + p.stderr
    requeued_at = time.monotonic()
    for _ in range(1200):
        desc = apps.sched.describe(app_id)
        seen.append(desc.state.name)
        if desc.state.name in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        if time.monotonic() - requeued_at > 5:  # looks without a pause while OpenLava requeues:
            time.sleep(0.1)  # its EXIT comes some ms before the report that says it runs again
    assert seen[-1] == "SUCCEEDED", seen
    assert apps.text(app_id, "a").count("run\n") == 2  # it ran again
