"""The ``tx`` CLI on the private Ray head, each command in its own process: a real
two-replica gloo DDP job (``tx run --log -s ray dist.ddp -j 2x1 --script train.py``) with each
rank's lines under its own prefix, then ``tx status``, ``tx log``, ``tx list`` and
``tx describe`` from fresh processes that know only the handle."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from tx.testing.backends import free_port, require_module

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


@pytest.fixture
def env(ray_head: str, tmp_path: Path) -> Dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
    e["PATH"] = f"{BIN}{os.pathsep}{e['PATH']}"
    e["HOME"] = str(tmp_path / "home")  # no ~/.txconfig of the developer
    e["RAY_ADDRESS"] = ray_head
    return e


def tx(env: Dict[str, str], cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "tx"), *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_ddp_2x1_relays_each_rank_under_its_prefix(env: Dict[str, str], tmp_path: Path) -> None:
    require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
    require_module("sklearn", "the main job reads its data set with scikit-learn: pip install scikit-learn")
    p = tx(env, tmp_path, "run", "--log", "-s", "ray", "--workspace", str(REPO / "examples"),
           "dist.ddp", "-j", "2x1", "--cpu", "1", "--memMB", "1024", "--rdzv_port", str(free_port()),
           "--script", "train.py",
           "--", "--epochs", "1", "--checkpoint-dir", "")
    assert p.returncode == 0, p.stdout + p.stderr
    handle = p.stdout.splitlines()[0]
    assert re.fullmatch(r"ray://tx/127\.0\.0\.1:\d+-train-[a-z0-9]+", handle), p.stdout
    lines = (p.stdout + p.stderr).splitlines()  # the replicas' stdout on stdout, stderr on stderr
    for rank in (0, 1):
        # torchrun's --tee prefixes the worker's lines with [0]: (one worker per replica)
        done = [ln for ln in lines if re.search(rf"\[0\]:rank {rank}: done, \d+ training samples", ln)]
        assert len(done) == 1 and done[0].startswith(f"train/{rank} "), (rank, p.stderr)
    acc = [ln for ln in lines if "world_size=2 test_accuracy=" in ln]
    assert len(acc) == 1 and acc[0].startswith("train/0 "), p.stderr
    assert not [ln for ln in lines if "tx-ray-driver" in ln], "the driver's own output was relayed"

    # fresh processes, without RAY_ADDRESS: the handle names the cluster
    bare = {k: v for k, v in env.items() if k != "RAY_ADDRESS"}
    st = tx(bare, tmp_path, "status", handle)
    assert st.returncode == 0 and "State: SUCCEEDED" in st.stdout, st.stdout + st.stderr
    assert re.search(r"\*train\[0\]:SUCCEEDED on vm|\*train\[0\]:SUCCEEDED on \S+", st.stdout), st.stdout
    lg = tx(bare, tmp_path, "log", f"{handle}/train/1")
    assert lg.returncode == 0, lg.stderr
    assert re.search(r"\[0\]:rank 1: done", lg.stdout) and "rank 0: done" not in lg.stdout, lg.stdout
    lg = tx(bare, tmp_path, "log", "--regex", "test_accuracy", f"{handle}/train/0")
    assert lg.returncode == 0 and lg.stdout.count("\n") == 1 and "world_size=2" in lg.stdout, lg.stdout
    ls = tx(env, tmp_path, "list", "-s", "ray")
    assert ls.returncode == 0 and handle in ls.stdout, ls.stdout + ls.stderr
    de = tx(bare, tmp_path, "describe", handle)
    assert de.returncode == 0 and "torchrun" in de.stdout, de.stdout + de.stderr


def test_cancel_from_another_process(env: Dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    p = tx(env, tmp_path, "run", "-s", "ray", "--workspace", str(ws), "utils.sh", "--num_replicas", "2",
           "sleep", "600")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.splitlines()[0]
    c = tx(env, tmp_path, "cancel", handle)
    assert c.returncode == 0, c.stderr
    st = tx(env, tmp_path, "status", handle)
    for _ in range(60):
        if "State: CANCELLED" in st.stdout:
            break
        st = tx(env, tmp_path, "status", handle)
    assert "State: CANCELLED" in st.stdout, st.stdout + st.stderr


#: a trial's program for the sweep: python reads its parameters (``--lr`` and
#: ``--batch-size``, as the DDP example would), writes them with its TX_TRIAL_INDEX to
#: ``<--output-dir>/result.json`` and prints them. Cheap on purpose: a trial is a job of the
#: head whatever it runs; the DDP example as a sweep trains for real in
#: tests/test_sweep_e2e.py, and DDP on Ray above, in test_ray_ddp_loopback.py and in
#: tests/test_portability.py
TRIAL = ("import json, os, sys; a = dict(zip(sys.argv[1::2], sys.argv[2::2])); "
         "r = dict(trial=int(os.environ['TX_TRIAL_INDEX']), lr=float(a['--lr']), batch=int(a['--batch-size'])); "
         "os.makedirs(a['--output-dir'], exist_ok=True); "
         "json.dump(r, open(os.path.join(a['--output-dir'], 'result.json'), 'w')); "
         "print('trained', json.dumps(r, sort_keys=True))")


def test_a_2x2_grid_sweep(env: Dict[str, str], tmp_path: Path) -> None:
    """`tx sweep -s ray ... utils.sh --entrypoint python -- -c TRIAL ...`: each trial a job
    of the Job Submission API, at most 2 at once under the supervisor (which starts the next
    trials when it sees the first end on the head: two waves); every trial writes its own
    parameters, `tx status` of the sweep shows them all SUCCEEDED, and `tx log` reads one
    trial. (A 2x2 grid: every Ray job costs seconds of the head's own processes, and a third
    wave proved nothing the second does not.)"""
    import json

    env = {**env, "TX_STATE_DIR": str(tmp_path / "state")}
    out = tmp_path / "out"
    p = tx(env, tmp_path, "sweep", "-s", "ray", "--grid", "lr=0.05,0.1", "--grid", "batch=16,64",
           "--max_parallel", "2", "--wait", "utils.sh", "--cpu", "1", "--memMB", "1024", "--entrypoint", "python",
           "--", "-c", TRIAL, "--lr", "${lr}", "--batch-size", "${batch}", "--output-dir", f"{out}/${{lr}}-${{batch}}",
           timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "SUCCEEDED (4 succeeded)" in p.stdout, p.stdout
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 64)]
    for k, (lr, b) in enumerate(trials):
        assert json.loads((out / f"{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
    handle = p.stdout.splitlines()[0]
    log = tx(env, tmp_path, "log", f"{handle}/2/sh/0")
    assert log.stdout.strip().endswith('trained {"batch": 16, "lr": 0.1, "trial": 2}'), log.stdout + log.stderr


def test_a_head_that_never_answers_is_one_line_within_the_timeout(tx_env: Dict[str, str], tx: Any, tmp_path: Path,
                                                                   one_line_error: Any) -> None:
    """A dashboard that accepts connections and never answers (Ray's SDK sets no timeout):
    ``tx status`` and ``tx cancel`` fail in one line once ``TX_RAY_TIMEOUT`` (here 2 s) has
    passed, where they waited for ever (the subprocess's own 60 s bound a hang); a bad
    ``TX_RAY_TIMEOUT`` is one line too."""
    require_module("ray", "the ray scheduler: pip install -e plugins/scheduler-ray")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    handle = f"ray://tx/127.0.0.1:{silent.getsockname()[1]}-raysubmit_silent"
    env = {**tx_env, "TX_RAY_TIMEOUT": "2"}
    env.pop("RAY_ADDRESS", None)
    try:
        for verb in ("status", "cancel"):  # each from a host with no shared answer yet
            p = tx(verb, handle, env={**env, "TX_STATE_DIR": str(tmp_path / verb)}, timeout=60)
            one_line_error(p, "no Ray dashboard answers at http://127.0.0.1:")
            assert "Read timed out. (read timeout=2.0)" in p.stderr and "shared" not in p.stderr, p.stderr
        p = tx("status", "--fresh", handle, env={**env, "TX_RAY_TIMEOUT": "soon"}, timeout=60)
        one_line_error(p, "TX_RAY_TIMEOUT must be a positive number of seconds, got 'soon'")
    finally:
        silent.close()
