"""A real 2-node DDP run (``dist.ddp -j 2x1``, torchrun + gloo) on the local Batch server:
two tasks rendezvous through TX_RANK0_HOST, which the runnable takes from Batch's main
node. Needs torch (``pip install torch==2.13.0``)."""
import os
import sys
from pathlib import Path

import pytest

from tx.runner import get_runner
from tx.specs import AppState
from tx.testing.backends import free_port, require_module

pytestmark = pytest.mark.slow

DDP = '''
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item():g} "
      f"rank0 {os.environ['TX_RANK0_HOST']} replica {os.environ['TX_REPLICA_ID']}", flush=True)
dist.destroy_process_group()
'''


def test_two_node_ddp(fake_gcp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_module("torch", "the DDP job runs torchrun: pip install torch==2.13.0")
    script = tmp_path / "ddp_sum.py"
    script.write_text(DDP)
    # the tasks run on this host: torchrun of this interpreter's environment
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    with get_runner() as runner:
        handle = runner.run_component(
            "dist.ddp", ["-j", "2x1", "--rdzv_port", str(free_port()), "--script", str(script)], "gcp_batch",
        )
        status = runner.wait(handle, wait_interval=0.5, timeout=240)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        outs = ["".join(runner.log_lines(handle, "ddp_sum", k, streams="stdout")) for k in (0, 1)]  # type: ignore[arg-type]
    import re

    ranks = set()
    for k, out in enumerate(outs):
        m = re.search(r"rank (\d) of 2 sum 3 rank0 127\.0\.0\.1 replica (\d)", out)
        assert m and m.group(2) == str(k), out  # c10d picks the node ranks; the replica ids are ours
        ranks.add(m.group(1))
    assert ranks == {"0", "1"}, outs


#: a DDP script whose rank 1 raises after init_process_group
FAILING_RANK = """\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise RuntimeError("CUDA out of memory (simulated)")
dist.barrier()
"""


def test_failed_rank_is_named(fake_gcp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dist.ddp -j 1x2 in one task whose rank 1 raises: structured_error_msg names the rank,
    its exception and where it was raised, read from the task's stderr in Cloud Logging
    (tx.schedulers.why), the one line every scheduler gives."""
    require_module("torch", "the DDP job runs torchrun: pip install torch==2.13.0")
    script = tmp_path / "train.py"
    script.write_text(FAILING_RANK)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    with get_runner() as runner:
        handle = runner.run_component("dist.ddp", ["-j", "1x2", "--script", str(script)], "gcp_batch")
        status = runner.wait(handle, wait_interval=0.5, timeout=240)
    assert status is not None and status.state == AppState.FAILED, status
    why = "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:5 (exit code 1)"
    assert status.structured_error_msg == why, status.format()
    assert status.root_cause is not None and (status.root_cause.rank, status.root_cause.exception_type) == (
        1, "RuntimeError")
    assert status.roles[0].replicas[0].structured_error_msg == why
