"""A two-replica gloo DDP job (``dist.ddp -j 2x1``) in two containers that rendezvous over
the app's network, with the training script put into the image by the ``docker``
workspace. Python and torch==2.13.0 come from this test environment, bind-mounted
read-only into the busybox image (``host_python_mounts``)."""
import os
import sys
import time
from pathlib import Path
from typing import Any, List

import pytest

from tx.components.dist import ddp
from tx.runner import get_runner
from tx.specs import AppState
from tx.testing.backends import require_module

require_module("torch", "the DDP job runs this environment's torch: pip install torch==2.13.0")

TRAIN = '''\
import os, socket
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4) * (rank + 1)).pow(2).mean().backward()
    opt.step()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
w0 = model.module.weight.detach().clone()
dist.broadcast(w0, 0)
print(f"rank={rank} world={world} sum={t.item():g} in_sync={torch.allclose(w0, model.module.weight)} "
      f"host={socket.gethostname()} rank0={os.environ['TX_RANK0_HOST']} note={open('note.txt').read().strip()}",
      flush=True)
dist.destroy_process_group()
'''


def test_ddp_two_containers(podman_engine: Any, image: str, host_python_mounts: List[str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text(TRAIN)
    (ws / "note.txt").write_text("from-the-workspace\n")
    bindir = os.path.dirname(sys.executable)
    app = ddp(
        script="train.py", image=image, j="2x1", memMB=2048, cpu=1,
        env={"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"},
        mounts=host_python_mounts, rdzv_conf="join_timeout=120",
    )
    with get_runner("txddp") as runner:
        t0 = time.monotonic()
        handle = runner.run(app, "local_docker", {"quiet": True}, workspace=str(ws))
        status = runner.wait(handle, wait_interval=0.5, timeout=300)
        took = time.monotonic() - t0
        role = app.roles[0].name
        lines = [ln for k in (0, 1) for ln in runner.log_lines(handle, role, k) if "rank=" in ln]
        assert status is not None and status.state == AppState.SUCCEEDED, (status, lines)
    ranks = sorted(ln.split("rank=")[1].split()[0] for ln in lines)
    assert ranks == ["0", "1"], lines
    hosts = {ln.split("host=")[1].split()[0] for ln in lines}
    assert len(hosts) == 2, f"both ranks ran in one container: {lines}"
    for ln in lines:
        assert "world=2 sum=3 in_sync=True" in ln and "note=from-the-workspace" in ln, ln
        rank0 = ln.split("rank0=")[1].split()[0]
        assert rank0.endswith("-0") and rank0 in hosts, ln
    print(f"\n2x1 DDP in containers: {took:.1f} s")


FAIL = '''\
import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise RuntimeError("CUDA out of memory (simulated)")
dist.barrier()
'''


def test_failed_rank_is_named(podman_engine: Any, image: str, host_python_mounts: List[str], tmp_path: Path) -> None:
    """Rank 1 of a 1x2 job raises: the status names the rank, the exception and where it
    was raised, read from the container's output (tx.schedulers.why), not torchrun's banner."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text(FAIL)
    bindir = os.path.dirname(sys.executable)
    app = ddp(
        script="train.py", image=image, j="1x2", memMB=2048, cpu=1,
        env={"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"}, mounts=host_python_mounts,
    )
    with get_runner("txddp") as runner:
        handle = runner.run(app, "local_docker", {"quiet": True}, workspace=str(ws))
        status = runner.wait(handle, wait_interval=0.5, timeout=300)
    assert status is not None and status.state == AppState.FAILED, status
    why = "train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:5 (exit code 1)"
    assert status.structured_error_msg == why, status
    assert status.root_cause is not None and (status.root_cause.rank, status.root_cause.exception_type) == (
        1, "RuntimeError")
    assert status.roles[0].replicas[0].structured_error_msg == why


@pytest.mark.slow
def test_ddp_example_as_a_2x3_grid_sweep(podman_engine: Any, image: str, host_python_mounts: List[str],
                                          tmp_path: Path, monkeypatch: Any) -> None:
    """The DDP example (examples/train.py, ``dist.ddp -j 1x2``) as a 2x3 grid on
    local_docker: each trial a container app, at most 2 at once under the supervisor, each
    with its parameters; every trial trains and writes its checkpoint (a bind mount)."""
    require_module("sklearn", "the example reads its data set with scikit-learn: pip install scikit-learn")
    from tx.specs.sweep import SweepSpec

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    examples = Path(__file__).resolve().parents[3] / "examples"
    out = tmp_path / "out"
    out.mkdir()
    bindir = os.path.dirname(sys.executable)
    app = ddp("--epochs", "1", "--checkpoint-dir", "", "--lr", "${lr}", "--batch-size", "${batch}",
              "--output-dir", f"{out}/${{lr}}-${{batch}}",
              script=str(examples / "train.py"), image=image, j="1x2", memMB=2048, cpu=1,
              env={"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"},
              mounts=[*host_python_mounts, f"type=bind,src={examples},dst={examples},readonly",
                      f"type=bind,src={out},dst={out}"])
    with get_runner("txddp") as runner:
        handle = runner.run_sweep(app, SweepSpec(grid={"lr": [0.05, 0.1], "batch": [16, 32, 64]}), "local_docker",
                                  cfg={"quiet": True}, max_parallel=2)
        deadline = time.monotonic() + 540
        while True:
            st = runner.sweep_status(handle)
            if all(t.state.name in ("SUCCEEDED", "FAILED", "CANCELLED") for t in st.trials):
                break
            assert time.monotonic() < deadline, st.format()
            time.sleep(1)
    assert st.state == AppState.SUCCEEDED, st.format()
    for lr in ("0.05", "0.1"):
        for b in ("16", "32", "64"):
            assert (out / f"{lr}-{b}" / "checkpoint.pt").exists(), sorted(os.listdir(out))
