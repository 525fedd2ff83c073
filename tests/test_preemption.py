"""Save on preemption, on the local schedulers (docs/recovery.md, "Preemption"): a SIGTERM
that tx did not send is the warning. examples/train.py under ``tx run -s local_cwd
dist.ddp -j 1x2`` (two ranks, gloo) asks ``tx.distributed.preempted()`` after every step:
every rank sees it at the same step, saves that step and leaves with ``exit_preempted()``;
tx records the attempt as preempted (an infra failure: no ``max_retries`` spent) with the
step saved, and the next attempt resumes there and says so. A job that does not save in
time is killed at the end of ``preempt_grace`` and tx says so. A checkpoint without its
completion marker is never read."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import List

import pytest

from tx.testing.backends import require_module
from tx.testing.preemption import app_pids as _app_pids, train_script
from tx.testing.preemption import until as _until

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "examples" / "train.py"

pytestmark = pytest.mark.slow
require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
require_module("sklearn", "the main job reads its data set with scikit-learn: pip install scikit-learn")

PREEMPTED = re.compile(r"\[(\d)\]:rank (\d): preempted at step (\d+)\n")
RESUMED = re.compile(r"\[0\]:resumed from checkpoint step (\d+) at (\S+) \(an earlier attempt of this run\)\n")
EPOCH = re.compile(r"epoch (\d+)/\d+ train_loss=")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def _launch(tx, tx_env, grace: float, *job: str, component=("dist.ddp", "-j", "1x2"), sched="local_cwd") -> tuple:
    """``tx run --detach -s sched``; returns (handle, app id, checkpoint dir, the app's state.json)."""
    p = tx("run", "--detach", "-s", sched, "-cfg", f"preempt_grace={grace:g}", *component, *job, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    handle = p.stdout.strip()
    desc = tx("describe", handle).stdout
    assert f"TX_PREEMPT_GRACE: {grace:g}" not in desc  # set per replica by the scheduler, not in the AppDef
    ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", desc).group(1))
    app_id = handle.rsplit("/", 1)[1]
    return handle, app_id, ckpt, Path(tx_env["TX_STATE_DIR"]) / "local" / "apps" / app_id / "state.json"


def _complete(ckpt: Path) -> List[int]:
    return sorted(int(p.parent.name.split("-")[1]) for p in ckpt.glob("step-*/.tx-complete"))


def _status(tx, handle: str) -> dict:
    p = tx("status", "--json", handle)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _ended(tx, handle: str, state: Path) -> dict:
    """``tx status`` once (it starts an app its supervisor left after a warning), then wait
    for the app's recorded state to be terminal; returns ``tx status --json``."""
    _status(tx, handle)
    _until(lambda: json.loads(state.read_text() or "{}").get("state") in TERMINAL, every=0.2)
    return _status(tx, handle)


def _train_args(epochs: int = 2) -> tuple:
    return ("--script", str(TRAIN), "--", "--epochs", str(epochs), "--step-sleep", "0.03", "--output-dir", "out")


def _check_resumed(log: str, ckpt: Path) -> int:
    """Every rank was preempted at the same step N; the next attempt's first line says it
    resumed from N; every epoch ran to its end once. Returns N."""
    seen = PREEMPTED.findall(log)
    assert sorted((a, b) for a, b, _ in seen) == [("0", "0"), ("1", "1")], log[-3000:]
    steps = {int(n) for _, _, n in seen}
    assert len(steps) == 1, seen
    step = steps.pop()
    after = log[log.rindex("preempted at step"):]
    first = next(ln for ln in after.splitlines() if ln.startswith("train/0 [0]:") and ln.strip() != "train/0 [0]:")
    assert RESUMED.search(first + "\n") and RESUMED.search(first + "\n").groups() == (str(step), str(ckpt)), after
    assert [int(n) for n in EPOCH.findall(log)] == [1, 2], log[-3000:]
    return step


def _ddp(sched: str, tmp_path: Path) -> tuple:
    """dist.ddp of two ranks on ``sched``: local_dir runs each replica in its image, a directory."""
    if sched == "local_cwd":
        return ("dist.ddp", "-j", "1x2")
    (tmp_path / "image").mkdir()
    return ("dist.ddp", "--image", str(tmp_path / "image"), "-j", "1x2")


#: both local schedulers: local_dir is local_cwd's code with the replicas in the image directory
LOCAL = pytest.mark.parametrize("sched", ["local_cwd", "local_dir"])


@LOCAL
def test_warning_to_one_rank_reaches_every_rank_which_save_and_resume(tx, tx_env, sched, tmp_path):
    handle, app_id, ckpt, state = _launch(tx, tx_env, 20, *_train_args(), component=_ddp(sched, tmp_path), sched=sched)
    _until(lambda: _complete(ckpt))  # epoch 1 saved: the loop is running
    (worker,) = _app_pids(app_id, "RANK=1", "LOCAL_RANK=1")
    os.kill(worker, signal.SIGTERM)  # from outside, to rank 1 alone
    status = _ended(tx, handle, state)
    log = tx("log", handle).stdout
    step = _check_resumed(log, ckpt)
    assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 1, status
    first = status["attempts"][0]
    assert first["kind"] == "infra" and first["retried"], first
    assert re.fullmatch(rf"preempted: SIGTERM to replica train/0, not sent by tx; saved step {step} in [\d.]+ s",
                        first["reason"]), first
    text = tx("status", handle).stdout
    assert f"#0 FAILED (infra: {first['reason']}), retried" in text, text


def test_status_json_has_the_saved_step_its_save_time_and_the_resumed_step_as_fields(tx, tx_env, tmp_path):
    """``tx status --json``: the preempted attempt's ``saved_step`` and ``save_seconds`` and
    the next attempt's ``resumed_step`` are fields (not only words of the reason), equal to
    what the job printed and to the completion marker; the run's tracker (the file tracker)
    has them too, recorded by the job's rank 0."""
    tx_env.update(TX_TRACKERS="file", TX_TRACKER_FILE_CONFIG=str(tmp_path / "runs"))
    handle, app_id, ckpt, state = _launch(tx, tx_env, 20, component=(
        "utils.python", "--script", str(train_script(tmp_path))))
    out = Path(tx_env["TMPDIR"]) / f"tx-{os.getuid()}" / "tx" / app_id / "python" / "0" / "stdout.log"
    _until(lambda: out.exists() and "started grace" in out.read_text())
    (pid,) = _app_pids(app_id, "TX_REPLICA_ID=0")
    os.kill(pid, signal.SIGTERM)  # from outside
    status = _ended(tx, handle, state)
    log = tx("log", handle).stdout
    saved = int(re.search(r"python/0 saved (\d+)\n", log).group(1))
    assert f"python/0 resumed at {saved} grace 20.0\n" in log, log
    assert status["state"] == "SUCCEEDED", status
    first, second = status["attempts"]
    marker = json.loads((ckpt / f"step-{saved:09d}" / ".tx-complete").read_text())
    assert (first["kind"], first["saved_step"], second["resumed_step"]) == ("infra", saved, saved), status["attempts"]
    assert first["save_seconds"] == pytest.approx(marker["seconds"], abs=0.051), (first, marker)
    assert first["resumed_step"] is None and second["saved_step"] is None and second["save_seconds"] is None
    p = tx("tracker", "list", "metadata", "--json", "--tracker", "file", handle)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {f"preempted_at_step_{saved}": {"saved_step": saved, "save_seconds": marker["seconds"]},
                                    f"resumed_from_step_{saved}": {"resumed_step": saved}}, p.stdout


@LOCAL
def test_warning_to_the_supervisor_saves_within_the_grace_and_resumes(tx, tx_env, sched, tmp_path):
    grace = 20.0
    handle, app_id, ckpt, state = _launch(tx, tx_env, grace, *_train_args(), component=_ddp(sched, tmp_path),
                                          sched=sched)
    _until(lambda: _complete(ckpt))
    sup = json.loads(state.read_text())["pid"]
    t0 = time.monotonic()
    os.kill(sup, signal.SIGTERM)  # a host shutting down
    _until(lambda: not os.path.exists(f"/proc/{sup}") or open(f"/proc/{sup}/stat").read().split()[2] == "Z",
           timeout=grace + 10, every=0.05)
    took = time.monotonic() - t0
    assert took < grace, took  # the job saved and left on its own, well before the kill
    assert _app_pids(app_id) == []  # no rank outlived its supervisor
    status = _ended(tx, handle, state)  # tx status starts it again: an infra attempt
    log = tx("log", handle).stdout
    step = _check_resumed(log, ckpt)
    assert status["state"] == "SUCCEEDED", status
    first = status["attempts"][0]
    assert first["kind"] == "infra", first
    assert re.fullmatch(rf"preempted: SIGTERM to its supervisor \(pid {sup}\), not sent by tx; saved step {step} "
                        r"in [\d.]+ s", first["reason"]), first


JOB_THAT_DOES_NOT_SAVE = """
import sys, time
from tx.distributed import latest_checkpoint, preempted, save_checkpoint
preempted()  # armed: the warning is only noted, and this job never looks again
found = latest_checkpoint()
if found:
    print(f"resumed at {found[0]}", flush=True)
    sys.exit(0)
save_checkpoint({"x": 1}, step=5)
print("saved 5", flush=True)
while True:
    time.sleep(0.05)
"""


def test_a_job_that_does_not_save_is_killed_after_the_grace_and_tx_says_so(tx, tmp_path, tx_env):
    script = tmp_path / "job.py"
    script.write_text(JOB_THAT_DOES_NOT_SAVE)
    grace = 1.0
    handle, app_id, ckpt, state = _launch(tx, tx_env, grace, component=("utils.python", "--script", str(script)))
    _until(lambda: _complete(ckpt))
    sup = json.loads(state.read_text())["pid"]
    t0 = time.monotonic()
    os.kill(sup, signal.SIGTERM)
    _until(lambda: not os.path.exists(f"/proc/{sup}") or open(f"/proc/{sup}/stat").read().split()[2] == "Z",
           timeout=grace + 10, every=0.05)
    took = time.monotonic() - t0
    assert took >= grace, took  # killed at the end of the grace, not before (a hang fails the wait above)
    assert _app_pids(app_id) == []
    status = _ended(tx, handle, state)
    assert status["state"] == "SUCCEEDED", status
    assert status["attempts"][0]["reason"] == (
        f"preempted: SIGTERM to its supervisor (pid {sup}), not sent by tx; "
        "no checkpoint saved before the kill; resumed from step 5"), status
    assert "resumed at 5" in tx("log", handle).stdout


JOB_THAT_WAITS = """
import time
from tx.distributed import exit_preempted, preempted
preempted()
print("armed", flush=True)
while not preempted():
    time.sleep(0.02)
exit_preempted()
"""


def test_a_preempted_replica_without_infra_retries_fails_as_infra(tx, tmp_path, tx_env):
    script = tmp_path / "job.py"
    script.write_text(JOB_THAT_WAITS)
    p = tx("run", "--detach", "-s", "local_cwd", "-cfg", "infra_retries=0", "utils.python", "--script", str(script))
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    out = Path(tx_env["TMPDIR"]) / f"tx-{os.getuid()}" / "tx" / app_id / "python" / "0" / "stdout.log"
    _until(lambda: out.exists() and "armed" in out.read_text())
    (pid,) = _app_pids(app_id, "TX_REPLICA_ID=0")
    os.kill(pid, signal.SIGTERM)
    state = Path(tx_env["TX_STATE_DIR"]) / "local" / "apps" / app_id / "state.json"
    _until(lambda: json.loads(state.read_text() or "{}").get("state") in TERMINAL)
    status = _status(tx, handle)
    assert status["state"] == "FAILED" and status["num_restarts"] == 0, status
    (only,) = status["attempts"]
    assert only["kind"] == "infra" and only["reason"] == (
        "preempted: SIGTERM to replica python/0, not sent by tx; no checkpoint saved before the kill; "
        "starts fresh; infra_retries=0: not restarted"), only
    assert status["roles"][0]["replicas"][0]["exit_code"] == -signal.SIGTERM  # exit_preempted: killed by it


JOB_ONCE = """
import os, time
from tx.distributed import exit_preempted, preempted
if os.path.exists("second"):
    print("second attempt", flush=True)
    raise SystemExit(0)
open("second", "w").close()
preempted()
print("armed", flush=True)
while not preempted():
    time.sleep(0.02)
exit_preempted()
"""


def test_a_waiting_tx_run_starts_the_app_again_after_a_warning_to_its_supervisor(tmp_path, tx_env):
    script = tmp_path / "job.py"
    script.write_text(JOB_ONCE)
    proc = subprocess.Popen([shutil.which("tx", path=tx_env["PATH"]), "run", "-s", "local_cwd", "utils.python",
                             "--script", str(script)], cwd=tmp_path, env=tx_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        handle = proc.stdout.readline().strip()
        assert proc.stdout.readline() == "python/0 armed\n"
        state = Path(tx_env["TX_STATE_DIR"]) / "local" / "apps" / handle.rsplit("/", 1)[1] / "state.json"
        sup = json.loads(state.read_text())["pid"]
        os.kill(sup, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out == "python/0 second attempt\n", out
    assert (f"preempted: SIGTERM to its supervisor (pid {sup}), not sent by tx; no checkpoint saved before the "
            "kill; starts fresh; restarting it (infra retry 1/3)") in err, err


def test_a_checkpoint_without_its_marker_is_never_read(tmp_path):
    from tx.distributed import CHECKPOINT_COMPLETE, latest_checkpoint, save_checkpoint

    root = str(tmp_path / "ck")
    save_checkpoint({"x": 1}, step=1, root=root)
    save_checkpoint({"x": 2}, step=2, root=root)
    marker = json.loads((tmp_path / "ck" / "step-000000002" / CHECKPOINT_COMPLETE).read_text())
    # "completed" is to the millisecond (cut): at most a float's rounding above the clock now
    assert marker["step"] == 2 and marker["seconds"] >= 0 and marker["completed"] <= time.time() + 1e-6, marker
    (tmp_path / "ck" / "step-000000003").mkdir()  # a save cut short: its data, no marker
    (tmp_path / "ck" / "step-000000003" / "__0_0.distcp").write_bytes(b"torn")
    assert latest_checkpoint(root) == (2, root + "/step-000000002")

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("the save fails half way")

    # saving a complete step again withdraws its marker first: a failed rewrite leaves the
    # previous complete checkpoint as the newest, never the half-rewritten one
    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException

    with pytest.raises(CheckpointException, match="the save fails half way"):
        save_checkpoint({"x": Unpicklable()}, step=2, root=root)
    assert latest_checkpoint(root) == (1, root + "/step-000000001")


STARTUP_JOB = '''\
import os, pathlib, time
import torch.distributed as dist

dist.init_process_group("gloo")
marks = pathlib.Path(os.environ["MARKS"])
if not (marks / "warned").exists() and dist.get_rank() == 1:
    (marks / f"rank1-{os.getpid()}").write_text("up")  # never arms preempted(): start-up
    time.sleep(120)
dist.barrier()
print(f"rank {dist.get_rank()}: done", flush=True)
'''


def test_a_warning_to_a_rank_before_its_job_armed_preempted_is_a_preemption(tx, tx_env, tmp_path):
    """A SIGTERM to one worker during start-up (before its job called ``preempted()``) kills
    it outright; torchrun, the replica, stops the other worker and exits 1. That is a
    preemption (torchrun's report names the worker killed by the warning signal), not the
    job's failure: the app starts again within ``infra_retries`` and SUCCEEDS with
    ``max_retries=0`` (found by bench/chaos_preemption.py: 13 of 13 start-up hits FAILED)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "start.py").write_text(STARTUP_JOB)
    handle, app_id, ckpt, state = _launch(tx, tx_env, 20, "--env", f"MARKS={marks}", "--script",
                                          str(tmp_path / "start.py"))
    (up,) = _until(lambda: list(marks.glob("rank1-*")))
    (marks / "warned").write_text("")
    os.kill(int(up.name.split("-")[1]), signal.SIGTERM)  # from outside, to rank 1's worker alone
    status = _ended(tx, handle, state)
    assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 1, status
    first = status["attempts"][0]
    assert first["kind"] == "infra" and first["retried"], first
    assert re.match(r"preempted: SIGTERM to replica \S+/0 \(its rank 1\), not sent by tx", first["reason"]), first
    assert "rank 1: done" in tx("log", handle).stdout
