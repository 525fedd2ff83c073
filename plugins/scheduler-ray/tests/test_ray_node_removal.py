"""A Ray worker node removed for real while a replica of a tx app runs on it (docs/recovery.md,
"Preemption" and "Infrastructure failures"): a second node joins the session's private head
(:class:`tx_scheduler_ray.testing.RayNode`: its own ``ray start --address=...``, temp dir and
ports), the replica is placed there (a filler app holds the head's CPUs meanwhile), and the
node's Ray is SIGKILLed (its raylet, agents and workers; never ``ray stop``). The replica's
own processes are left to tx's watchdog, which warns the job as its actor's worker is gone:
the job saves; the GCS declares the node dead; the driver records the attempt as the
infrastructure's (``NODE_DIED``, naming the save), and the next attempt runs on the head and
resumes from that checkpoint."""
from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from tx.specs import AppState, FailureKind, Resource
from tx.testing.preemption import until
from tx_scheduler_ray.testing import NUM_CPUS, RayHead, RayNode

JOB = """
import os, sys, time
from tx.distributed import exit_preempted, latest_checkpoint, preempted, save_checkpoint
found = latest_checkpoint()
if found:
    print(f"resumed at {found[0]}", flush=True)
    sys.exit(0)
preempted()
print("armed", flush=True)
step = 0
while not preempted():
    step += 1
    time.sleep(0.05)
save_checkpoint({"step": step}, step=step)
print(f"saved {step}", flush=True)
exit_preempted()
"""


def _rec(desc: Any) -> Any:
    return (desc.metadata.get("replicas") or {}).get("w/0") or {} if desc is not None else {}


def test_a_replica_on_a_removed_node_is_an_infra_attempt_and_resumes_on_the_head(
        apps: Any, ray_head_service: RayHead, tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    ckpt = tmp_path / "ckpt"
    with RayNode(ray_head_service, "node-b", num_cpus=2, resources={"tx_node_b": 1}) as node:
        # the filler takes every CPU of the head (it cannot fit on node b's 2), so the
        # replica's placement group can only be placed on node b
        filler = apps.submit([apps.role("fill", "exec sleep 600", resource=Resource(cpu=NUM_CPUS, gpu=0, memMB=64))],
                             name="filler")
        node.start()
        assert apps.wait_for(filler, lambda d: d is not None and d.state == AppState.RUNNING).state == AppState.RUNNING
        role = apps.role("w", f"exec {apps.py} {script}", env={"TX_CHECKPOINT_DIR": str(ckpt)})
        app_id = apps.submit([role], name="noderm", cfg={"preempt_grace": 20, "infra_retries": 1})
        desc = apps.wait_for(app_id, lambda d: apps.replica(d, "w", 0).state == AppState.RUNNING
                             and "armed" in apps.text(app_id, "w"))
        assert _rec(desc).get("node_id") == node.node_id, (desc, node.node_id)
        apps.sched.cancel(filler)  # the head has room for the next attempt
        assert apps.wait(filler).state == AppState.CANCELLED
        node.remove()
        # what it wrote on node b, where tx log no longer reaches (the log API asks the node)
        [first] = node.logs().glob("tx/*/w-0.combined")
        saved = until(lambda: re.search(r"^saved (\d+)$", first.read_text(), re.M), timeout=30)
        final = apps.wait(app_id, timeout=120)
    step = saved.group(1)
    assert final.state == AppState.SUCCEEDED and final.num_restarts == 1, (final, final.attempts)
    lost, last = final.attempts  # one node lost: one attempt, the infrastructure's
    assert (last.index, last.state) == (1, AppState.SUCCEEDED), final.attempts
    assert (lost.kind, lost.retried) == (FailureKind.INFRA, True), final.attempts
    assert re.fullmatch(rf"w/0: NODE_DIED: the replica actor's node died; saved step {step} in [\d.]+ s",
                        lost.reason), lost
    assert final.metadata["infra_retries"] == {"infra_retries": 1, "infra_used": 1}
    rec = _rec(final)
    assert rec.get("node_id") not in ("", node.node_id) and rec.get("attempt") == 1, rec  # on the head
    assert apps.text(app_id, "w") == f"resumed at {step}\n"  # the log of the node it runs on now
    assert [p.name for p in ckpt.iterdir()] == [f"step-{int(step):09d}"]  # the one save, made after the loss


def test_an_unreachable_actor_waits_for_rays_verdict() -> None:
    """Ray says an actor whose node's raylet is gone is *unavailable* at once, and dead
    ("its node has died") only once the GCS declared the node dead: the driver waits for
    that verdict (asking the actor) rather than record the first error; an actor that
    answers again is alive (None: its wait is called again); other errors are final."""
    from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError

    from tx_scheduler_ray.tx_ray_driver._loss import infra_reason, verdict

    class Ray:
        def __init__(self, *answers: Any) -> None:
            self.answers = list(answers)

        def get(self, ref: Any, timeout: float) -> Any:
            got = self.answers.pop(0)
            if isinstance(got, BaseException):
                raise got
            return got

    class Actor:
        class info:  # noqa: N801 - stands for the actor method
            @staticmethod
            def remote() -> None:
                return None

    unavailable = ActorUnavailableError("The actor is temporarily unavailable: RpcError: Socket closed", None)
    died = ActorDiedError()
    died.error_msg = "The actor died because its node has died. Node Id: 1a2b"
    got = verdict(Ray(GetTimeoutError(), unavailable, died), Actor, unavailable, lambda: None)
    assert got is died and infra_reason(died).startswith("NODE_DIED")
    assert verdict(Ray(GetTimeoutError(), {"node_id": "x"}), Actor, unavailable, lambda: None) is None
    other = ValueError("the replica's own")
    assert verdict(Ray(), Actor, other, lambda: None) is other
    assert verdict(Ray(*[GetTimeoutError()] * 3), Actor, unavailable, lambda: None, within=0) is unavailable


def test_a_cancel_that_interrupts_a_ray_call_is_a_cancel() -> None:
    """SIGTERM's Cancelled raised inside ``ray.wait`` comes out as a SystemError: the driver
    still stops the replicas as cancelled and ends CANCELLED, not "tx's Ray driver failed"."""
    from tx_scheduler_ray.tx_ray_driver._app import App

    app = App.__new__(App)
    app.cancelled, app.replicas, stopped = False, [], []

    def place() -> None:
        app.cancelled = True
        raise SystemError("<cyfunction CoreWorker.wait> returned a result with an exception set")

    app.write = app.cleanup = lambda: None  # type: ignore[method-assign]
    app.place_required = place  # type: ignore[method-assign]
    app.stop = lambda group, state, why: stopped.append((state, why))  # type: ignore[method-assign]
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert app.run() == 0
    finally:
        signal.signal(signal.SIGTERM, before)
    assert (app.state, app.msg, stopped) == ("CANCELLED", "cancelled (ray job stop)", [("CANCELLED", "app cancelled")])
