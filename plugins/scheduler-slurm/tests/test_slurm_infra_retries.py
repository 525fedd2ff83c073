"""Infrastructure failures are not the user's: run option ``infra_retries`` on Slurm.

The cluster tests take the private cluster's own nodes down and requeue its jobs (every
``scontrol`` here goes to the session cluster through its ``SLURM_CONF``).
"""
from typing import Any

import pytest

from tx.runner import get_runner
from tx.specs import AppState, Attempt, FailureKind
from tx.testing.backends import wait_for
from tx_scheduler_slurm import _client
from tx_scheduler_slurm._attempts import build_attempts, read_attempts_file

slurm = pytest.mark.slurm


def test_attempts_tell_the_users_failures_from_the_infrastructures(tmp_path: Any) -> None:
    (tmp_path / "slurm-9.attempts").write_text("1 user 3\n\ngarbage\n3 exhausted\n")
    recorded = read_attempts_file(str(tmp_path), "9")
    assert recorded == {1: ("user", 3), 3: ("exhausted", None)}
    got = build_attempts(3, AppState.FAILED, "FAILED", recorded, ["NODE_FAIL", "REQUEUED"])
    assert [(a.kind, a.reason, a.retried) for a in got] == [
        (FailureKind.INFRA, "NODE_FAIL: a node of the job failed", True),
        (FailureKind.USER, "srun exit code 3", True),
        (FailureKind.INFRA, "requeued by Slurm (a node failure, a preemption or scontrol requeue)", True),
        (FailureKind.INFRA, "infra_retries exhausted: the job failed without running again", False),
    ]
    # the last attempt: Slurm's own end state decides where the script wrote nothing
    assert build_attempts(0, AppState.FAILED, "PREEMPTED", {}, [])[0].kind == FailureKind.INFRA
    assert build_attempts(0, AppState.FAILED, "TIMEOUT", {}, [])[0] == Attempt(
        0, AppState.FAILED, FailureKind.USER, "TIMEOUT")
    assert build_attempts(0, AppState.RUNNING, "RUNNING", {}, []) == [Attempt(0, AppState.RUNNING)]
    # a purged job (restarts unknown): counted from what was recorded
    assert len(build_attempts(-1, AppState.SUCCEEDED, "COMPLETED", {1: ("user", 2)}, [])) == 3


def _running(apps: Any, app_id: str, attempt: int) -> Any:
    """The description once the replica of ``attempt`` printed ``attempt N`` (its step runs)."""
    out = apps.job_dir / f"slurm-{app_id}-w-0.out"
    wait_for(lambda: out.exists() and f"attempt {attempt}\n" in out.read_text(), timeout=180,
             what=f"attempt {attempt} to run")
    desc = apps.sched.describe(app_id)
    assert desc.state == AppState.RUNNING and desc.num_restarts == attempt, desc
    return desc


@slurm
def test_admin_requeue_and_node_failure_do_not_spend_max_retries(apps: Any) -> None:
    """An administrator's ``scontrol requeue`` and a node that goes down under the job are
    infrastructure failures: retried within infra_retries=2 while max_retries=1 is left for
    the user's own failure (exit 3) that follows; the app then succeeds, with every attempt
    and why it ended in describe and ``tx status``."""
    script = ('n=${SLURM_RESTART_COUNT:-0}; echo "attempt $n"; '
              'if [ "$n" -lt 2 ]; then exec sleep 600; elif [ "$n" -eq 2 ]; then exit 3; fi')
    app_id = apps.submit([apps.role("w", "sh", ["-c", script], max_retries=1)], name="infra", infra_retries=2)
    _running(apps, app_id, 0)
    _client.run(["scontrol", "requeue", app_id])
    desc = _running(apps, app_id, 1)
    node = desc.roles_statuses[0].replicas[0].hostname
    try:
        _client.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=tx-test"])
        # keep it out (the test node's slurmd is alive and would register again at once)
        _client.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=tx-test"])
        wait_for(lambda: apps.sched.describe(app_id).num_restarts >= 2, timeout=60,
                 what=f"the requeue: {apps.sched.describe(app_id)}")
    finally:
        _client.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)
    desc = apps.wait(app_id, timeout=300)
    assert desc.state == AppState.SUCCEEDED and desc.num_restarts == 3, desc
    assert [(a.index, a.kind, a.retried) for a in desc.attempts] == [
        (0, FailureKind.INFRA, True), (1, FailureKind.INFRA, True), (2, FailureKind.USER, True), (3, None, False),
    ], desc.attempts
    reasons = [a.reason for a in desc.attempts]
    assert reasons == ["REQUEUED: requeued by an administrator (scontrol requeue)",
                       "NODE_FAIL: a node of the job failed", "srun exit code 3", ""], reasons
    assert desc.metadata["attempts"][0]["kind"] == "infra"
    assert apps.text(app_id, "w") == "attempt 0\nattempt 1\nattempt 2\nattempt 3\n"
    with get_runner() as runner:
        text = runner.status(f"slurm://tx/{app_id}").format()
    assert "  Attempts:\n    #0 FAILED (infra: " in text and "#2 FAILED (user: srun exit code 3), retried" in text, text


