"""Save on preemption on the private Ray head (docs/recovery.md, "Preemption"): Ray stopping
a replica's actor (``ray stop`` sends SIGTERM to every ``ray::`` worker process of its
node, which a running actor does not act on, then SIGKILL after its ``--grace-period``;
``ray.kill`` and a node removed end the process without one) leaves the replica's own process group to tx's watchdog, which warns
it (SIGTERM) and SIGKILLs it ``preempt_grace`` seconds later. The job saves on
``tx.distributed.preempted()`` and leaves; the driver records an infra attempt once the
save completed, naming the step, and the next attempt resumes there."""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from tx.specs import AppState, FailureKind

JOB = """
import os, sys, time
from tx.distributed import exit_preempted, latest_checkpoint, preempted, save_checkpoint
found = latest_checkpoint()
if found:
    print(f"resumed at {found[0]}", flush=True)
    sys.exit(0)
preempted()
print(f"armed grace={os.environ['TX_PREEMPT_GRACE']}", flush=True)
step = 0
while not preempted():
    step += 1
    time.sleep(0.05)
save_checkpoint({"step": step}, step=step)
print(f"saved {step}", flush=True)
exit_preempted()
"""


def _actor(desc: Any, name: str) -> Any:
    return (desc.metadata.get("replicas") or {}).get(name) or {} if desc is not None else {}


def test_a_replica_whose_actor_ray_stops_is_warned_saves_and_resumes(apps: Any, tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    ckpt = tmp_path / "ckpt"
    role = apps.role("w", f"exec {apps.py} {script}", env={"TX_CHECKPOINT_DIR": str(ckpt)})
    app_id = apps.submit([role], name="preempt", cfg={"preempt_grace": 20})
    desc = apps.wait_for(app_id, lambda d: "armed" in apps.text(app_id, "w")
                         and apps.replica(d, "w", 0).state == AppState.RUNNING)
    pid = _actor(desc, "w/0").get("actor_pid")
    assert pid, desc
    # what `ray stop` does to the node's ray:: worker processes: SIGTERM (an actor inside a
    # method is not ended by it: its main thread is in Ray's task loop, where Python's
    # handler does not run), then SIGKILL after its grace period (here 2 s, not 16)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.1)
    assert "saved" not in apps.text(app_id, "w")  # no warning reached the job yet
    os.kill(pid, signal.SIGKILL)
    final = apps.wait(app_id)
    text = apps.text(app_id, "w")
    saved = re.search(r"^saved (\d+)$", text, re.M)
    assert saved and "armed grace=20\n" in text, text
    assert f"resumed at {saved.group(1)}\n" in text, text
    assert final.state == AppState.SUCCEEDED and final.num_restarts == 1, final
    first = final.attempts[0]
    assert (first.kind, first.retried) == (FailureKind.INFRA, True), final.attempts
    assert re.fullmatch(rf"w/0: WORKER_DIED: .*; saved step {saved.group(1)} in [\d.]+ s", first.reason), first
