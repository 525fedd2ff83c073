"""A Spot preemption with its notice on GCP Batch, against the local Batch server
(``fake_gcp``, which runs each task as a process of this host and, with ``notice_s``,
preempts a task's Spot VM as Compute Engine does: SIGTERM, SIGKILL after the notice; the
task then ends with Batch's reserved exit code 50001).

Jobs on Spot VMs get ``TX_PREEMPT_GRACE=30`` (``tx run --dryrun`` shows it); a task that saves
with ``tx.distributed.save_checkpoint`` and leaves with ``exit_preempted()`` in the notice is
an ``infra`` attempt (retried by the lifecycle policy within ``infra_retries``, without
spending ``max_retries``) that names the step it saved, and the next execution resumes
there; a task that ignores the warning is killed at the end of the notice and tx says
nothing was saved."""
import os
import subprocess
import sys
from pathlib import Path

from fake_gcp import FakeGcp
from tx.specs import AppDef, AppState, FailureKind, Role
from tx.testing.preemption import TRAIN
from tx_scheduler_gcp_batch.scheduler import GcpBatchScheduler, create_scheduler

from test_gcp_backend import wait_for_line
from test_gcp_errors import cli_env



def role(tmp_path: Path, entrypoint: str, args: list) -> Role:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    return Role("w", image="python", entrypoint=entrypoint, args=args,
                env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "TX_CHECKPOINT_DIR": str(ckpt)})


def test_dryrun_shows_the_grace_on_spot_vms_only(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    for model, want in (("SPOT", True), ("STANDARD", False)):
        out = subprocess.run([sys.executable, "-m", "tx.cli", "run", "-s", "gcp_batch", "--dryrun", "-cfg",
                              f"project=p,provisioning_model={model}", "utils.echo"], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert ('"TX_PREEMPT_GRACE": "30"' in out.stdout) == want, out.stdout


def test_a_spot_preemption_saves_leaves_and_resumes_there(fake_gcp: FakeGcp, tmp_path: Path) -> None:
    """infra_retries=1, max_retries=0, Spot VMs: the VM preempted with a 20 s notice; the
    task saves its step and dies of SIGTERM in it; the attempt is infra, names the
    preemption and the step saved; Batch runs the task again, it resumes there."""
    sched: GcpBatchScheduler = create_scheduler("tx")
    app_id = sched.submit(AppDef("spot", roles=[role(tmp_path, "python", ["-c", TRAIN])]),
                          {"provisioning_model": "SPOT", "infra_retries": 1})
    wait_for_line(sched, app_id, "w", 0)
    fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0, notice_s=20)  # type: ignore[union-attr]
    desc = sched.wait(app_id, timeout=90, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.SUCCEEDED, desc
    logs = "".join(sched.log_iter(app_id, "w", 0))
    saved = int(next(ln for ln in logs.splitlines() if ln.startswith("saved ")).split()[1])
    assert "started grace 30.0\n" in logs and f"resumed at {saved} grace 30.0\n" in logs, logs
    first = desc.attempts[0]
    assert first.kind == FailureKind.INFRA, desc.attempts
    assert first.reason.startswith(f"w/0: Spot VM preemption, exit code 50001; saved step {saved} in "), desc.attempts
    assert [a.text.split(" (")[0] for a in desc.attempts] == ["#0 FAILED", "#1 SUCCEEDED"], desc.attempts


def test_a_task_that_ignores_the_notice_is_killed_at_its_end(fake_gcp: FakeGcp, tmp_path: Path) -> None:
    """infra_retries=0: a task that traps SIGTERM is killed when the 1 s notice ends; the
    app FAILS as infra and tx says nothing was saved."""
    sched = create_scheduler("tx")
    app_id = sched.submit(AppDef("spot", roles=[role(tmp_path, "sh", [
        "-c", "trap 'echo warned' TERM; echo up; while true; do sleep 0.1; done"])]),
        {"provisioning_model": "SPOT", "infra_retries": 0})
    wait_for_line(sched, app_id, "w", 0)
    fake_gcp.preempt(sched.describe(app_id).metadata["job_name"], 0, notice_s=1)  # type: ignore[union-attr]
    desc = sched.wait(app_id, timeout=60, poll_interval=0.2)
    assert desc is not None and desc.state == AppState.FAILED, desc
    last = desc.attempts[-1]
    assert (last.kind, last.reason) == (
        FailureKind.INFRA, "w/0: Spot VM preemption, exit code 50001; no checkpoint saved before the kill; starts fresh"), \
        desc.attempts
    assert "warned\n" in "".join(sched.log_iter(app_id, "w", 0))
