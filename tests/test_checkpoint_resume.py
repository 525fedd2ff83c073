"""Checkpoints belong to a run: examples/train.py under ``tx run`` saves a checkpoint per
epoch in ``TX_CHECKPOINT_DIR`` (tx.distributed, on torch.distributed.checkpoint). A new run
gets a fresh location and starts fresh, whatever ran before under the same name; ``tx run
--resume HANDLE`` continues that earlier run's checkpoints and its first line says so; a
role that sets ``TX_CHECKPOINT_DIR`` itself keeps it."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tx.testing.backends import require_module

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "examples" / "train.py"

pytestmark = pytest.mark.slow
require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
require_module("sklearn", "the main job reads its data set with scikit-learn: pip install scikit-learn")

EPOCH = re.compile(r"epoch (\d+)/\d+ train_loss=")
FRESH = re.compile(r"\[0\]:no checkpoint at (\S+): starting fresh\n")
STEPS_PER_EPOCH = 22  # optimizer steps: 674 samples per rank on two ranks, batches of 32
RESUMED = re.compile(r"\[0\]:resumed from checkpoint step (\d+) at (\S+) \((.+)\)\n")


def _train(tx, out: Path, *extra: str, epochs: int = 2, before: tuple = ()):
    """``tx run -s local_cwd [before] dist.ddp -j 1x2 --script train.py -- --epochs N``;
    returns (handle, what the replicas and tx run said)."""
    p = tx("run", "-s", "local_cwd", *before, "dist.ddp", "-j", "1x2", *extra, "--script", str(TRAIN), "--",
           "--epochs", str(epochs), "--output-dir", str(out), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.splitlines()[0], p.stdout + p.stderr


def _first_line(said: str) -> str:
    """The job's first line (rank 0's, after torchrun's banner on stderr)."""
    return next(ln for ln in said.splitlines() if ln.startswith("train/0 [0]:"))


def test_a_new_run_starts_fresh_and_resume_continues_an_earlier_one(tx, tmp_path):
    first, said = _train(tx, tmp_path / "out")
    fresh = FRESH.search(_first_line(said) + "\n")
    assert fresh, said[-3000:]
    location = fresh.group(1)
    assert [int(n) for n in EPOCH.findall(said)] == [1, 2]
    assert list(Path(location).glob("step-*/.tx-complete")), location

    # the quickstart again, with new settings: a new run, not the old one's checkpoints
    second, said = _train(tx, tmp_path / "out", epochs=3)
    again = FRESH.search(_first_line(said) + "\n")
    assert again and again.group(1) != location, said[-3000:]
    assert "resumed from checkpoint" not in said
    assert [int(n) for n in EPOCH.findall(said)] == [1, 2, 3]

    # continuing the first run is explicit, and the job says where from and why
    third, said = _train(tx, tmp_path / "out", epochs=3, before=("--resume", first))
    resumed = RESUMED.search(_first_line(said) + "\n")
    assert resumed and resumed.groups() == (str(2 * STEPS_PER_EPOCH), location, f"tx run --resume {first}"), \
        said[-3000:]
    assert [int(n) for n in EPOCH.findall(said)] == [3]
    assert "world_size=2 test_accuracy=" in said
    # --dryrun shows the location it decided
    dry = tx("run", "--dryrun", "-s", "local_cwd", "--resume", third, "dist.ddp", "-j", "1x2",
             "--script", str(TRAIN))
    assert dry.returncode == 0 and f"TX_CHECKPOINT_DIR: {location}\n" in dry.stdout, dry.stdout[-3000:]
    bad = tx("run", "-s", "local_cwd", "--resume", "local_cwd://tx/nope", "dist.ddp", "--script", str(TRAIN))
    assert bad.returncode == 1 and bad.stderr == (
        "tx run: error: cannot resume local_cwd://tx/nope: no such app or run (tx list shows them)\n"), bad.stderr


def test_a_roles_own_checkpoint_dir_is_kept(tx, tmp_path):
    own = tmp_path / "mine"
    env = ("--env", f"TX_CHECKPOINT_DIR={own}")
    _, said = _train(tx, tmp_path / "out", *env)
    assert _first_line(said) == f"train/0 [0]:no checkpoint at {own}: starting fresh", said[-3000:]
    _, said = _train(tx, tmp_path / "out", *env, epochs=3)
    assert _first_line(said) == (f"train/0 [0]:resumed from checkpoint step {2 * STEPS_PER_EPOCH} at {own} "
                                 "(an earlier attempt of this run)"), said[-3000:]
    assert [int(n) for n in EPOCH.findall(said)] == [3]


def test_cancelled_run_resumes_from_its_last_checkpoint_with_resume(tx, tx_env, tmp_path):
    args = ("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--script", str(TRAIN), "--",
            "--epochs", "4", "--epoch-sleep", "1", "--output-dir", str(tmp_path / "out"))
    first = tx(*args[:1], "--detach", *args[1:], timeout=300)
    assert first.returncode == 0, first.stderr
    handle = first.stdout.strip()
    desc = tx("describe", handle).stdout
    ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", desc).group(1))  # the run's, as its AppDef recorded it
    deadline = time.monotonic() + 240
    while not list(ckpt.glob("step-*/.tx-complete")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert tx("cancel", handle).returncode == 0
    log = tx("log", handle).stdout
    done = [int(n) for n in EPOCH.findall(log)]
    assert done and done[-1] < 4 and "rank 0: done" not in log, log  # cut short
    saved = max(int(p.parent.name.split("-")[1]) for p in ckpt.glob("step-*/.tx-complete"))
    second = tx(*args[:1], "--resume", handle, *args[1:], timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    said = second.stdout + second.stderr  # the replicas' stdout on stdout, their stderr on stderr
    assert f"resumed from checkpoint step {saved} at {ckpt} (tx run --resume {handle})" in said, said[-3000:]
    # the cancel's SIGTERM is also a warning to the job's preempted(): it may have saved mid-epoch
    assert [int(n) for n in EPOCH.findall(said)] == list(range(saved // STEPS_PER_EPOCH + 1, 5))
    assert "world_size=2 test_accuracy=" in said