@slurm
def test_infra_retries_run_out(apps: Any) -> None:
    """infra_retries=1 with max_retries=0: the second requeue by the administrator is one
    infrastructure failure too many: the next attempt fails the job without running the app."""
    script = 'echo "attempt ${SLURM_RESTART_COUNT:-0}"; exec sleep 600'
    app_id = apps.submit([apps.role("w", "sh", ["-c", script])], name="infra-out", infra_retries=1)
    for attempt in (0, 1):
        _running(apps, app_id, attempt)
        _client.run(["scontrol", "requeue", app_id])
    desc = apps.wait(app_id, timeout=180)
    assert desc.state == AppState.FAILED and desc.num_restarts == 2, desc
    assert [(a.kind, a.retried) for a in desc.attempts] == [
        (FailureKind.INFRA, True), (FailureKind.INFRA, True), (FailureKind.INFRA, False)], desc.attempts
    assert desc.attempts[-1].reason == "infra_retries exhausted: the job failed without running again"
    assert "attempt 2" not in apps.text(app_id, "w")
    batch = (apps.job_dir / f"slurm-{app_id}.out").read_text()
    assert "[tx] infrastructure retries exhausted: 2 infrastructure failure(s), infra_retries=1" in batch, batch


def test_a_preempted_attempt_names_what_it_saved(tmp_path: Any) -> None:
    """``preempted`` lines of the batch script (tx_scheduler_slurm._preempt): warned at T,
    steps ended at E; the step saved is the newest complete checkpoint that completed by E,
    and a save after T is the attempt's; one before T (or none) is said plainly."""
    import json

    from tx_scheduler_slurm._preempt import preempted_reason, read_preempted

    (tmp_path / "slurm-9.attempts").write_text("0 preempted 143 1000 1010.5\n1 user 3\n2 preempted 1\n")
    assert read_preempted(str(tmp_path), "slurm-9.attempts") == {0: (1000.0, 1010.5, "")}
    ckpt = tmp_path / "ckpt"
    for step, done in ((40, 990.0), (41, 1003.0), (60, 1020.0)):  # 60: a later attempt's save
        (ckpt / f"step-{step:09d}").mkdir(parents=True)
        (ckpt / f"step-{step:09d}" / ".tx-complete").write_text(
            json.dumps({"step": step, "seconds": 1.25, "completed": done}))
    (ckpt / "step-000000050").mkdir()  # no marker: never counted
    assert preempted_reason("9", (1000.0, 1010.5, ""), str(ckpt)).endswith("; saved step 41 in 1.2 s")
    assert preempted_reason("9", (1005.0, 1010.5, ""), str(ckpt)).endswith(
        "; no checkpoint saved before the kill; resumed from step 41")
    assert preempted_reason("9", (1000.0, 1010.5, ""), str(tmp_path / "none")).endswith(
        "; no checkpoint saved before the kill; starts fresh")
    assert preempted_reason("9", (1000.0, 1010.5, ""), "s3://b/ckpt").startswith("preempted by Slurm (job 9 warned at ")
    got = build_attempts(1, AppState.SUCCEEDED, "COMPLETED", {0: ("preempted", 143)}, ["PENDING"], {0: "why"})
    assert [(a.kind, a.reason, a.retried) for a in got] == [(FailureKind.INFRA, "why", True), (None, "", False)]
