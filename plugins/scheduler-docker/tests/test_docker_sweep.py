"""A sweep on local_docker: every trial of a 2x3 grid a container app (a cheap Python trial,
``utils.sh --entrypoint python``) at most 2 at once under the supervisor, each with its
parameters. Python comes from this test environment, bind-mounted read-only into the busybox
image (``host_python_mounts``).

The DDP example as a sweep trains for real on local_cwd (tests/test_sweep_e2e.py); a
two-replica DDP job in two containers and a DDP job whose rank 1 raises run in the
portability matrix (tests/test_portability.py, local_docker's row and its ``CHECKS``)."""
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, List

from tx.components.utils import sh
from tx.runner import get_runner
from tx.specs import AppState

#: a trial's program: python reads its parameters (``--lr``, ``--batch-size``, as the DDP
#: example would), writes them with its TX_TRIAL_INDEX to ``<--output-dir>/result.json``
#: and prints them. Cheap on purpose: a trial is a container app whatever it runs
TRIAL = ("import json, os, sys; a = dict(zip(sys.argv[1::2], sys.argv[2::2])); "
         "r = dict(trial=int(os.environ['TX_TRIAL_INDEX']), lr=float(a['--lr']), batch=int(a['--batch-size'])); "
         "os.makedirs(a['--output-dir'], exist_ok=True); "
         "json.dump(r, open(os.path.join(a['--output-dir'], 'result.json'), 'w')); "
         "print('trained', json.dumps(r, sort_keys=True))")


def test_a_2x3_grid_sweep(podman_engine: Any, image: str, host_python_mounts: List[str],
                          tmp_path: Path, monkeypatch: Any) -> None:
    """A 2x3 grid on local_docker: each trial a container app, at most 2 at once under the
    supervisor, each with its parameters; every trial writes its result (a bind mount) and
    its log line."""
    from tx.specs.sweep import SweepSpec

    monkeypatch.setenv("TX_STATE_DIR", str(tmp_path / "state"))
    out = tmp_path / "out"
    out.mkdir()
    bindir = os.path.dirname(sys.executable)
    # python -S: the trial needs only the standard library, and the environment's .pth files
    # (editable installs) name paths that are not mounted in the container
    app = sh("-S", "-c", TRIAL, "--lr", "${lr}", "--batch-size", "${batch}", "--output-dir", f"{out}/${{lr}}-${{batch}}",
             entrypoint="python", image=image, memMB=256, cpu=1,
             env={"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"},
             mounts=[*host_python_mounts, f"type=bind,src={out},dst={out}"])
    with get_runner("txsweep") as runner:
        handle = runner.run_sweep(app, SweepSpec(grid={"lr": [0.05, 0.1], "batch": [16, 32, 64]}), "local_docker",
                                  cfg={"quiet": True}, max_parallel=2)
        deadline = time.monotonic() + 300
        while True:
            st = runner.sweep_status(handle)
            if all(t.state.name in ("SUCCEEDED", "FAILED", "CANCELLED") for t in st.trials):
                break
            assert time.monotonic() < deadline, st.format()
            time.sleep(0.3)
        assert st.state == AppState.SUCCEEDED, st.format()
        log = "".join(runner.log_lines(st.trials[4].app_handle, "sh", 0))
    assert log.strip() == 'trained {"batch": 32, "lr": 0.1, "trial": 4}', log
    trials = [(lr, b) for lr in (0.05, 0.1) for b in (16, 32, 64)]
    for k, (lr, b) in enumerate(trials):
        assert json.loads((out / f"{lr}-{b}" / "result.json").read_text()) == {"trial": k, "lr": lr, "batch": b}
