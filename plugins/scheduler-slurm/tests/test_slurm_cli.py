"""The ``tx`` CLI on the real local Slurm cluster: ``tx run -s slurm -cfg
constraint=node1|node2 dist.ddp -j 2x1 --script examples/train.py`` (the two-node DDP run of
the slurm tests), ``tx log``, ``tx status``, ``tx list -s slurm``,
``tx describe`` and ``tx cancel``, each in its own process."""
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def env(slurm_nodes: List[str], tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"  # torchrun and python of this venv on the nodes
    e["HOME"] = str(tmp_path)  # no ~/.txconfig of the developer
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=600)


def test_ddp_run_log_status_list(env: Dict[str, str], tmp_path: Path) -> None:
    """dist.ddp -j 2x1 on node1 and node2 (node features, the ``constraint`` option): one
    torchrun per node, gloo DDP with world size 2, rendezvous at the rank-0 node's NodeAddr
    (TorchX 0.7 hands torchrun the node name, which never resolves here:
    test_node_names_do_not_resolve_on_the_test_cluster); then log, status, list, describe."""
    p = tx(env, tmp_path, "run", "-s", "slurm", "-cfg", "constraint=node1|node2", "dist.ddp", "-j", "2x1",
           "--rdzv_port", str(free_port()), "--script", str(REPO / "examples" / "train.py"),
           "--", "--epochs", "1", "--checkpoint-dir", "")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    assert re.fullmatch(r"slurm://tx/\d+", handle), p.stdout

    p = tx(env, tmp_path, "log", "-f", handle)  # waits for the start, follows to the end
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len([ln for ln in lines if re.fullmatch(r"train/[01] \[0\]:rank 0: done, \d+ training samples on this rank", ln)]) == 1, p.stdout
    assert len([ln for ln in lines if re.fullmatch(r"train/[01] \[0\]:rank 1: done, \d+ training samples on this rank", ln)]) == 1, p.stdout
    assert any(re.match(r"train/[01] \[0\]:world_size=2 test_accuracy=0\.\d+", ln) for ln in lines), p.stdout

    p = tx(env, tmp_path, "status", handle)
    assert p.returncode == 0 and "State: SUCCEEDED" in p.stdout, p.stdout + p.stderr
    assert re.search(r"\*train\[0\]:SUCCEEDED on node\d+", p.stdout), p.stdout
    p = tx(env, tmp_path, "status", "--json", handle)
    assert p.returncode == 0, p.stderr
    (role,) = json.loads(p.stdout)["roles"]
    assert sorted((r["hostname"], r["exit_code"]) for r in role["replicas"]) == [("node1", 0), ("node2", 0)], role
    app_id = handle.rsplit("/", 1)[1]
    batch = (tmp_path / f"slurm-{app_id}.out").read_text()
    assert "TX_RANK0_HOST=127.0.0.1" in batch, batch  # the NodeAddr, not "node1"

    p = tx(env, tmp_path, "list", "-s", "slurm")
    assert p.returncode == 0, p.stderr
    # newest first; Slurm reports no submit time through list(), so the AGE column says "-";
    # DURATION is "-" too, or how long the job ran where Slurm reported its times
    assert re.search(rf"^{re.escape(handle)}\s+SUCCEEDED\s+-\s+(-|\S+)\s+train$", p.stdout, re.M), p.stdout

    p = tx(env, tmp_path, "describe", handle)
    assert p.returncode == 0 and "name: train" in p.stdout and "num_replicas: 2" in p.stdout, p.stdout
    assert (tmp_path / f"slurm-{app_id}-train-1.out").is_file()  # the job ran where tx ran


def test_run_wait_cancel_and_exit_codes(env: Dict[str, str], tmp_path: Path) -> None:
    p = tx(env, tmp_path, "run", "-s", "slurm", "-cfg", f"job_dir={tmp_path / 'j'},time=10",
           "utils.python", "-c", "import os, time; print('started', os.environ['TX_JOB_ID'], flush=True); time.sleep(600)")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    # a follower started before the app runs sees its first line, then the cancel ends it
    proc = subprocess.Popen([str(BIN / "tx"), "log", "-f", f"{handle}/python/0"], cwd=str(tmp_path), env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == f"python/0 started {handle}"
    p = tx(env, tmp_path, "cancel", handle)
    assert p.returncode == 0, p.stderr
    assert proc.wait(timeout=300) == 0  # the follower ends with the app
    p = tx(env, tmp_path, "status", handle)
    assert "State: CANCELLED" in p.stdout, p.stdout

    p = tx(env, tmp_path, "run", "-s", "slurm", "--wait", "-cfg", f"job_dir={tmp_path / 'k'}",
           "utils.sh", "exit", "4")
    assert p.returncode == 1, (p.stdout, p.stderr)
    p = tx(env, tmp_path, "status", p.stdout.strip().splitlines()[0])
    assert "sh[0]:FAILED (exit code 4)" in p.stdout, p.stdout


def test_bad_input_is_one_line(env: Dict[str, str], tmp_path: Path) -> None:
    for args, needle in [
        (["run", "-s", "slurm", "-cfg", "time=soon", "utils.echo"], "run option 'time'"),
        (["run", "-s", "slurm", "-cfg", "partition=nosuch", "utils.echo"], "no partition 'nosuch'"),
        (["run", "-s", "slurm", "-cfg", "partitoin=debug", "utils.echo"], "did you mean 'partition'"),
        (["log", "slurm://tx/2147480002"], "does not exist"),
    ]:
        p = tx(env, tmp_path, *args)
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0 and len(lines) == 1 and needle in lines[0], (args, p.stderr)
        assert "Traceback" not in p.stderr
