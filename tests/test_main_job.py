"""The main job: examples/train.py, a real two-process gloo DDP run, through `tx run` on
local_cwd (what the README's first command does) and under plain torchrun."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tx.testing.backends import require_module

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "examples" / "train.py"
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow
torch = require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
require_module("sklearn", "the main job reads its data set with scikit-learn: pip install scikit-learn")

RESULT = re.compile(r"world_size=(\d+) test_accuracy=([0-9.]+) test_samples=(\d+) checkpoint=(\S+)")


def _check_checkpoint(path: Path, world: int) -> float:
    ckpt = torch.load(path, weights_only=True)
    assert ckpt["world_size"] == world
    assert set(ckpt["model"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    return ckpt["accuracy"]


def test_tx_run_ddp_1x2(tx, tmp_path):
    out = tmp_path / "out"
    p = tx("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--script", str(TRAIN), "--",
           "--epochs", "5", "--output-dir", str(out), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("local_cwd://tx/train-")
    # both ranks' output is relayed, prefixed with the replica (torchrun adds [rank]:)
    # (each on tx's stream of the same name: print() reaches tx's stdout)
    both = p.stdout + p.stderr
    assert re.search(r"^train/0 \[0\]:rank 0: done", p.stdout, re.M), both[-3000:]
    assert re.search(r"^train/0 \[1\]:rank 1: done", p.stdout, re.M), both[-3000:]
    m = RESULT.search(p.stdout)
    assert m and m.group(1) == "2" and m.group(3) == "450"
    assert float(m.group(2)) > 0.8
    assert _check_checkpoint(out / "checkpoint.pt", 2) == pytest.approx(float(m.group(2)), abs=1e-4)
    # the finished app is known to other processes, with its logs
    handle = p.stdout.splitlines()[0]
    assert "State: SUCCEEDED" in tx("status", handle).stdout
    assert "world_size=2" in tx("log", handle).stdout


def test_train_runs_unchanged_under_plain_torchrun(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run(
        [str(BIN / "torchrun"), "--nproc_per_node", "2", str(TRAIN), "--epochs", "3", "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    m = RESULT.search(p.stdout)
    assert m and m.group(1) == "2"
    assert (out / "checkpoint.pt").exists()


def test_the_example_reads_the_digits_load_digits_gives(monkeypatch):
    """train.py reads scikit-learn's bundled digits file itself (importing scikit-learn costs
    each rank about 2 s of CPU): the same images and labels as ``load_digits``, and the same
    again through its fallback, ``load_digits`` itself, where the file is not found."""
    import importlib.util

    from sklearn.datasets import load_digits

    spec = importlib.util.spec_from_file_location("tx_example_train", TRAIN)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    ref = load_digits()
    want = (torch.tensor(ref.data, dtype=torch.float32) / 16.0, torch.tensor(ref.target))
    x, y = train.digits()
    assert x.shape == (1797, 64) and torch.equal(x, want[0]) and torch.equal(y, want[1])
    monkeypatch.setattr(train.os.path, "isfile", lambda p: False)
    x2, y2 = train.digits()
    assert torch.equal(x2, want[0]) and torch.equal(y2, want[1])
    tr, te = train.datasets(0)
    assert (len(tr), len(te)) == (1347, 450)
    assert train.datasets(0)[1].tensors[1].tolist() == te.tensors[1].tolist()  # the seed fixes the split
