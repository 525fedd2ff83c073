"""The main job resumes: examples/train.py under ``tx run`` saves a checkpoint per epoch
in ``TX_CHECKPOINT_DIR`` (tx.distributed, on torch.distributed.checkpoint); cancelled
mid-run and run again, the same app starts after the newest complete checkpoint."""
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

EPOCH = re.compile(r"epoch (\d+)/4 train_loss=")


def test_cancelled_run_resumes_from_its_last_checkpoint(tx, tx_env, tmp_path):
    args = ("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--script", str(TRAIN), "--",
            "--epochs", "4", "--epoch-sleep", "1", "--output-dir", str(tmp_path / "out"))
    first = tx(*args[:1], "--detach", *args[1:], timeout=300)
    assert first.returncode == 0, first.stderr
    handle = first.stdout.strip()
    ckpt = Path(tx_env["TX_STATE_DIR"]) / "checkpoints" / "tx" / "train"  # the run's, not the attempt's
    deadline = time.monotonic() + 240
    while not list(ckpt.glob("step-*/.tx-complete")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert tx("cancel", handle).returncode == 0
    log = tx("log", handle).stdout
    done = [int(n) for n in EPOCH.findall(log)]
    assert done and done[-1] < 4 and "rank 0: done" not in log, log  # cut short
    saved = max(int(p.parent.name.split("-")[1]) for p in ckpt.glob("step-*/.tx-complete"))
    second = tx(*args, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    said = second.stdout + second.stderr  # the replicas' stdout on stdout, their stderr on stderr
    assert f"resumed from checkpoint step {saved}: epoch {saved}/4 done" in said, said[-3000:]
    assert [int(n) for n in EPOCH.findall(said)] == list(range(saved + 1, 5))
    assert "world_size=2 test_accuracy=" in said
