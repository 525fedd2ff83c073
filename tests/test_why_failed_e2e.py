"""A DDP run whose rank 1 raises, through `tx run -s local_cwd dist.ddp`: the last line of
`tx run` and `tx status` name the rank, its exception and where it was raised, not
torchrun's banner; `tx status --json` has the fields one by one (tx.schedulers.why)."""
from __future__ import annotations

import json
import re

import pytest

from tx.testing.backends import require_module

pytestmark = pytest.mark.slow
require_module("torch", "the DDP app runs torchrun: pip install torch==2.13.0")

#: examples/train.py's shape (gloo DDP over the launcher's RANK/WORLD_SIZE), cut to one step,
#: where rank 1 runs out of memory (simulated) in its training step
SCRIPT = '''\
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def step(model, rank):
    loss = model(torch.randn(8, 4)).sum()
    loss.backward()
    if rank == 1:
        raise RuntimeError("CUDA out of memory (simulated)")


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    step(model, rank)
    dist.barrier()
    print(f"rank {rank}: done", flush=True)


if __name__ == "__main__":
    main()
'''
RAISE_LINE = SCRIPT.splitlines().index('        raise RuntimeError("CUDA out of memory (simulated)")') + 1


def test_tx_run_and_status_name_the_failed_rank(tx, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    p = tx("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--script", str(script), timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    why = f"train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:{RAISE_LINE} (exit code 1)"
    last = p.stderr.splitlines()[-1]
    assert re.fullmatch(rf"tx run: FAILED after [\d.]+ s: {re.escape(handle)} \({re.escape(why)}\); logs: \S+",
                        last), p.stderr[-3000:]

    status = tx("status", handle).stdout
    assert f"  Structured Error Msg: {why}\n" in status, status
    assert f"  *train[0]:FAILED (exit code 1) on localhost\n      {why}\n" in status, status

    js = json.loads(tx("status", "--json", handle).stdout)
    assert js["structured_error_msg"] == why
    cause = js["root_cause"]
    assert {k: cause[k] for k in ("role", "replica", "rank", "local_rank", "exception_type", "message", "line",
                                  "exit_code", "signal")} == {
        "role": "train", "replica": 0, "rank": 1, "local_rank": 1, "exception_type": "RuntimeError",
        "message": "CUDA out of memory (simulated)", "line": RAISE_LINE, "exit_code": 1, "signal": ""}
    assert cause["file"] == str(script) and cause["text"] == why
    assert js["roles"][0]["replicas"][0]["root_cause"] == cause
