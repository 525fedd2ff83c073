"""A DDP run whose rank 1 raises, through `tx run -s local_cwd dist.ddp`: the last line of
`tx run` and `tx status` name the rank, its exception and where it was raised, not
torchrun's banner; `tx status --json` has the fields one by one (tx.schedulers.why)."""
from __future__ import annotations

import json
import os
import re
import shutil

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


#: a torchrun script whose rank 0 raises on line BAD_LINE, after the process group is up
BAD_LR = '''\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 0:
    raise ValueError("bad learning rate")
dist.barrier()
'''
BAD_LINE = BAD_LR.splitlines().index('    raise ValueError("bad learning rate")') + 1


def test_the_root_cause_is_recorded_when_the_app_ends_not_read_from_logs_that_may_be_gone(tx, tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(BAD_LR)
    # one restart: the first attempt's reason is recorded when it restarts, the last's at the end
    p = tx("run", "-s", "local_cwd", "dist.ddp", "-j", "1x2", "--max_retries", "1", "--script", str(script),
           timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    handle = p.stdout.splitlines()[0]
    why = f"fail/0 rank 0: ValueError: bad learning rate at fail.py:{BAD_LINE} (exit code 1)"
    before = tx("status", handle).stdout
    logs = re.search(r"UI URL: file://(\S+)", before).group(1)
    assert os.path.isdir(logs), before
    shutil.rmtree(logs)  # the local logs cleaned away (the log archive may still hold them)

    status = tx("status", handle).stdout
    assert f"  Structured Error Msg: {why}\n" in status, status
    assert f"  *fail[0]:FAILED (exit code 1) on localhost\n      {why}\n" in status, status
    js = json.loads(tx("status", "--json", handle).stdout)
    assert js["structured_error_msg"] == why and js["root_cause"]["text"] == why, js
    # every attempt names the root cause, not torchrun's ruler line
    assert [(a["kind"], a["reason"]) for a in js["attempts"]] == [("user", why), ("user", why)], js["attempts"]
