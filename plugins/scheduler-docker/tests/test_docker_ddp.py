"""The DDP example as a sweep on local_docker: every trial a two-process gloo DDP job
(``dist.ddp -j 1x2``) in a container. Python and torch==2.13.0 come from this test
environment, bind-mounted read-only into the busybox image (``host_python_mounts``).

A two-replica DDP job in two containers and a DDP job whose rank 1 raises run in the
portability matrix (tests/test_portability.py, local_docker's row and its ``CHECKS``)."""
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
