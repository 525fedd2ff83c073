"""A preemptable job for tests of preemption on any backend (docs/recovery.md, "Preemption"),
and the poll such tests wait with.

:data:`TRAIN` is a small training loop that a test runs as ``python -c TRAIN [MARKER]`` (or
from the file :func:`train_script` writes) in a replica whose ``TX_CHECKPOINT_DIR`` is set:

* where a complete checkpoint exists (an earlier attempt saved one) it loads it
  (:func:`tx.distributed.load_latest_checkpoint`), prints ``resumed at N grace G`` (N: the
  step, G: :func:`tx.distributed.preempt_grace`) and exits 0;
* otherwise it arms :func:`tx.distributed.preempted`, prints ``started grace G``, creates
  the file ``MARKER`` where one is given (the test's sign that the warning will be heard),
  then counts steps of 0.05 s; once warned it saves the step it reached with
  :func:`tx.distributed.save_checkpoint` (a one-element tensor: torch is needed), prints
  ``saved N`` and leaves with :func:`tx.distributed.exit_preempted`.

Standard library only (the job itself imports torch)::

    from tx.testing.preemption import TRAIN, until

    app_id = sched.submit(AppDef("spot", roles=[Role("w", image=..., entrypoint="python",
                                                     args=["-c", TRAIN, str(marker)], env=...)]), cfg)
    until(marker.exists)          # armed: warn it now
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, List, TypeVar

__all__ = ["TRAIN", "app_pids", "train_script", "until"]

T = TypeVar("T")

#: the job's source (see the module's doc)
TRAIN = """
import os, sys, time
import torch
from tx.distributed import exit_preempted, load_latest_checkpoint, preempt_grace, preempted, save_checkpoint
found = load_latest_checkpoint({"w": torch.zeros(1)}, announce=False)
if found is not None:
    print(f"resumed at {found} grace {preempt_grace()}", flush=True)
    sys.exit(0)
preempted()
print(f"started grace {preempt_grace()}", flush=True)
if len(sys.argv) > 1:
    open(sys.argv[1], "w").close()
step = 0
while True:
    time.sleep(0.05)
    step += 1
    if preempted():
        save_checkpoint({"w": torch.tensor([float(step)])}, step=step)
        print(f"saved {step}", flush=True)
        exit_preempted()
"""


def train_script(directory: "os.PathLike[str] | str") -> Path:
    """Write :data:`TRAIN` to ``directory/preemptable.py`` and return that path (for
    components that take a script file: ``utils.python --script``, ``dist.ddp --script``)."""
    path = Path(directory) / "preemptable.py"
    path.write_text(TRAIN)
    return path


def until(what: Callable[[], T], timeout: float = 120.0, every: float = 0.1) -> T:
    """Call ``what`` every ``every`` seconds until it returns a true value, and return it: a
    test waits for an event (a file, a line, a process ending) rather than sleeping.

    Raises:
        AssertionError: ``timeout`` seconds passed first (naming ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def _environ(pid: int) -> List[str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def app_pids(app_id: str, *needles: str) -> List[int]:
    """The live processes of this host (Linux ``/proc``) that belong to app ``app_id`` (their
    environment has ``TX_APP_ID=app_id``) and whose environment has every ``needles`` entry
    (``"RANK=1"``, ``"TX_REPLICA_ID=0"``): the replicas of a local app, to warn from outside."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            env = _environ(int(name))
            if env and f"TX_APP_ID={app_id}" in env and all(n in env for n in needles):
                out.append(int(name))
    return out
