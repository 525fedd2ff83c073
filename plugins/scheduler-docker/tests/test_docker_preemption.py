"""Save on preemption on local_docker (docs/recovery.md, "Preemption"), on the session's
podman engine: the engine stopping a container from outside (``docker stop`` without a
timeout: the container's StopTimeout, the run option ``preempt_grace``) is the warning.
examples/train.py under ``tx run -s local_docker dist.ddp -j 2x1`` (two ranks over gloo, one
container each, this interpreter mounted read-only into the busybox image) asks
``tx.distributed.preempted()`` after every step: the stopped container's torchrun passes
SIGTERM to its rank, every rank sees it at the same step, saves it and leaves; the stop
returns long before the grace; tx records the attempt as preempted (an infra failure: no
``max_retries`` spent) with the step saved, the next attempt resumes there and says so."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from tx.testing.backends import require_module
from tx.testing.preemption import until

REPO = Path(__file__).resolve().parents[3]
TRAIN = REPO / "examples" / "train.py"

pytestmark = pytest.mark.slow
require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
require_module("sklearn", "the main job reads its data set with scikit-learn: pip install scikit-learn")

PREEMPTED = re.compile(r"train/(\d) \[0\]:rank (\d): preempted at step (\d+)\n")
RESUMED = re.compile(r"\[0\]:resumed from checkpoint step (\d+) at (\S+) \(an earlier attempt of this run\)")
EPOCH = re.compile(r"epoch (\d+)/\d+ train_loss=")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def _complete(ckpt: Path) -> List[int]:
    return sorted(int(p.parent.name.split("-")[1]) for p in ckpt.glob("step-*/.tx-complete"))


def _status(tx: Any, handle: str) -> Dict[str, Any]:
    p = tx("status", "--json", handle)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _phases(path: Path) -> List[Dict[str, Any]]:
    """The ranks' phase transitions (examples/train.py's ``--phase-log``), in the order written."""
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def test_a_container_stopped_from_outside_saves_within_the_grace_and_resumes(
        podman_engine: Dict[str, str], docker_client: Any, host_python_mounts: List[str], image: str,
        scheduler: Any, tx: Any, tx_env: Dict[str, str], tmp_path: Path) -> None:
    grace = 20
    env = {**tx_env, **podman_engine}
    bindir = os.path.dirname(sys.executable)
    pp = os.environ.get("PYTHONPATH", "")  # this checkout's sources, mounted below
    log_dir = tmp_path / "phases"  # the ranks' phase log: what each did when, on this host
    log_dir.mkdir()
    phase_log = log_dir / "phases.jsonl"
    mounts = [*host_python_mounts, f"type=bind,src={REPO},dst={REPO},readonly", f"type=bind,src={log_dir},dst={log_dir}"]
    p = tx("run", "--detach", "-s", "local_docker", "-cfg", f"preempt_grace={grace}", "dist.ddp", "-j", "2x1",
           "--cpu", "1", "--image", image, "--env", f"PATH={bindir}:/usr/bin:/bin,HOME=/tmp,PYTHONPATH={pp}",
           "--mounts", ",".join(mounts), "--script", str(TRAIN), "--", "--epochs", "2", "--step-sleep", "0.03",
           "--output-dir", "/tmp/out", "--phase-log", str(phase_log), env=env, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    handle = p.stdout.strip().splitlines()[-1]
    app_id = handle.rsplit("/", 1)[1]
    desc = tx("describe", handle, env=env).stdout
    ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", desc).group(1))
    rank1 = docker_client.containers.get(f"{app_id}-train-1")
    assert rank1.attrs["Config"]["StopTimeout"] == grace
    assert f"TX_PREEMPT_GRACE={grace}" in rank1.attrs["Config"]["Env"]
    until(lambda: _complete(ckpt), timeout=180, every=0.2)  # epoch 1 saved: the loop is running
    t0 = time.monotonic()
    docker_client.api.stop(rank1.id)  # from outside, the container's own timeout: SIGTERM, SIGKILL after 20 s
    took = time.monotonic() - t0
    rank1.reload()
    state = rank1.attrs["State"]
    phases = [(ph["t"], ph["rank"], ph["phase"], ph.get("step")) for ph in _phases(phase_log)]
    said = (f"stop took {took:.2f} s; container {state.get('Status')} exit code {state.get('ExitCode')} "
            f"at {state.get('FinishedAt')}; last phases (t, rank, phase, step): {phases[-12:]}")
    # the job saved and left on its own: its torchrun ended (exit code 1, its SignalException),
    # not the engine's SIGKILL at the end of the grace (137)
    assert state.get("Status") == "exited" and state.get("ExitCode") == 1, said
    # each rank was warned (rank 1 by the stop, rank 0 by their agreement), saved, then left
    for rank in (0, 1):
        mine = [ph for _, r, ph, _ in phases if r == rank]
        assert "preempt" in mine and mine[mine.index("preempt"):][-2:] == ["saved", "exit"], (rank, said)
    assert "warned" in [ph for _, r, ph, _ in phases if r == 1], said
    # each look (describe) may start the next attempt: here in this process, then tx status once
    until(lambda: scheduler.describe(app_id).state.name in TERMINAL, timeout=300, every=0.5)
    status = _status(tx, handle)
    log = tx("log", handle, env=env).stdout
    seen = PREEMPTED.findall(log)
    assert sorted((a, b) for a, b, _ in seen) == [("0", "0"), ("1", "1")], log[-4000:]
    steps = {int(n) for _, _, n in seen}
    assert len(steps) == 1, seen
    step = steps.pop()
    assert step in _complete(ckpt), (step, _complete(ckpt))
    resumed = RESUMED.findall(log)
    assert resumed and resumed[0] == (str(step), str(ckpt)), log[-4000:]
    assert [int(n) for n in EPOCH.findall(log)] == [1, 2], log[-4000:]  # every epoch once
    assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 1, status
    first = status["attempts"][0]
    assert first["kind"] == "infra" and first["retried"], first
    assert re.fullmatch(rf"preempted: SIGTERM to train\[1\] \(container {app_id}-train-1\), not sent by tx; "
                        rf"saved step {step} in [\d.]+ s", first["reason"]), first
    text = tx("status", handle, env=env).stdout
    assert f"#0 FAILED (infra: {first['reason']}), retried" in text, text
